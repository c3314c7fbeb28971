"""ensure-dir, dirty twin (Python): every record checks that the output directory exists
and ensures it again — os.path.exists(d) + os.makedirs(d, exist_ok=True), which stats the
parent, runs mkdir (EEXIST) and stats d again. The records go through one kept handle."""
import os

out = os.path.join(os.getcwd(), "out", "chats")
with open(os.path.join(os.getcwd(), "records.jsonl"), "a") as log:
    for i in range(100):
        if not os.path.exists(out):
            pass  # the original created it here; makedirs below tolerates it existing
        os.makedirs(out, exist_ok=True)
        log.write('{"i": %d}\n' % i)
