"""sticky_kind.py: os.stat of a file from one line again and again (the agent says that
line once for the thread and path, STICKY, and no more per call), then the same file
opened by code the agent does not wrap (posix.open, the original os.open wraps, as a C
extension's own open would be). The opens are not the stat's: they must not be given its
line (crates/dejavu/tests/agent_gaps.rs,
python_a_call_the_agent_does_not_see_on_a_path_it_named_is_not_given_that_line).

usage: python3 sticky_kind.py DIR   (DIR holds data.json)"""
import os
import posix
import sys

p = os.path.join(sys.argv[1], "data.json")


def check(n):
    for _ in range(n):
        os.stat(p)  # @site stat check


def load():
    fd = posix.open(p, os.O_RDONLY)
    posix.close(fd)


check(50)
for _ in range(5):
    load()
