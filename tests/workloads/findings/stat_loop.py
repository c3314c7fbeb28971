# stat_loop.py: the program's own repeated stat, on a Python interpreter whose start-up
# (imports, site) makes redundant calls of its own. Usage: stat_loop.py FILE N
# (crates/dejavu/tests/findings.rs: with N=100 its finding ranks first; with N=1, the
# clean twin, the program has none and start-up is one folded line).
import os
import sys


def check_config(path):
    return os.stat(path).st_size  # STAT_LINE


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    total = 0
    for _ in range(n):
        total += check_config(path)
    print("stat_loop:", n, total)


main()
