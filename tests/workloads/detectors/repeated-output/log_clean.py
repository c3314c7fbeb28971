# repeated-output, clean twin of log_dirty.py: the configuration is checked once, at
# start-up, and the warning logged once.
#
# Usage: python3 log_clean.py LOGFILE [REQUESTS]
import logging
import sys

logging.basicConfig(
    filename=sys.argv[1],
    filemode="w",
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    level=logging.INFO,
)
log = logging.getLogger("orders")
settings = {"cache": None}
if settings["cache"] is None:
    log.warning("no cache configured, reading prices from disk")


def handle(request):
    return sum(request)


n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
total = 0
for i in range(n):
    total += handle([i, i + 1])
log.info("handled %d requests", n)
print(total)
