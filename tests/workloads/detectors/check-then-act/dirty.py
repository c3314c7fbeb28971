# check-then-act, dirty twin: look before you leap. Every read first asks whether the file
# exists (os.path.exists: stat) or is readable (os.access: access), then opens it — and
# open answers both questions itself. Run in a scratch directory.
import os
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
PATH = "input.txt"

with open(PATH, "w") as f:
    f.write("payload\n")

total = 0
for i in range(N):
    if i % 2 == 0:
        ok = os.path.exists(PATH)  # stat, then open + fstat: the stat was for nothing
    else:
        ok = os.access(PATH, os.R_OK)  # access, then open
    if ok:
        with open(PATH) as f:
            total += len(f.read())
print(total)
