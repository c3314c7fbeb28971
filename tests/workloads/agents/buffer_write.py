"""buffer_write.py: a header through sys.stdout's text layer, then one result line per item
written to its bytes layer, sys.stdout.buffer.write (as flake8, pip and black write their
output). Unbuffered (`python -u`, PYTHONUNBUFFERED: the bytes layer is the FileIO itself),
each result is its own write(2), which must name the result line, not the header's.

usage: python3 buffer_write.py [ITEMS]
"""
import sys

ITEMS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def header():
    sys.stdout.write("results\n")  # @site header header
    sys.stdout.flush()


def report(n):
    for i in range(n):
        sys.stdout.buffer.write(b"src/a.py:%d:1: E501 line too long\n" % (i + 1))  # @site result report


header()
report(ITEMS)
