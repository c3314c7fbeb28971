"""repeats_cwd.py: one line stats the same relative path in loops from two working
directories, for the repeated-call test of the working directory
(crates/dejavu/tests/agents.rs): the agent's entry for a relative path holds the directory
it was said in, so the calls after a chdir are said again (the path they name is another
file); every call must still name its line.
Each `@line NAME` marks a line whose calls the test counts.

usage: python3 repeats_cwd.py DIR   (makes DIR/a/stat and DIR/b/stat)"""
import os
import sys

d = sys.argv[1]
for sub in ("a", "b"):
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
