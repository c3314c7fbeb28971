"""library.py: the program's line behind a package's call several frames deep (the test lays
out library/deeppkg.py as site-packages/deeppkg/__init__.py beside this file).

usage: python3 library.py FILE
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
from deeppkg import cache  # noqa: E402


def handle_request(p):
    return cache.lookup(p)  # @site library handle_request


handle_request(sys.argv[1])
