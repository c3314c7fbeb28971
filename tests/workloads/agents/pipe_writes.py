"""pipe_writes.py: 50 messages sent on a pipe the program made with os.pipe(), one small
os.write per message (dirty), or joined into one write (clean: `pipe_writes.py clean`),
then read back, for the agent-gaps test (crates/dejavu/tests/agent_gaps.rs): os.write is
not wrapped (the standard library takes it at import, as multiprocessing's queues do), so
the writes are the line that made the pipe. With `fork`, a forked child makes the writes
on the descriptor it inherited (as multiprocessing's workers send their results): they
are that line too. Each `@site NAME FUNCTION` marks a line the test looks for.

usage: python3 pipe_writes.py [clean] [fork]"""
import os
import sys


def make_channel():
    return os.pipe()  # @site pipe make_channel


def main():
    r, w = make_channel()
    msgs = [b"job %d\n" % i for i in range(50)]
    child = os.fork() if "fork" in sys.argv[1:] else None
    if child is None or child == 0:
        if child == 0:
            os.close(r)
        if "clean" in sys.argv[1:]:
            os.write(w, b"".join(msgs))
        else:
            for m in msgs:
                os.write(w, m)
        if child == 0:
            os._exit(0)
    os.close(w)
    got = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        got += b
    os.close(r)
    if child:
        os.waitpid(child, 0)
    print(f"pipe_writes.py: {got.count(b'job')} messages")


main()
