"""negative-probe, dirty: every request checks for an optional override file that is
never there."""
import os
import sys

override = os.path.join(sys.argv[1], "override.json")
served = 0
for request in range(100):
    if os.path.exists(override):  # ENOENT, 100 times, nothing created in between
        served -= 1
    served += 1
print(f"served {served}")
