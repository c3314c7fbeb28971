"""repeats.py: the same paths called from several lines, for the repeated-call tests
(crates/dejavu/tests/agents.rs; the agent's STICKY, docs/agents.md "Repeated calls").
Each `@line NAME` marks a line whose calls the test counts.

usage: python3 repeats.py DIR   (DIR holds the files `stat` and `phase`)"""
import os
import sys

d = sys.argv[1]
p = os.path.join(d, "stat")
q = os.path.join(d, "phase")


def loop_a():
    for _ in range(200):
        os.stat(p)  # @line A


def once():
    os.access(p, os.R_OK)  # @line X


def interleaved():
    for _ in range(20):
        os.stat(p)  # @line B
        os.lstat(p)  # @line C
        os.stat(p)  # @line D


def phase_f():
    for _ in range(300):
        os.stat(q)  # @line F


def phase_e():
    for _ in range(300):
        os.stat(q)  # @line E


loop_a()
once()
interleaved()
phase_f()
phase_e()
