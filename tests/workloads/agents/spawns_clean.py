"""spawns_clean.py: spawns_dirty.py with the fix: each command runs once, and every event
reuses its result.

usage: python3 spawns_clean.py [EVENTS]
"""
import os
import subprocess
import sys

EVENTS = int(sys.argv[1]) if len(sys.argv) > 1 else 12

ran = subprocess.run(["true", "run"], check=True).returncode
output = subprocess.check_output(["true", "output"])
status = os.system("/bin/true system")
seen = sum(ran + len(output) + status for _ in range(EVENTS))
sys.exit(0 if seen == 0 else 1)
