# repeated-output, clean twin: a filter streaming its result rows to stdout. Many rows are
# identical (the same status for many orders): that is the program's product, not a log.
#
# Usage: python3 filter_clean.py [ROWS] > out.csv
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
out = sys.stdout
out.write("id,status,amount\n")
for i in range(n):
    status = "shipped" if i % 3 else "pending review by the team"
    out.write(f"{i},{status},{(i * 7) % 100}\n")
    out.write("shipped,0\n" if i % 2 else "")
    out.flush()
