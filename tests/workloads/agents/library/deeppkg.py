"""deeppkg: a package the program uses (the test lays it out as site-packages/deeppkg),
whose file call is several frames deep in its own code, one of them a callback."""
import os


def _stat_file(p):
    return os.stat(p)


def _load_entry(p):
    return _stat_file(p)


def _load_all(paths):
    return list(map(_load_entry, paths))


class Cache:
    def lookup(self, p):
        return _load_all([p])[0]


cache = Cache()
