"""behaviour.py: everything a program can observe of the file functions dejavu's Python
agent wraps (os, io/builtins open, os.path, pathlib, shutil), printed one line at a time,
so a run with the agent can be compared byte for byte with a run without it
(crates/dejavu/tests/agents.rs). Results, exceptions (ENOENT, EISDIR, ENOTDIR, bad
arguments), signatures, identities, the os.supports_* sets, threads, forks, subprocesses.

usage: python3 behaviour.py DIR   (DIR: an empty scratch directory)
"""

import inspect
import io
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import traceback

DIR = sys.argv[1]


def out(what, v):
    print(f"{what}: {v!r}".replace(DIR, "DIR"), flush=True)


def error(e):
    """What a program sees of an exception (its traceback as (file, line, function))."""
    tb = [(os.path.basename(f.filename), f.lineno, f.name) for f in traceback.extract_tb(e.__traceback__)]
    return (
        type(e).__name__,
        e.args,
        getattr(e, "errno", None),
        getattr(e, "strerror", None),
        getattr(e, "filename", None),
        getattr(e, "filename2", None),
        str(e),
        tb,
        e.__context__ is None,
        e.__cause__ is None,
    )


def attempt(what, f):
    try:
        out(what, f())
    except Exception as e:
        out(what + " raised", error(e))


def stats(st):
    return (st.st_size, st.st_mode, st.st_nlink)


a = os.path.join(DIR, "a.txt")
sub = os.path.join(DIR, "sub")
missing = os.path.join(DIR, "missing")

with open(a, "w") as f:
    out("write returns", f.write("hello\n"))
attempt("open text read", lambda: open(a).read())
attempt("open binary read", lambda: open(a, "rb").read())
attempt("open type", lambda: type(open(a, "rb", buffering=0)).__name__)
attempt("io.open is open", lambda: io.open is open)
attempt("open missing", lambda: open(missing))
attempt("open EISDIR", lambda: open(DIR))
attempt("open bad mode", lambda: open(a, "z"))
attempt("open bad type", lambda: open(1.5))
attempt("open keyword file", lambda: open(file=a).read())
attempt("open with opener", lambda: open(a, opener=lambda p, fl: os.open(p, fl)).read())
attempt("stat", lambda: stats(os.stat(a)))
attempt("stat missing", lambda: os.stat(missing))
attempt("stat ENOTDIR", lambda: os.stat(os.path.join(a, "x")))
attempt("stat None", lambda: os.stat(None))
attempt("stat bytes", lambda: stats(os.stat(a.encode())))
attempt("stat keyword", lambda: stats(os.stat(path=a)))
attempt("stat bad keyword", lambda: os.stat(a, nope=1))
attempt("stat dir_fd", lambda: stats(os.stat("a.txt", dir_fd=os.open(DIR, os.O_RDONLY))))
attempt("lstat", lambda: stats(os.lstat(a)))
attempt("stat follow_symlinks", lambda: stats(os.stat(a, follow_symlinks=False)))
attempt("access", lambda: [os.access(a, os.R_OK), os.access(missing, os.F_OK)])
attempt("fd round trip", lambda: (lambda fd: [os.write(fd, b"xyz"), os.lseek(fd, 0, 0), os.read(fd, 10), os.close(fd)])(os.open(os.path.join(DIR, "fd.bin"), os.O_RDWR | os.O_CREAT, 0o644)))
attempt("os.open missing", lambda: os.open(missing, os.O_RDONLY))
attempt("mkdir", lambda: os.mkdir(sub))
attempt("mkdir exists", lambda: os.mkdir(sub))
attempt("makedirs", lambda: os.makedirs(os.path.join(sub, "x", "y")))
attempt("makedirs exists", lambda: os.makedirs(os.path.join(sub, "x", "y")))
attempt("makedirs exist_ok", lambda: os.makedirs(os.path.join(sub, "x", "y"), exist_ok=True))
attempt("listdir", lambda: sorted(os.listdir(DIR)))
attempt("listdir missing", lambda: os.listdir(missing))
attempt("scandir", lambda: sorted((e.name, e.is_dir()) for e in os.scandir(DIR)))
attempt("scandir context", lambda: (lambda it: (type(it).__name__, it.__enter__() is it, it.close()))(os.scandir(DIR)))
attempt("symlink", lambda: os.symlink("a.txt", os.path.join(DIR, "link")))
attempt("readlink", lambda: os.readlink(os.path.join(DIR, "link")))
attempt("readlink not a link", lambda: os.readlink(a))
attempt("rename", lambda: os.rename(os.path.join(DIR, "fd.bin"), os.path.join(DIR, "fd2.bin")))
attempt("replace", lambda: os.replace(os.path.join(DIR, "fd2.bin"), os.path.join(DIR, "fd3.bin")))
attempt("remove", lambda: os.remove(os.path.join(DIR, "fd3.bin")))
attempt("unlink missing", lambda: os.unlink(missing))
attempt("rmdir not empty", lambda: os.rmdir(sub))
attempt("chmod", lambda: os.chmod(a, 0o640))
attempt("utime", lambda: os.utime(a, (1, 2)))
attempt("truncate", lambda: os.truncate(a, 3))
attempt("os.path", lambda: [os.path.exists(a), os.path.exists(missing), os.path.isfile(a), os.path.isdir(sub), os.path.islink(os.path.join(DIR, "link")), os.path.getsize(a)])
attempt("realpath", lambda: os.path.realpath(os.path.join(DIR, "link")))
p = pathlib.Path(DIR)
attempt("pathlib", lambda: [(p / "a.txt").exists(), (p / "missing").exists(), (p / "a.txt").read_text(), sorted(x.name for x in p.iterdir())])
attempt("pathlib write", lambda: (p / "w.txt").write_text("w"))
attempt("pathlib mkdir parents", lambda: (p / "q" / "r").mkdir(parents=True))
attempt("pathlib stat missing", lambda: (p / "missing").stat())
attempt("pathlib glob", lambda: sorted(x.name for x in p.glob("*.txt")))
attempt("shutil copy", lambda: os.path.basename(shutil.copy(a, os.path.join(DIR, "copy.txt"))))
attempt("shutil copytree", lambda: os.path.basename(shutil.copytree(sub, os.path.join(DIR, "tree"))))
attempt("shutil rmtree", lambda: shutil.rmtree(os.path.join(DIR, "tree")))
attempt("shutil fd functions", lambda: shutil._use_fd_functions)
attempt("rmtree is safe", lambda: shutil.rmtree.avoids_symlink_attacks)
attempt("walk", lambda: sorted((os.path.relpath(r, DIR), sorted(d), sorted(f)) for r, d, f in os.walk(DIR)))


