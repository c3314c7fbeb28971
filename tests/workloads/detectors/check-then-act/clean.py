# check-then-act, clean twin: easier to ask forgiveness. Open the file and handle the
# error where the check's false branch was.
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
PATH = "input.txt"

with open(PATH, "w") as f:
    f.write("payload\n")

total = 0
for i in range(N):
    try:
        with open(PATH) as f:
            total += len(f.read())
    except (FileNotFoundError, PermissionError):
        pass
print(total)
