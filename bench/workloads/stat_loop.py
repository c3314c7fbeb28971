"""stat_loop.py: the Python stat-heavy workload of bench/overhead.py.

os.stat of the same file N times (default 200000), then one line on stdout that
depends only on N and the file, so the benchmark can check that a tracer did not
change what the program did.

usage: python3 stat_loop.py [N] [FILE]   (FILE defaults to this script)
"""
import os
import sys


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    path = sys.argv[2] if len(sys.argv) > 2 else __file__
    if n < 0:
        print("usage: python3 stat_loop.py [N] [FILE]", file=sys.stderr)
        return 2
    # Summing the sizes keeps the calls observable.
    total = 0
    for _ in range(n):
        total += os.stat(path).st_size
    print(f"stat_loop.py: {n} os.stat, size sum {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
