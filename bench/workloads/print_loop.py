"""print_loop.py: the Python print-heavy workload of bench/agents.py.

print() of N short lines (default 200000) to stdout or to stderr, then one line on stdout
that depends only on N, so the benchmark can check that a tracer did not change what the
program did. Under bench/agents.py both streams are pipes: stdout block-buffered (its
writes only buffer; the agent wraps its flush alone), stderr line-buffered (each print is
a write(2), which the agent names: docs/agents.md, "What the Python agent wraps").

usage: python3 print_loop.py [N] [out|err]
"""
import sys


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    stream = sys.argv[2] if len(sys.argv) > 2 else "out"
    if n < 0 or stream not in ("out", "err"):
        print("usage: python3 print_loop.py [N] [out|err]", file=sys.stderr)
        return 2
    f = sys.stdout if stream == "out" else sys.stderr
    for i in range(n):
        print("line", i, file=f)
    print(f"print_loop.py: {n} lines to std{stream}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
