"""callsites.py: file calls from known lines, each on a file of its own, for the call-site
tests (crates/dejavu/tests/agents.rs): each `@site NAME FUNCTION` marks the line whose
calls on DIR/NAME must carry that line and function as their innermost frame.

usage: python3 callsites.py DIR   (DIR holds a file for each site name)
"""
import os
import pathlib
import subprocess
import sys
import threading

DIR = sys.argv[1]


def at(name):
    return os.path.join(DIR, name)


def stat_site():
    return os.stat(at("stat")).st_size  # @site stat stat_site


def exists_site():
    return os.path.exists(at("exists"))  # @site exists exists_site


class Store:
    def load(self):
        return pathlib.Path(at("pathlib")).stat()  # @site pathlib Store.load


def open_site():
    with open(at("open")) as f:  # @site open open_site
        return f.read()


def fileobj_site():
    f = open(at("fileobj"), "r+")  # @site fileobj fileobj_site
    return f


def use_fileobj(f):
    # The file object's read, write (at its flush) and close come after open returned.
    f.read()
    f.write("more")
    f.close()


def thread_site():
    os.stat(at("thread"))  # @site thread thread_site


def makedirs_site():
    os.makedirs(at("makedirs-dir/a/b"), exist_ok=True)  # @site makedirs-dir makedirs_site


stat_site()
stat_site()
exists_site()
Store().load()
open_site()
use_fileobj(fileobj_site())
t = threading.Thread(target=thread_site)
t.start()
t.join()
makedirs_site()
subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "callsites_child.py"), at("child")], check=True)
pid = os.fork()
if pid == 0:
    try:
        os.stat(at("fork"))  # @site fork <module>
    finally:
        os._exit(0)
os.waitpid(pid, 0)
print("callsites.py done")
