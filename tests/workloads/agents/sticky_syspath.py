"""sticky_syspath.py: a function that checks each sys.path directory (os.path.isdir, as
pip's find_eggs does), called twice, then imports that fail: each failed import makes the
import system stat the sys.path directories itself (posix.stat, which the agent does not
wrap: the same system call). Those stats are the import system's, not the isdir line's.

usage: python3 sticky_syspath.py IMPORTS
"""
import os
import sys


def scan():
    return [d for d in sys.path if os.path.isdir(d or ".")]  # @site scan scan


scan()
scan()
for i in range(int(sys.argv[1])):
    try:
        __import__("no_such_module_%d" % i)
    except ImportError:
        pass
