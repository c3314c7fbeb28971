# small-writes, clean twin: the same lines through a buffered file object; the buffer is
# flushed once, when the file is closed.
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
with open("out.log", "wb") as f:
    for i in range(N):
        f.write(b"event %d ok\n" % i)