# A path object the program hashes itself (pathlib.Path's __hash__ is Python code): the
# agent's wrappers must not run it (os.stat does not).
class Hashed(os.PathLike):
    hashes = 0

    def __init__(self, p):
        self.p = p

    def __fspath__(self):
        return self.p

    def __hash__(self):
        Hashed.hashes += 1
        return hash(self.p)


hp = Hashed(a)
attempt("path object", lambda: [os.stat(hp).st_size for _ in range(50)][-1])
out("hashes of the path object", Hashed.hashes)

# What the functions look like. (Their __module__ is the one place the agent's differ: a
# wrapper names the module it is found in, os, not posix, so that pickle, which saves a
# function as __module__.__qualname__ and checks that this finds the function, can; what
# is the same is that it does, docs/agents.md.)
for name in ("stat", "lstat", "open", "listdir", "scandir", "mkdir", "remove", "rename", "access"):
    f = getattr(os, name)
    found = getattr(sys.modules[f.__module__], f.__qualname__, None) is f
    out("os." + name, (f.__name__, f.__qualname__, found, f.__doc__ == getattr(os, name).__doc__, callable(f)))
    try:
        out("signature of os." + name, str(inspect.signature(f)))
    except Exception as e:
        out("signature of os." + name + " raised", type(e).__name__)
out("open", (open.__name__, open.__module__, open is io.open, len(open.__doc__ or "")))
out("supports", [
    os.stat in os.supports_dir_fd,
    os.stat in os.supports_fd,
    os.stat in os.supports_follow_symlinks,
    os.open in os.supports_dir_fd,
    os.mkdir in os.supports_dir_fd,
    os.access in os.supports_effective_ids,
    os.scandir in os.supports_fd,
    os.listdir in os.supports_fd,
])
out("sys.path", [x for x in sys.path if "dejavu" in x or "agent" in x])
out("sitecustomize", "sitecustomize" in sys.modules)

# Threads: results and exceptions are theirs.
results = []


def worker(n):
    try:
        results.append((n, os.stat(a).st_size, sorted(os.listdir(sub))))
        os.stat(missing)
    except FileNotFoundError as e:
        results.append((n, e.errno))


threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out("threads", sorted(results))

# A fork: the child's calls and exit status.
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    try:
        os.write(w, repr((os.stat(a).st_size, os.path.exists(missing))).encode())
    finally:
        os._exit(7)
os.close(w)
child = os.read(r, 100)
os.close(r)
# (os.waitstatus_to_exitcode is Python 3.9+; the child exits normally.)
out("fork", (child, os.WEXITSTATUS(os.waitpid(pid, 0)[1])))

# A subprocess, with the default close_fds and with pass_fds of its own.
attempt("subprocess", lambda: subprocess.run([sys.executable, "-c", "import os, sys; print(sorted(os.listdir(sys.argv[1])))", DIR], capture_output=True, text=True).stdout)
rr, ww = os.pipe()
attempt("subprocess pass_fds", lambda: subprocess.run([sys.executable, "-c", "import os, sys; os.write(int(sys.argv[1]), b'via fd'); print(sorted(int(x) for x in os.listdir('/proc/self/fd') if int(x) > 2 and int(x) < 100))", str(ww)], pass_fds=(ww,), capture_output=True, text=True).stdout)
os.close(ww)
attempt("pass_fds pipe", lambda: os.read(rr, 100))
# sys.stdout and sys.stderr (their write and flush are wrapped on the objects themselves):
# identity, type, what write returns, the errors of wrong calls, print through them.
out("stdio identity", (sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__, type(sys.stdout).__name__, isinstance(sys.stdout, io.TextIOWrapper)))
attempt("stdout write", lambda: sys.stdout.write("written\n"))
attempt("stdout write int", lambda: sys.stdout.write(5))
attempt("stdout write two", lambda: sys.stdout.write("a", "b"))
attempt("stdout flush arg", lambda: sys.stdout.flush(1))
attempt("stdout flush", lambda: sys.stdout.flush())
attempt("stdout writelines", lambda: sys.stdout.writelines(["one\n", "two\n"]))
attempt("stderr write", lambda: sys.stderr.write("to stderr\n"))
attempt("print to stderr", lambda: print("printed", 1, file=sys.stderr, flush=True))
attempt("stdout attributes", lambda: (sys.stdout.line_buffering, sys.stdout.encoding, sys.stdout.fileno(), sys.stdout.closed))
# pickle saves functions by reference: a wrapped os function must still be one pickle
# finds (a multiprocessing pool's map(os.stat, paths) pickles os.stat), and come back as
# the function it names.
import pickle  # noqa: E402

attempt("pickle os functions", lambda: [pickle.loads(pickle.dumps(f))(DIR) is not None for f in (os.stat, os.listdir, os.path.exists)])
out("done", True)
