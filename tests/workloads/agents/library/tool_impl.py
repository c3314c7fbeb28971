"""The installed tool's code (the test lays this out as site-packages/_tool/__init__.py,
a package of the same distribution beside `tool`, as _pytest is beside pytest).

usage (through tool/__main__.py): python3 -m tool FILE N
"""
import os


def probe(path):
    return os.stat(path).st_size  # @site probe probe


def main(argv):
    total = 0
    for _ in range(int(argv[1])):
        total += probe(argv[0])
    print(total)
    return 0
