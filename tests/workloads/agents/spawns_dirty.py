"""spawns_dirty.py: a process per event, three ways (repeated-exec, crates/dejavu/tests/
agent_gaps.rs): each `@site NAME` line starts the same command once per event, and the
finding on that command must name the line.

usage: python3 spawns_dirty.py [EVENTS]
"""
import os
import subprocess
import sys

EVENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 12


def run_event():
    subprocess.run(["true", "run"], check=True)  # @site run run_event


def output_event():
    return subprocess.check_output(["true", "output"])  # @site output output_event


def system_event():
    os.system("/bin/true system")  # @site system system_event


for _ in range(EVENTS):
    run_event()
for _ in range(EVENTS):
    output_event()
for _ in range(EVENTS):
    system_event()
