"""repeats_cwd.py: one line stats the same relative path in loops from two working
directories, for the repeated-call test of the working directory
(crates/dejavu/tests/agents.rs): the agent's entry for a relative path holds the directory
it was said in, so the calls after a chdir are said again (the path they name is another
file); every call must still name its line. The third directory is entered with
os.fchdir. The agent reads the working directory once, not at every call on a relative
path: os.getcwd is wrapped here to count the agent's reads of it (the agent calls it
through the os module), printed at the end ("getcwd calls: N").
Each `@line NAME` marks a line whose calls the test counts.

usage: python3 repeats_cwd.py DIR   (makes DIR/a/stat, DIR/b/stat and DIR/c/stat)"""
import os
import sys

reads = 0
real_getcwd = os.getcwd


def counted_getcwd():
    global reads
    reads += 1
    return real_getcwd()


os.getcwd = counted_getcwd

d = sys.argv[1]
for sub in ("a", "b", "c"):
    os.makedirs(os.path.join(d, sub), exist_ok=True)
    # os.open, not open(): open() stats what it opened, a call the test would count.
    fd = os.open(os.path.join(d, sub, "stat"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, sub.encode())
    os.close(fd)


def loop():
    for _ in range(300):
        os.stat("stat")  # @line S


for sub in ("a", "b"):
    os.chdir(os.path.join(d, sub))
    loop()
fd = os.open(os.path.join(d, "c"), os.O_RDONLY)
os.fchdir(fd)
os.close(fd)
loop()
print(f"getcwd calls: {reads}")
