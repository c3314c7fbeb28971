"""repeated-exec, clean twin: runs `git --version` once and reuses the answer.

Usage: clean.py [ITEMS]
"""
import subprocess
import sys


def git_version():
    out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    version = git_version()
    tagged = [f"item{i} built with {version}" for i in range(n)]
    print(f"{len(tagged)} items, last: {tagged[-1]}")


main()
