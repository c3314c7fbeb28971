"""ensure-dir, clean twin (Python): the output directory is ensured once, before the
records."""
import os

out = os.path.join(os.getcwd(), "out", "chats")
os.makedirs(out, exist_ok=True)
with open(os.path.join(os.getcwd(), "records.jsonl"), "a") as log:
    for i in range(100):
        log.write('{"i": %d}\n' % i)
