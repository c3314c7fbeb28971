"""sticky_lstat.py: os.lstat of a directory from one line again and again (as a realpath
or Path.resolve() of a file in it does; the agent says that line once for the thread and
path, STICKY, and no more per call), then imports of modules from that directory: before
each, the import system stats the directory (its mtime) with posix.stat, which the agent
does not wrap, through the same system call as os.lstat without AT_SYMLINK_NOFOLLOW.
Those stats are the import system's: they must not be given the lstat's line
(crates/dejavu/tests/agent_gaps.rs,
python_the_import_systems_stat_of_a_directory_the_program_lstats_is_not_given_its_line).

usage: python3 sticky_lstat.py DIR   (DIR holds m0.py ... m9.py)"""
import os
import sys

d = sys.argv[1]


def resolve(n):
    for _ in range(n):
        os.lstat(d)  # @site lstat resolve


resolve(50)
sys.path.insert(0, d)
for i in range(10):
    __import__(f"m{i}")
