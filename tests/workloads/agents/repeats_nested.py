"""repeats_nested.py: a loop stats one path from one line, and once, in the middle, a
logging handler's emit (a call the agent wraps) writes to a stream whose write() stats the
same path from a line of its own, for the repeated-call test of calls made inside a
wrapped call (crates/dejavu/tests/agents.rs): the loop's calls take the agent's fast path,
which must not take the calls inside emit too (they are emit's nested calls, each named
at its own line). Each `@line NAME` marks a line whose calls the test counts.

usage: python3 repeats_nested.py DIR   (DIR holds the file `stat`)"""
import logging
import os
import sys

p = os.path.join(sys.argv[1], "stat")


class Stream:
    def write(self, s):
        for _ in range(50):
            os.stat(p)  # @line N

    def flush(self):
        pass


log = logging.getLogger("nested")
log.propagate = False
log.addHandler(logging.StreamHandler(Stream()))

for i in range(900):
    os.stat(p)  # @line M
    if i == 600:
        log.warning("once")
