# repeated-output, dirty twin of filter_clean.py: the same rows, and a warning printed to
# stdout for every row, the same sentence each time.
#
# Usage: python3 filter_dirty.py [ROWS] > out.csv
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
out = sys.stdout
out.write("id,status,amount\n")
for i in range(n):
    status = "shipped" if i % 3 else "pending review by the team"
    print("warning: the amount column has no currency, assuming EUR")
    out.write(f"{i},{status},{(i * 7) % 100}\n")
    out.write("shipped,0\n" if i % 2 else "")
    out.flush()
