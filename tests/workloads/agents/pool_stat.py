"""pool_stat.py: a forked multiprocessing worker stats a file per task, through a function
of the standard library (os.stat itself): no frame of the program's own is on the worker's
stack above BaseProcess._bootstrap. Below it lie the parent's frames the fork copied,
down to the line that made the pool, which the worker never returns to: its calls must
not be named there. With `own`, the task is a function of the script's: named at its
line.

usage: python3 pool_stat.py PATH [own]
"""
import multiprocessing
import os
import sys


def task(path):
    return os.stat(path).st_size  # @site task task


def main(path, own):
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:  # @site pool main
        pool.map(task if own else os.stat, [path] * 20, chunksize=20)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["own"])
