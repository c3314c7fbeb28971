"""stat_helper.py: the Python workload of bench/agents.py for a helper doing I/O on one
path for two callers: a helper `run` that os.stat's one file n times, called from one line
for a warm-up of 100 calls, then from another for N calls (default 200000). A site
includes the callers, so the second line's calls switch the path's site (the agent's
"Repeated calls", docs/agents.md). One line on stdout that depends only on N and the file.

usage: python3 stat_helper.py [N] [FILE]   (FILE defaults to this script)
"""
import os
import sys


def run(path: str, k: int) -> int:
    # Summing the sizes keeps the calls observable.
    total = 0
    for _ in range(k):
        total += os.stat(path).st_size
    return total


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    path = sys.argv[2] if len(sys.argv) > 2 else __file__
    if n < 0:
        print("usage: python3 stat_helper.py [N] [FILE]", file=sys.stderr)
        return 2
    run(path, 100)  # the warm-up
    total = run(path, n)  # the timed run
    print(f"stat_helper.py: {n} os.stat, size sum {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
