"""unnamed_place.py: calls the agent names, then calls it does not name from the same
native place (crates/dejavu/tests/agents.rs,
a_place_the_agent_stops_naming_gets_native_stacks_again).

The agent wraps os.stat; posix.stat is the original it wraps. Both are called from one
line, so the interpreter's C stack at the system call is the same for both: the eBPF
backend first learns that the agent names the calls made there (and stops copying the
stack), then sees calls there that the agent did not name (posix.stat, on another path
than the one os.stat's calls were said on), and must go back to copying: the calls made
before the reader took the place out of the kernel's cache go without a stack, the rest
have theirs.

usage: python3 unnamed_place.py DIR   (DIR holds the files `stat` and `other`)"""
import os
import posix
import sys
import time

p = os.path.join(sys.argv[1], "stat")
q = os.path.join(sys.argv[1], "other")


def loop(f, path, n):
    for _ in range(n):
        f(path)  # @line L


loop(os.stat, p, 300)
# Time for dejavu to read the calls so far and tell the kernel the agent names this place
# (it reads every millisecond; a loaded machine delays it): the next loop then starts at
# a place the kernel leaves to the agent.
time.sleep(1)
loop(posix.stat, q, 100000)
