"""repeats_threads.py: two threads stat the same path in loops from their own lines at the
same time, for the repeated-call test with threads (crates/dejavu/tests/agents.rs): the
agent keeps one entry per path, for the thread that called last, so the threads take it
from each other; every call must still name its own line. The main thread stats the path
first, alone (the agent's fast path then needs no test of the thread, until a thread
starts): the threads' first calls must not ride its entry.
Each `@line NAME` marks a line whose calls the test counts.

usage: python3 repeats_threads.py DIR   (DIR holds the file `stat`)"""
import os
import sys
import threading

p = os.path.join(sys.argv[1], "stat")
go = threading.Barrier(2)


def left():
    go.wait()
    for _ in range(300):
        os.stat(p)  # @line L


def right():
    go.wait()
    for _ in range(300):
        os.stat(p)  # @line R


for _ in range(100):
    os.stat(p)  # @line M

ts = [threading.Thread(target=left), threading.Thread(target=right)]
for t in ts:
    t.start()
for t in ts:
    t.join()
