"""negative-probe, clean: the same work, checking for the override once at start-up."""
import os
import sys

override = os.path.join(sys.argv[1], "override.json")
has_override = os.path.exists(override)
served = 0
for request in range(100):
    if has_override:
        served -= 1
    served += 1
print(f"served {served}")
