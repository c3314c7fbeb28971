# small-writes, dirty twin: unbuffered output, one os.write per line (what python3 -u or
# a hand-rolled logger does). Run in a scratch directory.
import os
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
fd = os.open("out.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(N):
    os.write(fd, b"event %d ok\n" % i)
os.close(fd)
