"""repeated-exec, dirty twin: runs `git --version` once per item (and Python's
subprocess searches PATH for git every time).

Usage: dirty.py [ITEMS]
"""
import subprocess
import sys


def git_version():
    out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    tagged = [f"item{i} built with {git_version()}" for i in range(n)]
    print(f"{len(tagged)} items, last: {tagged[-1]}")


main()
