"""logging_clean.py: logging_dirty.py with the fix: the warning once, then a count.

usage: python3 logging_clean.py DIR [EVENTS]
"""
import logging
import os
import sys

DIR = sys.argv[1]
EVENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 50

log = logging.getLogger("app")
log.addHandler(logging.FileHandler(os.path.join(DIR, "app.log")))
log.addHandler(logging.StreamHandler())

misses = 0
for i in range(EVENTS):
    misses += 1
    if misses == 1:
        log.warning("cache miss for key %d, reloading the whole table (once)", i)
log.warning("%d cache misses", misses)
