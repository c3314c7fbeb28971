"""reread-unchanged, clean twin: config.json is read once and the parsed value reused."""
import json
import sys

_config = None


def config():
    global _config
    if _config is None:
        with open("config.json") as f:
            _config = json.load(f)
    return _config


def handle(i):
    return f"{config()['greeting']} #{i}"


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    replies = [handle(i) for i in range(n)]
    print(f"{len(replies)} replies, last: {replies[-1]}")


main()
