"""pipe_writes.py: 50 messages sent on a pipe the program made with os.pipe(), one small
os.write per message (dirty), or joined into one write (clean: `pipe_writes.py clean`),
then read back, for the agent-gaps test (crates/dejavu/tests/agent_gaps.rs): os.write is
not wrapped (the standard library takes it at import, as multiprocessing's queues do), so
the writes are the line that made the pipe. Each `@site NAME FUNCTION` marks a line the
test looks for.

usage: python3 pipe_writes.py [clean]"""
import os
import sys


def make_channel():
    return os.pipe()  # @site pipe make_channel


def main():
    r, w = make_channel()
    msgs = [b"job %d\n" % i for i in range(50)]
    if "clean" in sys.argv[1:]:
        os.write(w, b"".join(msgs))
    else:
        for m in msgs:
            os.write(w, m)
    os.close(w)
    got = b""
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        got += b
    os.close(r)
    print(f"pipe_writes.py: {got.count(b'job')} messages")


main()
