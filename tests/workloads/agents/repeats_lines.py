"""repeats_lines.py: many paths, each called a few times from several lines, for the
repeated-call test of a path's first calls (crates/dejavu/tests/agents.rs): a loop that
checks each path at one line and again, later, at another (exists, then isfile, once per
path; pip's unpacking, then its .pyc compile loop) calls each path from each line once or
twice. Every call must name its own line: the agent checks each of a path's first calls.
Each `@line NAME` marks a line whose calls the test counts.

usage: python3 repeats_lines.py DIR   (makes DIR/each)"""
import os
import sys

d = os.path.join(sys.argv[1], "each")
os.mkdir(d)
ones = [os.path.join(d, "one%d" % i) for i in range(40)]
twos = [os.path.join(d, "two%d" % i) for i in range(40)]
for p in ones + twos:
    open(p, "w").close()  # @line O

for p in ones:
    os.path.exists(p)  # @line A
for p in ones:
    os.path.isfile(p)  # @line B
for p in ones:
    os.path.getsize(p)  # @line C

for p in twos:
    for _ in range(2):
        os.path.exists(p)  # @line E
for p in twos:
    os.path.isfile(p)  # @line F
