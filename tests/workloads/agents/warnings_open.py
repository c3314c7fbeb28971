"""warnings_open.py: open() warns (from C) about line buffering in binary mode, naming the
line that called it; a filter on the program's module silences it. Under dejavu the
warning must name the same line, and the filter must still match (the agent's wrapper is
between them).

usage: python3 warnings_open.py filtered|plain FILE"""
import sys
import warnings

if sys.argv[1] == "filtered":
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="__main__")
with open(sys.argv[2], "wb", buffering=1) as f:
    f.write(b"x")
print("done")
