"""logging_dirty.py: the same warning logged for every event, to a log file and to
stderr (logging's FileHandler and StreamHandler): each write of a record must carry the
logging call's line.

usage: python3 logging_dirty.py DIR [EVENTS]   (the log file is DIR/app.log)
"""
import logging
import os
import sys

DIR = sys.argv[1]
EVENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 50

log = logging.getLogger("app")
log.addHandler(logging.FileHandler(os.path.join(DIR, "app.log")))  # @site handler <module>
log.addHandler(logging.StreamHandler())


def on_event(i):
    log.warning("cache miss for key %d, reloading the whole table", i)  # @site warning on_event


for i in range(EVENTS):
    on_event(i)
