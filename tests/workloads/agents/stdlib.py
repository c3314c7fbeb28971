"""stdlib.py: a call the program makes through the standard library, for the runtime-frame
tests (crates/dejavu/tests/agents.rs): os.path.isdir (genericpath) calls os.stat on
DIR/isdir; its stack holds genericpath's frame and, further out, the line marked
`@site` (which names its function).

usage: python3 stdlib.py DIR
"""
import os
import sys


def probe(path):
    return os.path.isdir(path)  # @site isdir probe


print("stdlib.py done", probe(os.path.join(sys.argv[1], "isdir")))
