"""helper.py: a helper doing I/O on one path for two callers, one after the other (a
warm-up of 50 calls, then 2000), for the test that a path whose site switched once is not
checked at every call for good (crates/dejavu/tests/agents.rs; docs/agents.md "Repeated
calls"). Each `@line NAME` marks a caller whose calls the test counts. Prints how many
frame walks the agent started from the warm-up on (its calls of sys._getframe, counted by a
profile function, as switch.py).

usage: python3 helper.py DIR   (DIR holds the file `stat`)"""
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
run(p, 50)  # @line W
run(p, 2000)  # @line T
sys.setprofile(None)
print(f"walks {walks} for 2050 stats")
