"""ensure-dir, clean twin of makedirs_per_file_dirty.py: the same files, each directory
made once (a set of the directories made so far)."""
import errno
import os

root = os.path.join(os.getcwd(), "site")
made = set()


def ensure_dir(path):
    if path in made:
        return
    try:
        os.makedirs(path)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    made.add(path)


for pkg in ("alpha", "beta"):
    for i in range(60):
        target = os.path.join(root, pkg, "data", "f%d.txt" % i)
        ensure_dir(os.path.dirname(target))
        with open(target, "w") as f:
            f.write("x")
