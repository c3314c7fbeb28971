"""ensure-dir, dirty twin (Python): pip's ensure_dir per file it unpacks. Each file's
directory is made with os.makedirs(d), whose EEXIST is caught: makedirs stats the parent
first, then mkdir(d) fails with EEXIST. Both calls are the one idiom: ensuring each
directory once drops them together."""
import errno
import os

root = os.path.join(os.getcwd(), "site")


def ensure_dir(path):
    try:
        os.makedirs(path)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise


for pkg in ("alpha", "beta"):
    for i in range(60):
        target = os.path.join(root, pkg, "data", "f%d.txt" % i)
        ensure_dir(os.path.dirname(target))
        with open(target, "w") as f:
            f.write("x")
