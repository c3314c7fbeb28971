"""crash.py: a program that dies of a file error, the way the user would see it: the
traceback Python prints and the exit status. Compared with and without dejavu's Python
agent by crates/dejavu/tests/agents.rs.

usage: python3 crash.py main|thread|exit DIR
"""
import os
import sys
import threading

mode, directory = sys.argv[1], sys.argv[2]
missing = os.path.join(directory, "missing")


def read_config(path):
    with open(path) as f:
        return f.read()


if mode == "main":
    read_config(missing)
elif mode == "thread":
    t = threading.Thread(target=os.listdir, args=(missing,), name="lister")
    t.start()
    t.join()
    print("main thread goes on")
elif mode == "exit":
    try:
        os.stat(missing)
    except FileNotFoundError as e:
        sys.exit(f"no such file: {os.path.basename(e.filename)}")
else:
    sys.exit(2)
