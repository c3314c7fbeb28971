"""reread-unchanged, dirty twin: every request re-reads and re-parses config.json.

Usage: dirty.py [REQUESTS] [PAUSE_AT]
With PAUSE_AT, it prints "paused" before request PAUSE_AT and waits for a line on stdin,
so a test can rewrite config.json from outside the trace at a known point.
"""
import json
import sys


def handle(i):
    with open("config.json") as f:
        cfg = json.load(f)
    return f"{cfg['greeting']} #{i}"


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    pause_at = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    replies = []
    for i in range(n):
        if i == pause_at:
            print("paused", flush=True)
            sys.stdin.readline()
        replies.append(handle(i))
    print(f"{len(replies)} replies, last: {replies[-1]}")


main()
