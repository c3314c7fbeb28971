"""print_clean.py: print_dirty.py with the fix: the count once at the end, the warning
once, then a count.

usage: python3 print_clean.py [ITEMS]
"""
import sys

ITEMS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
bypassed = 0


def on_item(i):
    global bypassed
    if bypassed == 0:
        print("bypassing authentication (items); counting the rest", file=sys.stderr)
    bypassed += 1


for i in range(ITEMS):
    on_item(i)
print("%d items, %d bypassed authentication" % (ITEMS, bypassed), file=sys.stderr)
print("%d items done" % ITEMS)
