"""blocks.py: a helper doing I/O on one path, called from two lines that take turns in
blocks (30 times: 20 calls from A, then 20 from B), for the test that the agent's checks of
a switched path, which decay after a calm run, still name the lines but for a bounded price
(crates/dejavu/tests/agents.rs; docs/agents.md "Repeated calls"). Each `@line NAME` marks a
caller whose calls the test counts. Prints the agent's frame walks (counted as in
switch.py).

usage: python3 blocks.py DIR   (DIR holds the file `stat`)"""
import os
import sys

p = os.path.join(sys.argv[1], "stat")
walks = 0


def count(frame, event, arg):
    global walks
    if event == "c_call" and getattr(arg, "__name__", "") == "_getframe":
        walks += 1


def run(path, n):
    for _ in range(n):
        os.stat(path)


sys.setprofile(count)
for _ in range(30):
    run(p, 20)  # @line A
    run(p, 20)  # @line B
sys.setprofile(None)
print(f"walks {walks} for 1200 stats")
