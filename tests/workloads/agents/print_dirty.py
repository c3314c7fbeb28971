"""print_dirty.py: a progress dot flushed per item to stdout (pytest's progress, a
script's `print(".", end="", flush=True)`) and the same warning printed per item to
stderr, with a checkpoint line from another line every tenth item: each write(2) must
carry its print line, whichever way the stream buffers (a file or a pipe: block-buffered
stdout, line-buffered stderr; `python -u`: unbuffered). With `exit`, it ends with an
uncaught SystemExit, whose message the interpreter writes with no Python frame left:
that write names no line.

usage: python3 print_dirty.py [ITEMS] [exit]
"""
import sys

ITEMS = int(sys.argv[1]) if len(sys.argv) > 1 else 50


def on_item(i):
    print(".", end="", flush=True)  # @site dot on_item
    print("bypassing authentication for item", i, file=sys.stderr)  # @site warn on_item
    if i % 10 == 9:
        print("checkpoint", i, file=sys.stderr)  # @site checkpoint on_item


for i in range(ITEMS):
    on_item(i)
sys.stdout.write("\ndone\n")  # @site done <module>
if sys.argv[2:] == ["exit"]:
    raise SystemExit("stopped")
