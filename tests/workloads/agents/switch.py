"""switch.py: one path read by one function, then stat'ed N times from one line, for
the test that a switch of function on a path does not make the agent check that path's
site at every call (crates/dejavu/tests/agents.rs). Prints how many frame walks the
agent started (its calls of sys._getframe, counted by a profile function).

usage: python3 switch.py FILE N"""
import os
import sys

path, n = sys.argv[1], int(sys.argv[2])
walks = 0


def count(frame, event, arg):
    global walks
    if event == "c_call" and getattr(arg, "__name__", "") == "_getframe":
        walks += 1


os.access(path, os.R_OK)
sys.setprofile(count)
for _ in range(n):
    os.stat(path)
sys.setprofile(None)
print(f"walks {walks} for {n} stats")
