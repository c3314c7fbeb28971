"""A tiny "request handler" that repeats file work for nothing, as real programs do.

For every request it checks the config file exists, stats it, reads it again, makes sure
the log directory exists and appends one line to a log file it opens and closes each time.
`scripts/demo` records it with dejavu and prints the report.
"""

import json
import os
import sys
import tempfile

root = tempfile.mkdtemp(prefix="dejavu-demo-")
config = os.path.join(root, "config.json")
logdir = os.path.join(root, "logs")
with open(config, "w") as f:
    json.dump({"greeting": "hello"}, f)


def handle(request: int) -> str:
    if not os.path.exists(config):  # the existence check before the open
        return "no config"
    os.stat(config)  # the stat of an unchanged file
    with open(config) as f:  # the re-read of an unchanged file
        greeting = json.load(f)["greeting"]
    os.makedirs(logdir, exist_ok=True)  # the mkdir of an existing directory
    with open(os.path.join(logdir, "access.log"), "a") as log:  # open/close per write
        log.write(f"request {request} ok\n")
    return f"{greeting} #{request}"


requests = int(sys.argv[1]) if len(sys.argv) > 1 else 100
for i in range(requests):
    handle(i)
print(f"handled {requests} requests; files in {root}")
