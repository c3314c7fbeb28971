"""sticky_import.py: a loop that asks the import system for a module (PathFinder.find_spec:
its FileFinder stats the module's file with posix.stat, which the agent does not wrap) and
then checks the same file with os.path.exists, 12 times (ansible's module_common: its
_slurp's exists() beside find_spec of each module it packs). After the second exists the
path is sticky for the thread; the import system's stats of it are not the exists line's
(crates/dejavu/tests/agent_gaps.rs,
python_the_import_systems_stat_of_a_path_a_line_made_sticky_is_not_given_its_line).

usage: python3 sticky_import.py DIR   (DIR/six/__init__.py exists)"""
import importlib.machinery
import os
import sys

root = sys.argv[1]
init = os.path.join(root, "six", "__init__.py")


def pack():
    for _ in range(12):
        importlib.machinery.PathFinder.find_spec("six", [root])
        os.path.exists(init)  # @site exists pack


pack()
