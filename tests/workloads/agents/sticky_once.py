"""sticky_once.py: os.path.isfile of each of 20 files once (compileall's check before it
compiles a file), then each file stat'ed twice by code the agent does not wrap
(posix.stat, as py_compile's stats through the import system are). The unwrapped stats
are not the isfile line's: a path named once is said with ENTER and EXIT, not made sticky
(crates/dejavu/tests/agent_gaps.rs,
python_a_path_checked_once_does_not_give_its_line_to_later_unwrapped_calls).

usage: python3 sticky_once.py DIR   (DIR holds f00.py .. f19.py)"""
import os
import posix
import sys

files = [os.path.join(sys.argv[1], f"f{i:02}.py") for i in range(20)]


def compile_all():
    for f in files:
        if os.path.isfile(f):  # @site isfile compile_all
            posix.stat(f)
            posix.stat(f)


compile_all()
