"""dejavu's Python agent: loaded at startup by the sitecustomize beside it (which
`dejavu record` puts first on PYTHONPATH), it wraps the os, io and builtins functions
that make file calls or start processes (and, once the program imports them, subprocess's
Popen and logging's stream and file handlers) and tells dejavu, over an inherited pipe,
which line of Python makes each call; dejavu turns that into the call stacks of the
syscalls it records. Protocol and limits: docs/agents.md. Plain Python 3 (3.8+), no
dependencies. For tests and programs that want it gone:
sys.modules["_dejavu_agent"].unhook().

Rules this file keeps (the program must not notice it):
- the originals are kept and called with the same arguments; their results and
  exceptions reach the program unchanged (a traceback through a wrapped call shows one
  more frame, this file's: Python cannot hide a frame);
- any failure of the agent's own makes it call the original plainly; it never raises into
  the program; on a broken channel it unhooks itself (restores every original);
- without a valid channel (DEJAVU_AGENT_FD naming our pipe) it wraps nothing.
"""

import os as _os
import sys as _sys

# Protocol (docs/agents.md, "Protocol"): little-endian, u16 length, u8 kind, body.
_HELLO = 1
_SITE = 2
_ENTER = 3
_EXIT = 4
_ASYNC_END = 6
_DROPPED = 7
_FD = 9
_STICKY = 10
_LANG_PYTHON = 2
# The program's own frames per call site.
_FRAMES = 4
# Frames kept before the program's first frame of its own: the runtime's (standard
# library, frozen modules) and the libraries' (site-packages) between the wrapped call and
# the program's code, innermost first.
_MAX_INNER = 32
# Frames per call site in all: those, then up to _FRAMES of the program's own.
_MAX_SITE = 36
# Longest function and file name sent, in bytes (a site must fit one atomic write).
_MAX_NAME = 200
_MAX_FILE = 700
# A SITE and the ENTER that uses it fit one write of at most PIPE_BUF bytes.
_MAX_SITE_BYTES = 4096 - 21
# Frames looked at for the program's own.
_MAX_WALK = 64
# What a code object's frames are (_kind).
_OWN = 0
_RUNTIME = 1
_AGENT = 2
_LIBRARY = 3
# A process's own first frame though frames lie below it: multiprocessing's
# BaseProcess._bootstrap, which a forked worker runs on the stack it inherited (the
# parent's frames, down to the line that started the pool) and never returns from
# (os._exit). The walk ends there, as at a thread's first frame.
_ROOT = 4
# Caches are cleared past this many entries (they keep code objects alive).
_MAX_CACHE = 100000

_SELF = __file__
# The loader (sitecustomize in the zip beside this file) is the agent's too.
_AGENT_DIR = _os.path.dirname(_SELF) + _os.sep
_LE = "little"

_fd = -1
_pid = 0
_pidb = b""
_nsb = b""
_dropped = 0
_site_seq = 0
# (id(code), lasti, ...) of a call site -> its number, once dejavu has its definition;
# and the site's (code, lasti, ...), which keeps those code objects alive while the site
# is remembered, so that their ids name them. Ids, not the code objects: a code object
# hashes its contents at every lookup (0.4 us for a module's), and a check of a repeated
# call's site did that twice (docs/agents.md, "Repeated calls").
_sites = {}
_site_codes = {}
# The same for sites not yet written (their SITE message may still fail).
_new_sites = {}
# id(code) -> (what its frames are: _OWN, _RUNTIME (stdlib, frozen) or _AGENT; the code
# object, kept alive so that its id names it)
_kinds = {}
# thread id -> wrapped calls in progress on that thread (only threads inside one: an
# empty dict says no thread is)
_depth = {}
# (namespace object, name, original, wrapper) of everything installed, for unhook.
_installed = []
# Repeated calls (docs/agents.md, "Repeated calls"): path as given -> [site, wrapper,
# calls left before the next check (an iterator that yields the wrapper once for each:
# one next() is the test of the wrapper, the test of the count and the count), gap,
# volatile, thread, working directory for a relative path else "", switches, calm, chain]: the site dejavu was last told (STICKY)
# for that thread and path. volatile: a check found the same function's site switched
# (another line calls it) and no calm run followed yet: every call checks. switches: how
# many times it did; calm: while volatile, the checks in a row that found the same site;
# chain: the frames that site was last found from (_key, _sticky_call).
_sticky = {}
# Paths a repeated-call wrapper was called on once, outside the sticky entries: the first
# call on a path is said with ENTER and EXIT, and only a second makes the path sticky. A
# path checked once (compileall's isfile of each file) then stat'ed by code the agent does
# not wrap (py_compile's, through the import system's posix.stat: the same system call)
# had given that line to those later calls, 1,268 of them under pip install.
_once = set()
# The os functions whose syscalls all name their one path argument.
_STICKY_OS = frozenset(
    ("stat", "lstat", "access", "listdir", "readlink", "chmod", "utime", "truncate", "statvfs")
)
# Most calls between two checks of a repeated call's site; most entries kept. After a
# switch, a path is checked at every call until _STICKY_CALM << (switches - 1) checks in a
# row (the shift at most _STICKY_CALM_SHIFT) found the same site, then less and less often
# again (1, 2, 4, ... then every _STICKY_GAP): a helper called from two lines one after the
# other is not walked at every call for good, and lines that take turns often keep their
# path checked at every call. The price: at a switch found while checking less often (the
# first, and each after a calm run), up to _STICKY_GAP calls (the calls between two
# checks) name the earlier line. 256, as the Node.js agent's: a check every 16th call was
# ~50 ns a call of a stat loop's ~240 ns in the agent (bench/RESULTS.md, eleventh session).
_STICKY_GAP = 256
# A path's calls after its first that are all checked, whatever they find, before the
# checks thin out: a loop over paths that checks each one at a line and again at another
# (exists, then isfile, each once per path) calls each path from each line once or twice,
# and the second line's calls must be found at once (pip's .pyc compile loop was named at
# the exists() of its unpacking). Kept in an entry as a gap below zero, counting up.
_STICKY_EXACT = 3
_STICKY_CALM = 8
_STICKY_CALM_SHIFT = 16
_MAX_STICKY = 4096
_getframe = _sys._getframe
# A wrapper's first parameter when the call passed no positional argument.
_NOARG = object()
# No calls left before the next check of a repeated call (_sticky).
_NO_CALLS = iter(())
_write = _os.write
# Whether no thread has been started (through _thread: threading's threads and _thread's
# own) since the agent loaded: a repeated call's fast path then knows its thread without
# asking (a thread-local's attribute is ~690 instructions, a fifth of that path; its
# entry's thread is this one, the only one). Ended for good by the first thread started
# (_watch_threads); a thread a C extension makes and enters Python from is not seen: its
# calls on a path with another thread's entry then say nothing (no line for them, never
# the other thread's, since dejavu keeps a STICKY per thread). docs/agents.md, "Repeated
# calls".
_lone = False
# While _lone, each `repeats` wrapper has a dict of its own (_fast_of[wrapper]): absolute
# path -> the calls its _sticky entry has left before a check (the entry's iterator,
# e[2]), for the paths whose entry is that wrapper's: the repeated call's fast path in one
# dict lookup and one next(), with no test of the thread (the only one), of the working
# directory (an absolute path), of the function (the dict is its own) or of a wrapped call
# in progress (every dict is emptied when one begins: _fast_clear). Set and dropped with
# the entry (_sticky_call); emptied with _sticky, when a thread starts and when a wrapped
# call begins. _fast_any: whether any of them may hold an entry.
_fast_of = {}
_fast_any = False
# The working directory as the agent last read it, "" when unknown; and a count of the
# os.chdir and os.fchdir calls begun and ended, which forget it (_getcwd).
_cwd = ""
_cwd_gen = 0


def _tid():
    """This thread's native id (what dejavu knows it by). threading.get_native_id() is a
    gettid syscall at every call (~0.2 us, ~0.4 us under dejavu's eBPF backend: more than
    the rest of a repeated call's fast path): it is asked once per thread and kept in a
    thread-local, which a new thread (even one whose threading.get_ident() a dead thread
    had) finds empty. A forked child's is set again (_after_fork)."""
    try:
        return _tls.tid
    except AttributeError:
        tid = _tls.tid = _gnid()
        return tid


def _channel():
    """The descriptor dejavu gave us, or -1. It must still be the pipe dejavu made (same
    inode): a number the program reused for a file of its own never gets our bytes. The
    fstat is let through dejavu's seccomp filter untraced."""
    v = _os.environ.get("DEJAVU_AGENT_FD", "")
    a, sep, b = v.partition(":")
    if not sep or not a.isdigit() or not b.isdigit():
        return -1
    fd = int(a)
    try:
        st = _os.fstat(fd)
    except OSError:
        return -1
    if (st.st_mode & 0o170000) != 0o010000 or st.st_ino != int(b):
        return -1
    return fd


def _msg(kind, body):
    return (len(body) + 1).to_bytes(2, _LE) + bytes((kind,)) + body


def _send(data):
    """Writes whole messages in one write (at most PIPE_BUF bytes: atomic). The pipe is
    non-blocking: when it is full the messages are dropped and counted, never waited for."""
    global _dropped
    if _dropped:
        data += _msg(_DROPPED, _pidb + _nsb + _dropped.to_bytes(4, _LE))
    try:
        _write(_fd, data)
    except BlockingIOError:
        _dropped += 1
        return False
    except OSError:
        # EBADF, EPIPE: the channel is gone. Stop, and give the originals back.
        unhook()
        return False
    _dropped = 0
    return True


def _kind(filename):
    """What frames of this file are: the agent's (this file, its loader), the runtime's
    (frozen modules, the standard library but not the packages installed beside it), a
    library's (site-packages, dist-packages: but for the program's own package when it runs
    as `python -m PACKAGE` from there), or the program's own."""
    if filename == _SELF or filename.startswith(_AGENT_DIR):
        return _AGENT
    if filename.startswith("<frozen "):
        return _RUNTIME
    if "-packages/" in filename:
        own = _own_package()
        if own and filename.startswith(own):
            return _OWN
        return _LIBRARY
    if filename.startswith(_STDLIB):
        return _RUNTIME
    return _OWN


_own_dir = None


def _own_package():
    """The directory of the package `python -m` runs (its files are the program's own,
    even in site-packages), else ""; known once __main__ is."""
    global _own_dir
    if _own_dir is not None:
        return _own_dir
    main = _sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None) if main is not None else None
    if main is None or getattr(main, "__file__", None) is None and spec is None:
        if _sys.argv[:1] == ["-c"]:
            _own_dir = ""
        # Else not known yet (python -m PACKAGE importing PACKAGE): asked again next
        # time, and the libraries' kinds are not cached until it is.
        return ""
    _own_dir = ""
    try:
        name = spec.name if spec is not None else ""
        top = name.partition(".")[0]
        mod = _sys.modules.get(top) if top else None
        paths = getattr(mod, "__path__", None) if mod is not None else None
        if paths:
            _own_dir = _os.path.join(list(paths)[0], "")
    except Exception:
        pass
    return _own_dir


def _code_kind(c):
    """What the frames of code object `c` are (_kind of its file), cached by id."""
    e = _kinds.get(id(c))
    if e is not None and e[1] is c:
        return e[0]
    if len(_kinds) > _MAX_CACHE:
        _kinds.clear()
    k = _kind(c.co_filename)
    if c.co_name == "_bootstrap" and c.co_filename.endswith(("multiprocessing/process.py", "multiprocessing\\process.py")):
        k = _ROOT
    if k != _LIBRARY or _own_dir is not None:
        _kinds[id(c)] = (k, c)
    return k


def _key(f, objects=False, chain=None):
    """The call site of frame `f` and its callers: (id(code), lasti) of the runtime's and
    the libraries' frames up to the program's first (os.path.isdir's, importlib's, a
    package's: they say what made the call for the program; at most _MAX_INNER, the
    innermost), then up to _FRAMES of the program's own frames (the others between them
    skipped), innermost first; the agent's frames never. With no frame of the program's,
    the others alone. Empty when there is no frame at all. With `objects`, the code
    objects themselves instead of their ids. With a list `chain`, the frames walked are
    added to it, (code object, instruction offset) each, then (None, -1) if the walk ran
    out of frames (_sticky_call)."""
    key = ()
    own = 0
    inner = 0
    walked = 0
    while f is not None and walked < _MAX_WALK:
        c = f.f_code
        e = _kinds.get(id(c))
        k = e[0] if e is not None and e[1] is c else _code_kind(c)
        if k == _ROOT:
            f = None
            break
        if chain is not None:
            chain.append((c, f.f_lasti))
            if k == _LIBRARY and _own_dir is None:
                # This code's kind may change yet (_own_package): a chain no frame matches.
                chain[:] = [(_NOARG, -1)]
                chain = None
        if k == _OWN:
            key += (c if objects else id(c), f.f_lasti)
            own += 1
            if own == _FRAMES:
                break
        elif k != _AGENT and own == 0 and inner < _MAX_INNER:
            key += (c if objects else id(c), f.f_lasti)
            inner += 1
        f = f.f_back
        walked += 1
    if chain is not None and f is None:
        chain.append((None, -1))
    return key


def _text(s, limit):
    b = s.encode("utf-8", "surrogateescape")
    return b[:limit]


def _column(code, lasti):
    """1-based column of the instruction at `lasti` (Python 3.11+), else 0."""
    try:
        want = lasti // 2
        for i, p in enumerate(code.co_positions()):
            if i == want:
                return (p[2] + 1) if p[2] is not None else 0
    except Exception:
        pass
    return 0


def _define(sid, key, f):
    """The SITE message for `key`, the site of frame `f` (walked again, for the lines:
    f_lineno is right on every Python version)."""
    lines = []
    while f is not None and len(lines) < len(key) // 2:
        if f.f_code is key[2 * len(lines)] and f.f_lasti == key[2 * len(lines) + 1]:
            lines.append(f.f_lineno or 0)
        f = f.f_back
    frames = []
    kinds = []
    cwd = None
    for i in range(0, len(key), 2):
        c, lasti = key[i], key[i + 1]
        line = lines[i // 2] if i // 2 < len(lines) else c.co_firstlineno
        col = _column(c, lasti)
        name = getattr(c, "co_qualname", c.co_name)
        file = c.co_filename
        if not file.startswith(("/", "<")):
            try:
                if cwd is None:
                    cwd = _getcwd()
                file = _os.path.join(cwd, file)
            except Exception:
                pass
        fn = _text(name, _MAX_NAME)
        fb = _text(file, _MAX_FILE)
        frames.append(
            line.to_bytes(4, _LE)
            + col.to_bytes(4, _LE)
            + len(fn).to_bytes(2, _LE)
            + fn
            + len(fb).to_bytes(2, _LE)
            + fb
        )
        kinds.append(_code_kind(c))
    # One write: the program's frames (at most 4 x 912 bytes) always fit; the runtime's
    # outermost go first when the names are long.
    size = 17 + sum(len(b) for b in frames)
    i = len(frames) - 1
    while size > _MAX_SITE_BYTES and i >= 0:
        if kinds[i] != _OWN:
            size -= len(frames[i])
            del frames[i]
        i -= 1
    body = _pidb + _nsb + sid.to_bytes(4, _LE) + bytes((_LANG_PYTHON, len(frames)))
    return _msg(_SITE, body + b"".join(frames))


def _fd_msg(tid, sid, fd):
    """FD: the calls on descriptor `fd` are site `sid`'s until the program closes it."""
    return _msg(
        _FD,
        _pidb + tid.to_bytes(4, _LE) + _nsb + sid.to_bytes(4, _LE) + b"\0\0\0\0" + fd.to_bytes(4, _LE),
    )


def _opened_file(r):
    """The descriptor of what open() returned (a file object)."""
    return r.fileno()


_LINE_BUFFERING = (
    "line buffering (buffering=1) isn't supported in binary mode, the default buffer size "
    "will be used"
)


def _open_warning_first(args, kwargs):
    """open() warns about line buffering in binary mode from C, naming the Python frame
    that called it: the wrapper's, which would make a warnings filter on the program's
    module miss it. So the wrapper gives the warning itself, naming the program's line
    (as open() does without the agent), and passes the buffering open() then uses.
    Returns the arguments to call open() with."""
    mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
    if len(args) > 2:
        buffering = args[2]
    else:
        buffering = kwargs.get("buffering", -1)
    if type(buffering) is not int or buffering != 1 or not isinstance(mode, str) or "b" not in mode:
        return args, kwargs
    import warnings

    # _open_warning_first, the wrapper, then the program's frame.
    warnings.warn(_LINE_BUFFERING, RuntimeWarning, stacklevel=3)
    if len(args) > 2:
        args = args[:2] + (-1,) + args[3:]
    else:
        kwargs = dict(kwargs, buffering=-1)
    return args, kwargs


def _getcwd():
    """The working directory, read once and kept until os.chdir or os.fchdir (wrapped to
    forget it before and after they run, whichever thread calls them): a repeated call on
    a relative path read it at every call, a getcwd syscall that doubled the syscalls of a
    loop. A read that a chdir began or ended during is not kept. A chdir the agent does not
    see (C code calling chdir(2)) leaves the kept one stale: the calls on relative paths
    after it are then said for the old directory's files, which dejavu, resolving each
    call in the directory the kernel saw, never gives them: no line, never another
    file's (docs/agents.md, "Repeated calls")."""
    global _cwd
    c = _cwd
    if c:
        return c
    g = _cwd_gen
    c = _os.getcwd()
    if g == _cwd_gen:
        _cwd = c
    return c


def _forgetting_cwd(orig):
    """`orig` (os.chdir, os.fchdir) made to forget the kept working directory (_getcwd)
    before and after it runs."""

    def changer(*args, **kwargs):
        global _cwd, _cwd_gen
        _cwd_gen += 1
        _cwd = ""
        try:
            return orig(*args, **kwargs)
        finally:
            _cwd_gen += 1
            _cwd = ""

    return _like(changer, orig)


def _opened_fd(r):
    """The descriptor os.open returned; the two os.pipe and os.pipe2 return."""
    return r


def _resolve(p, cwd):
    """`p` made absolute against `cwd` as dejavu resolves syscall paths: `.` and empty
    components dropped, `..` kept; as bytes (the file system encoding)."""
    b = _os.fsencode(p)
    if not b.startswith(b"/"):
        b = _os.fsencode(cwd) + b"/" + b
    r = b"/".join(c for c in b.split(b"/") if c not in (b"", b"."))
    return b"/" + r


def _site_for(caller, chain=None):
    """The call site of frame `caller`: (key, site number, the SITE message to send first
    when dejavu does not have it yet, else b""); the key is empty when there is no frame.
    Once the message is written, _site_sent remembers the site. `chain`: as _key's."""
    global _site_seq
    key = _key(caller, False, chain)
    if not key:
        return key, 0, b""
    sid = _sites.get(key)
    if sid is not None:
        return key, sid, b""
    _site_seq += 1
    codes = _key(caller, True)
    if len(_new_sites) > 1000:
        _new_sites.clear()
    _new_sites[key] = codes
    return key, _site_seq, _define(_site_seq, codes, caller)


def _site_sent(key, sid):
    """dejavu has site `sid` now (its SITE was written)."""
    codes = _new_sites.pop(key, None)
    if codes is None and key not in _sites:
        return  # its code objects are not known to be alive: not remembered
    if len(_sites) > _MAX_CACHE:
        _sites.clear()
        _site_codes.clear()
    _sites[key] = sid
    if codes is not None:
        _site_codes[key] = codes


def _fast_clear():
    """Empties every wrapper's fast entries (_fast_of)."""
    global _fast_any
    _fast_any = False
    for d in _fast_of.values():
        d.clear()


def _sticky_call(w, tid, p):
    """_sticky_call_at, and `p`'s fast entry (_fast_of) made to match what it left: in the
    dict of the wrapper its entry is now (only) that wrapper's."""
    global _fast_any
    e = _sticky.get(p)
    if e is not None:
        d = _fast_of.get(e[1])
        if d:
            d.pop(p, None)
    said = _sticky_call_at(w, tid, p)
    e = _sticky.get(p) if said and _lone else None
    if e is not None and not e[6] and e[1] is w:
        d = _fast_of.get(w)
        if d is not None:
            d[p] = e[2]
            _fast_any = True
    return said


# sys.path as last seen, and its entries as absolute paths (_import_dir).
_import_dirs = [None, frozenset()]


def _import_dir(path):
    """Whether `path` is a sys.path directory, which the import system stats itself (a
    FileFinder at each import that looks there: posix.stat, not the os.stat the agent
    wraps, the same system call): a STICKY for it would give the program's line to the
    import system's calls after it (pip's isdir of each sys.path entry in find_eggs was
    named for the 560 stats of 140 failed imports). Its calls are said one by one."""
    sp = _sys.path
    if _import_dirs[0] != sp:
        try:
            dirs = frozenset(_os.fsencode(_os.path.abspath(d or ".")) for d in sp if type(d) is str)
        except Exception:
            dirs = frozenset()
        _import_dirs[:] = [list(sp), dirs]
    return path in _import_dirs[1]


def _sticky_call_at(w, tid, p):
    """A repeated call (a _STICKY_OS function, a str path, outside any wrapped call) of
    wrapper `w` on `p`: whether dejavu has, or was just told, its site for this thread and
    path, so the call needs no ENTER and EXIT. Between checks it costs a dict lookup; a
    check walks the frames as any call does; a changed site is said at once, and from then
    on that path is checked at every call until a calm run of checks found the same site
    (longer with each switch). One entry per path, for the thread that called last
    (another thread's call on it starts over: correct, if dearer)."""
    cwd = "" if p[:1] == "/" else _getcwd()
    e = _sticky.get(p)
    if e is not None and (e[5] != tid or e[6] != cwd):
        e = None
    if e is not None and e[1] is w and next(e[2], None) is w:
        return True
    if e is None and p not in _sticky:
        if p not in _once:
            if len(_once) >= _MAX_STICKY:
                _once.clear()
            _once.add(p)
            return False
        _once.discard(p)
    caller = _getframe(3)  # the wrapper's caller (through _sticky_call)
    same = False
    if e is not None:
        # The frames (code object, instruction offset) the site was last found from, up
        # to where _key's walk stopped (the program's _FRAMES-th frame, _MAX_WALK frames:
        # the frames after do not count; or no frame left, which `caller`'s must end at
        # too): the same frames are the same site (a code object's kind does not change),
        # at a fraction of the cost of its key (no kinds, no tuple, no hash).
        f = caller
        for c, lasti in e[9]:
            if c is None:
                same = f is None
                break
            if f is None or f.f_code is not c or f.f_lasti != lasti:
                break
            f = f.f_back
        else:
            same = True
    if not same:
        chain = []
        key, sid, data = _site_for(caller, chain)
        if not key:
            return False
        same = not data and e is not None and e[0] == sid
        if same:
            e[9] = chain
    if same:
        e[1] = w
        if not e[4]:
            gap = e[3]
            if gap < -1:
                # Among the path's first calls (_STICKY_EXACT): the next one is checked too.
                e[3] = gap + 1
                e[2] = _NO_CALLS
            else:
                gap = 1 if gap < 0 else gap * 2
                e[3] = gap = gap if gap < _STICKY_GAP else _STICKY_GAP
                e[2] = iter((w,) * gap)
        else:
            # Switched before: checked at every call until a calm run, which doubles with
            # each switch; then less and less often again, from the next call but one.
            # (No calls left to count down: a path is volatile only after a switch, which
            # left none, and until a calm run.)
            e[8] += 1
            if e[8] >= _STICKY_CALM << min(max(e[7] - 1, 0), _STICKY_CALM_SHIFT):
                e[4] = False
                e[8] = 0
                e[3] = 1
                e[2] = iter((w,))
        return True
    path = _resolve(p, cwd or _getcwd())
    if len(path) > 3000 or _import_dir(path):
        return False
    data += _msg(_STICKY, _pidb + tid.to_bytes(4, _LE) + _nsb + sid.to_bytes(4, _LE) + len(path).to_bytes(2, _LE) + path)
    if not _send(data):
        _sticky.pop(p, None)
        return False
    _site_sent(key, sid)
    if e is not None and e[1] is w:
        # The site of the same function on the same path changed (another line calls
        # it), a switch: this path's site is checked at every call until a calm run
        # (above), longer with each switch. Another function on the path is not that: its
        # calls are checked less and less often again (below).
        e[:] = [sid, w, _NO_CALLS, 1, True, tid, cwd, e[7] + 1, 0, chain]
    elif e is not None:
        # Another function: its next _STICKY_EXACT calls check (the one before may be
        # called again from another line), then less and less often; a path whose site
        # switched stays checked at every call, whatever function, until its calm run (the
        # counts are kept: a change of function is found at once, it is no switch of
        # lines).
        e[:] = [sid, w, _NO_CALLS, -_STICKY_EXACT, e[4], tid, cwd, e[7], e[8], chain]
    else:
        if len(_sticky) >= _MAX_STICKY:
            _sticky.clear()
            _fast_clear()
        _sticky[p] = [sid, w, _NO_CALLS, -_STICKY_EXACT, False, tid, cwd, 0, 0, chain]
    return True


def _wrap(orig, opened=None, repeats=False):
    """A wrapper of `orig` that reports ENTER before it runs and EXIT after. `opened`:
    for a function that opens a file, how to get the descriptor from its result: FD
    then gives the descriptor's later calls (the reads and writes of a file object, which
    happen after open returned) the same site. `repeats`: its calls name their one path
    argument, so a repeated call's site is said once (_sticky_call)."""
    # Its fast entries (_fast_of).
    fast = {}

    def wrapper(p=_NOARG, /, *args, **kwargs):
        # The first argument on its own (positional-only: a keyword of any name goes to
        # kwargs, as to the original), so that a call with one argument builds no tuple
        # and calls the original with it alone.
        if type(p) is str:
            # The fast entry of a lone thread's absolute path (_fast_of): one lookup, and
            # a call left before the next check (a loop of one turn at most: FOR_ITER is
            # no call, as next() would be). A wrapper that is not `repeats` has none.
            for _ in fast.get(p, _NO_CALLS):
                if args or kwargs:
                    return orig(p, *args, **kwargs)
                return orig(p)
        if repeats and type(p) is str:
            # A repeated call between two checks of its site (_sticky_call): a dict
            # lookup and a count, inline (it is most of the calls of a loop, and a Python
            # call is a good part of what the agent costs per call): the path's entry,
            # this wrapper's (only a `repeats` wrapper looks: another function's call
            # on the path must not use up the calls its entry has left before a check,
            # which moved the checks off the calls whose line changed), due no check, this
            # thread's, the same working directory for a relative path (an absolute
            # one's entry holds ""), no wrapped call in progress on this thread (`_depth`
            # holds only threads inside one). A str path first (the only kind
            # _sticky_call keeps): the lookup then runs no __hash__ of the program's (a
            # pathlib.Path's is Python code). No test of _fd: unhook() empties _sticky.
            # Each test costs here (bench/agent_instructions.py). Anything else, and any
            # failure here (a new thread has no _tls.tid yet), takes the path below.
            try:
                e = _sticky.get(p)
                if not (
                    e is not None
                    and (_lone or e[5] == _tls.tid)
                    and (not e[6] or e[6] == _cwd)
                    and (not _depth or not _depth.get(e[5]))
                    and next(e[2], None) is wrapper
                ):
                    e = None
            except Exception:
                e = None
            if e is not None:
                if args or kwargs:
                    return orig(p, *args, **kwargs)
                return orig(p)
            if _fd >= 0:
                # A check of the repeated call's site, or its first call: said once
                # (_sticky_call), unless inside another wrapped call on this thread.
                try:
                    try:
                        tid = _tls.tid
                    except AttributeError:
                        tid = _tid()
                    said = not _depth.get(tid) and _sticky_call(wrapper, tid, p)
                except Exception:
                    said = False
                if said:
                    if args or kwargs:
                        return orig(p, *args, **kwargs)
                    return orig(p)
        if p is not _NOARG:
            args = (p,) + args
        if _fd < 0:
            return orig(*args, **kwargs)
        if opened is _opened_file:
            args, kwargs = _open_warning_first(args, kwargs)
        d = -1
        sid = 0
        try:
            tid = _tid()
            key, sid, data = _site_for(_getframe(1))
            if key:
                depth = _depth.get(tid, 0)
                data += (
                    b"\x13\x00\x03"
                    + _pidb
                    + tid.to_bytes(4, _LE)
                    + _nsb
                    + sid.to_bytes(4, _LE)
                    + depth.to_bytes(2, _LE)
                )
                if _send(data):
                    _site_sent(key, sid)
                    _depth[tid] = depth + 1
                    d = depth
                    if _fast_any:
                        # No fast path while a wrapped call is in progress.
                        _fast_clear()
        except Exception:
            d = -1
        if d < 0:
            return orig(*args, **kwargs)
        more = b""
        try:
            r = orig(*args, **kwargs)
            if opened is not None:
                try:
                    fds = opened(r)
                    for fd in fds if type(fds) is tuple else (fds,):
                        if type(fd) is int and 0 <= fd <= 0x7FFFFFFF:
                            more += _fd_msg(tid, sid, fd)
                except Exception:
                    pass
            return r
        finally:
            try:
                if d:
                    _depth[tid] = d
                else:
                    _depth.pop(tid, None)
                _send(more + b"\x0b\x00\x04" + _pidb + tid.to_bytes(4, _LE) + d.to_bytes(2, _LE))
            except Exception:
                pass

    if repeats:
        _fast_of[wrapper] = fast
    return _like(wrapper, orig)


def _like(w, orig):
    """Makes the agent's function `w` look like `orig`, which it stands for: its module,
    name, qualified name and doc, and its code's name (a traceback through it reads "in
    stat", not "in wrapper"); `__wrapped__` is `orig` (inspect.signature() follows it to
    the original's signature). Returns `w`."""
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(w, attr, getattr(orig, attr))
        except Exception:
            pass
    try:
        name = orig.__name__
        code = w.__code__
        try:
            # The qualified name as the original's (`TextIOWrapper.write`: a wrong call's
            # TypeError names it so, as the original's does).
            code = code.replace(co_name=name, co_qualname=getattr(orig, "__qualname__", name))
        except TypeError:  # before 3.11: no co_qualname
            code = code.replace(co_name=name)
        w.__code__ = code
    except Exception:
        pass
    w.__wrapped__ = orig
    return w


# The os.supports_* sets hold the functions that accept dir_fd, an fd, ...; shutil and
# pathlib test membership (shutil.rmtree picks its algorithm so): a wrapper must be in
# the sets its original is in.
_SUPPORTS = ("supports_dir_fd", "supports_fd", "supports_follow_symlinks", "supports_effective_ids")


def _put(ns, name, orig, w):
    """Sets `ns.name` (now `orig`) to `w`, remembered for unhook; False if it cannot be."""
    try:
        setattr(ns, name, w)
    except Exception:
        return False
    _installed.append((ns, name, orig, w))
    return True


def _picklable(ns, name, w):
    """pickle saves a function by reference (its `__module__`, then its `__qualname__`) and
    refuses one that is not the object found there: the wrapper of `os.stat` keeps
    posix's `__module__`, and `posix.stat` is the builtin, so `pickle.dumps(os.stat)`
    failed (a multiprocessing pool's `map(os.stat, paths)`). The wrapper then names the
    module it was put in (`os`), where pickle finds it; unpickled, `os.stat` is the same
    function as `posix.stat` everywhere."""
    try:
        mod = _sys.modules.get(w.__module__)
        if mod is not None and getattr(mod, w.__qualname__, None) is w:
            return
        if type(ns) is type(_os) and w.__qualname__ == name and getattr(ns, name) is w:
            w.__module__ = ns.__name__
    except Exception:
        pass


def _install(ns, name, opened=None, report=True):
    try:
        orig = getattr(ns, name)
    except AttributeError:
        return
    if not callable(orig):
        return
    w = _forgetting_cwd(orig) if ns is _os and name in ("chdir", "fchdir") else orig
    if report:
        w = _wrap(w, opened, ns is _os and name in _STICKY_OS)
    elif w is orig:
        return
    if not _put(ns, name, orig, w):
        return
    _picklable(ns, name, w)
    if ns is _os:
        for s in _SUPPORTS:
            group = getattr(_os, s, None)
            if isinstance(group, set) and orig in group:
                group.add(w)


def _watch_threads(thread_mod):
    """Makes `_lone` true until a thread is started: the functions that start one
    (_thread's, and threading's names for them, which it took at its import) are wrapped
    to end it first. Left false when a thread was already started, or when one of them
    cannot be wrapped."""
    global _lone
    try:
        if thread_mod._count() != 0:
            return
    except Exception:
        return

    def ender(orig):
        def start(*args, **kwargs):
            global _lone
            _lone = False
            _fast_clear()
            return orig(*args, **kwargs)

        return _like(start, orig)

    threading = _sys.modules.get("threading")
    places = [(thread_mod, n) for n in ("start_new_thread", "start_new", "start_joinable_thread")]
    if threading is not None:
        places += [(threading, n) for n in ("_start_new_thread", "_start_joinable_thread")]
    wrapped = {}
    for ns, name in places:
        orig = getattr(ns, name, None)
        if orig is None:
            continue
        w = wrapped.get(id(orig))
        if w is None:
            w = wrapped[id(orig)] = ender(orig)
        if not _put(ns, name, orig, w):
            return
    if wrapped:
        _lone = True


def _keep_channel_in_children():
    """subprocess closes every descriptor in the child by default (close_fds): keep ours
    there, so a Python or Node.js child of the program reports too. Only when the child
    gets our environment variable (inherited, or in the env given), and only the calling
    convention of Python 3.8-3.13's _posixsubprocess.fork_exec (positional: ...,
    close_fds, fds_to_keep, cwd, env_list, ...)."""
    try:
        import _posixsubprocess as ps
    except Exception:
        return
    orig = ps.fork_exec
    # The fork and the exec happen inside it: the child's calls until its exec, and its
    # exec, are the program's line that started it (docs/agents.md, "Spawns").
    reported = _wrap(orig)

    def fork_exec(*args):
        try:
            if (
                _fd >= 0
                and len(args) > 5
                and args[2]
                and isinstance(args[3], tuple)
                and _fd not in args[3]
                and (
                    args[5] is None
                    or any(isinstance(e, bytes) and e.startswith(b"DEJAVU_AGENT_FD=") for e in args[5])
                )
            ):
                args = args[:3] + (tuple(sorted(args[3] + (_fd,))),) + args[4:]
        except Exception:
            pass
        return reported(*args)

    _like(fork_exec, orig)
    ps.fork_exec = fork_exec
    _installed.append((ps, "fork_exec", orig, fork_exec))
    sub = _sys.modules.get("subprocess")
    if sub is not None and getattr(sub, "_fork_exec", None) is orig:
        sub._fork_exec = fork_exec
        _installed.append((sub, "_fork_exec", orig, fork_exec))


# Modules wrapped once the program imports them (an import of them at start-up would cost
# every program its time, and put them in sys.modules).
_WATCHED = {}


def _wrap_subprocess(mod):
    """subprocess.Popen: its __init__ makes the pipes, forks and execs, and waits for the
    exec; communicate() reads and writes the pipes. (os.posix_spawn, which Popen may use
    instead of fork_exec, and _posixsubprocess.fork_exec are wrapped on their own.)"""
    popen = getattr(mod, "Popen", None)
    if isinstance(popen, type):
        for name in ("__init__", "communicate"):
            _install_method(popen, name)


def _wrap_logging(mod):
    """logging's StreamHandler and FileHandler: emit() writes the record (FileHandler
    opens its file at the first one when delay=True) and flushes it."""
    for cls in ("StreamHandler", "FileHandler"):
        c = getattr(mod, cls, None)
        if isinstance(c, type):
            _install_method(c, "emit")


def _wrap_ssl(mod):
    """ssl.SSLContext's loads of certificates, keys and parameters: OpenSSL reads their
    files in C, where no Python frame is seen, so without this a context made per session
    (pip's and requests' CA bundle, 200 KB, read again for each) had only libcrypto's
    frames. The methods are _ssl._SSLContext's, inherited: the wrapper is set on
    SSLContext itself (taken away again by unhook)."""
    c = getattr(mod, "SSLContext", None)
    if not isinstance(c, type):
        return
    for name in (
        "load_verify_locations", "load_cert_chain", "load_dh_params", "set_default_verify_paths",
    ):
        if name in c.__dict__:
            _install_method(c, name)
            continue
        orig = getattr(c, name, None)
        if orig is not None and callable(orig):
            _put(c, name, None, _wrap(orig))


# The stdio streams' states (_stdio_said): per stream a list [descriptor, site said for
# it (0: none), the frames it was found from (_key's chain), its FD request (0: none), a
# weak reference to the stream].
_stdio = []
# FD request numbers (the Python agent has no other asynchronous calls).
_stdio_req = 0


def _wrap_stdio(io):
    """sys.stdout's and sys.stderr's text streams (the objects the interpreter made, so
    `sys.stdout is sys.__stdout__`, their type and isinstance hold), as attributes of
    their own (`write`, `flush`: print() and writelines() look them up on the object).
    print() and .write() buffer the text; the write(2) comes where the stream flushes,
    and only there is anything reported:

    - a stream that flushes at each line (line-buffered: a terminal, stderr) or at each
      write (`python -u`: unbuffered): every write(2) it makes is a write that ends a
      line (or any write), or a flush. Such a write says the site of its caller for the
      descriptor (FD), once: the next ones from the same frames say nothing; another
      site says itself (ending the last one's request); a write with no Python frame
      (a traceback printed at exit) ends it. A print per line to stderr then costs a
      frame comparison, not two messages. Writes that cannot flush cost a test.
    - a block-buffered stream (a file, a pipe): its write(2)s come when its buffer fills
      (no line: the text of many lines) and at flush(), which is a wrapped call (ENTER
      and EXIT) when it is called outside another wrapped call (`print(..., flush=True)`,
      pytest's progress dots). Its writes are not wrapped at all.

    A stream the program reconfigures later keeps what it was given here."""
    try:
        import _weakref
    except Exception:
        return
    for s in (_sys.stdout, _sys.stderr):
        if type(s) is not io.TextIOWrapper or any(s is e[4]() for e in _stdio):
            continue
        try:
            d = s.__dict__
            fd = s.fileno()
            eager = (type(s.buffer) is io.FileIO and s.write_through, s.line_buffering)
        except Exception:
            continue
        if "write" in d or "flush" in d or type(fd) is not int or fd < 0:
            continue
        # The stream by a weak reference: no cycle through its own __dict__, so it is
        # freed (and flushed, and closed) when and as it would be without the agent.
        ref = _weakref.ref(s)
        state = [fd, 0, None, 0, ref]
        _stdio.append(state)
        text_write = None
        for name, w in _stdio_wrappers(ref, type(s), state, eager[0], eager[1]):
            try:
                setattr(s, name, w)
            except Exception:
                continue
            if name == "write":
                text_write = w.__code__
            # (None: unhook deletes the instance attribute, the class's method shows again.)
            _installed.append((s, name, None, w))
        if eager[0] and text_write is not None:
            _wrap_raw_buffer(s.buffer, state, text_write)


def _wrap_raw_buffer(b, state, text_write):
    """A stream that writes each write through to its descriptor (`python -u`,
    PYTHONUNBUFFERED: its `buffer` is the FileIO itself): its bytes layer too, which
    programs write to directly (`sys.stdout.buffer.write(...)`: flake8's results, pip's,
    black's output). Each such write is a write(2) and says its caller's site for the
    descriptor as the text layer's writes do (_stdio_said); without it those writes kept
    the last site said (flake8's 774 result lines named at a flush made 3 s earlier). The
    text layer's own writes come through here too (TextIOWrapper calls its buffer's
    write): said already, they cost a frame test."""
    try:
        import _weakref

        ref = _weakref.ref(b)
        fw = type(b).write
        if "write" in b.__dict__:
            return
    except Exception:
        return

    def write(data=_NOARG, /, *rest):
        buf = ref()
        if buf is None:
            raise ValueError("I/O operation on closed file.")
        if rest or data is _NOARG:
            return fw(buf, *rest) if data is _NOARG else fw(buf, data, *rest)
        if _fd >= 0:
            try:
                caller = _getframe(1)
                if caller.f_code is not text_write:
                    _stdio_said(state, caller)
            except Exception:
                pass
        return fw(buf, data)

    w = _like(write, fw)
    try:
        setattr(b, "write", w)
    except Exception:
        return
    _installed.append((b, "write", None, w))


def _stdio_wrappers(ref, cls, state, raw, line):
    """(name, wrapper) of _wrap_stdio for the stream `ref` refers to, whose state is
    `state`: it writes each write through (`raw`), or each line (`line`), or neither."""
    tw = cls.write
    tf = cls.flush
    if not raw and not line:
        reported_flush = _wrap(tf)

        def flush(*args):
            s = ref()
            if s is None:
                raise ValueError("I/O operation on closed file.")
            if _fd >= 0 and not args:
                try:
                    inside = _depth.get(_tid())
                except Exception:
                    inside = True
                if not inside:
                    return reported_flush(s)
            return tf(s, *args)

        return (("flush", _like(flush, tf)),)

    # Positional arguments passed on as given (a wrong count raises the original's own
    # error); no **kwargs: a dict built at every call was most of the wrapper's cost (print
    # calls write once per piece). A keyword raises TypeError here, as it does there.
    def write(text=_NOARG, /, *rest):
        s = ref()
        if s is None:
            raise ValueError("I/O operation on closed file.")
        if rest or text is _NOARG:
            return tw(s, *rest) if text is _NOARG else tw(s, text, *rest)
        if type(text) is str and (raw or "\n" in text or "\r" in text) and _fd >= 0:
            try:
                _stdio_said(state, _caller())
            except Exception:
                pass
        return tw(s, text)

    def flush(*args):
        s = ref()
        if s is None:
            raise ValueError("I/O operation on closed file.")
        if _fd >= 0 and not args:
            try:
                _stdio_said(state, _caller())
            except Exception:
                pass
        return tf(s, *args)

    return (("write", _like(write, tw)), ("flush", _like(flush, tf)))


def _caller():
    """The frame that called the wrapper calling this, or None: the interpreter writes
    with no Python frame left (an uncaught exception's message at exit)."""
    try:
        return _getframe(2)
    except ValueError:
        return None


def _stdio_said(state, caller):
    """A write(2) of the stdio stream with `state` is about to be made from frame
    `caller`: its site is said for the descriptor unless it was the last one said
    (_wrap_stdio). Not inside a wrapped call on this thread (that call names it)."""
    global _stdio_req
    # (_depth holds only threads inside a wrapped call: most often empty, and then the
    # thread's id is not needed before a message.)
    if _depth and _depth.get(_tid()):
        return
    fd, said, chain, req = state[0], state[1], state[2], state[3]
    if chain is not None:
        # The frames the site was last found from (_key's chain: up to where its walk
        # stopped, (None, -1) if it ran out of frames): the same frames, the same site.
        f = caller
        for c, lasti in chain:
            if c is None:
                if f is None:
                    return
                break
            if f is None or f.f_code is not c or f.f_lasti != lasti:
                break
            f = f.f_back
        else:
            return
    tid = _tid()
    chain = []
    key, sid, data = _site_for(caller, chain)
    if not key:
        # No frame of Python's (the interpreter writing a traceback): no line.
        if req:
            state[1:4] = [0, None, 0]
            _send(_msg(_ASYNC_END, _pidb + _nsb + req.to_bytes(4, _LE)))
        return
    if not data and sid == said:
        state[2] = chain
        return
    if req:
        data += _msg(_ASYNC_END, _pidb + _nsb + req.to_bytes(4, _LE))
    _stdio_req = _stdio_req % 0x7FFFFFFF + 1
    new = _stdio_req
    data += _msg(
        _FD,
        _pidb + tid.to_bytes(4, _LE) + _nsb + sid.to_bytes(4, _LE) + new.to_bytes(4, _LE) + fd.to_bytes(4, _LE),
    )
    if _send(data):
        _site_sent(key, sid)
        state[1:4] = [sid, chain, new]
    else:
        # Not said: the last site may still stand in dejavu (the pipe was full); the
        # next write says again.
        state[1:4] = [0, None, req]


def _unbind_in_pathlib(mod):
    """pathlib's accessor (Python 3.8 to 3.10) keeps os.stat, os.open, ... as attributes
    of its class and calls `self._accessor.stat(path)`: the builtins are no methods, but a
    wrapper (a Python function) there would be one, and be given the accessor as its path
    (TypeError: stat() takes exactly 1 positional argument (2 given)). The wrappers it
    holds become static methods, as the builtins behave. (Only there: a wrapper that
    never binds, such as a functools.partial, costs ~270 instructions at every call, and
    a partial or a staticmethod cannot be pickled by reference as os.stat is.)"""
    cls = getattr(mod, "_NormalAccessor", None)
    if not isinstance(cls, type):
        return
    ours = {id(e[3]): e[2] for e in _installed if e[0] is not None and not isinstance(e[0], type)}
    for name, v in list(vars(cls).items()):
        orig = ours.get(id(v))
        if orig is None:
            continue
        _put(cls, name, orig, staticmethod(v))


def _install_method(cls, name):
    orig = cls.__dict__.get(name)
    if orig is None or not callable(orig):
        return
    _put(cls, name, orig, _wrap(orig))


class _AfterImport:
    """A loader standing in for a watched module's own while it executes the module, then
    wrapping what it defines. The module's __loader__ and __spec__.loader are the real
    loader again by the time the import returns."""

    def __init__(self, loader, then):
        self._loader = loader
        self._then = then

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        loader = self._loader
        try:
            module.__loader__ = loader
            spec = getattr(module, "__spec__", None)
            if spec is not None:
                spec.loader = loader
        except Exception:
            pass
        loader.exec_module(module)
        if _fd >= 0:
            try:
                self._then(module)
            except Exception:
                pass


class _ImportWatch:
    """A meta path finder that only looks at the watched modules' names: it finds them
    through the finders after it, and has their loader wrap them once executed."""

    def __init__(self):
        self._busy = False

    def find_spec(self, name, path=None, target=None):
        then = _WATCHED.get(name)
        if then is None or self._busy or _fd < 0:
            return None
        self._busy = True
        try:
            spec = None
            for finder in _sys.meta_path:
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        except Exception:
            return None
        finally:
            self._busy = False
        loader = getattr(spec, "loader", None) if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        spec.loader = _AfterImport(loader, then)
        return spec


def _unstick(p, e):
    """Forgets repeated-call entry `e` of path `p` and tells dejavu (a STICKY with site 0):
    the thread's calls on the path take no line from it any more. The path's next wrapped
    call starts over (said with ENTER and EXIT, a second one STICKY again)."""
    d = _fast_of.get(e[1])
    if d:
        d.pop(p, None)
    _sticky.pop(p, None)
    if _fd < 0:
        return
    try:
        path = _resolve(p, e[6] or "/")
        _send(_msg(_STICKY, _pidb + e[5].to_bytes(4, _LE) + _nsb + b"\0\0\0\0" + len(path).to_bytes(2, _LE) + path))
    except Exception:
        pass


def _watch_import_stats():
    """The import system stats files with posix.stat (importlib._bootstrap_external's
    _path_stat: a FileFinder's isfile of each candidate, a loader's path_stats), the same
    system call as the os.stat the agent wraps, and the agent does not see it: on a path
    a wrapped call made sticky it took that call's line (`os.path.exists(p)` beside
    `find_spec` of the module at `p`: ansible's _slurp was named for ~600 of the import
    system's stats). Its calls on a sticky path forget the path first (_unstick); on any
    other, a dict test."""
    ext = _sys.modules.get("_frozen_importlib_external")
    orig = getattr(ext, "_path_stat", None)
    if not callable(orig):
        return

    def _path_stat(path):
        if _sticky and type(path) is str:
            e = _sticky.get(path)
            if e is not None:
                _unstick(path, e)
        return orig(path)

    _put(ext, "_path_stat", orig, _path_stat)


def _watch_imports():
    _WATCHED["subprocess"] = _wrap_subprocess
    _WATCHED["logging"] = _wrap_logging
    _WATCHED["ssl"] = _wrap_ssl
    if _sys.version_info < (3, 11):
        _WATCHED["pathlib"] = _unbind_in_pathlib
    for name, then in list(_WATCHED.items()):
        mod = _sys.modules.get(name)
        if mod is not None:
            # Imported before us (a .pth file): wrapped now, and not watched.
            del _WATCHED[name]
            try:
                then(mod)
            except Exception:
                pass
    if not _WATCHED:
        return
    w = _ImportWatch()
    _sys.meta_path.insert(0, w)
    _installed.append((None, "meta_path", w, w))


def _hello():
    global _pid, _pidb, _nsb
    _pid = _os.getpid()
    _pidb = _pid.to_bytes(4, _LE)
    # One agent per process: its site numbers are the process's (namespace = pid).
    _nsb = _pidb
    return _send(_msg(_HELLO, _pidb + _nsb + bytes((_LANG_PYTHON,))))


def _after_fork():
    # A forked child is a new process: new pid, and dejavu knows none of its sites.
    global _cwd
    _sites.clear()
    _site_codes.clear()
    _new_sites.clear()
    _depth.clear()
    _sticky.clear()
    _fast_clear()
    _cwd = ""
    # The parent's stdio sites are not the child's (dejavu keeps FD requests per process).
    for e in _stdio:
        e[1:4] = [0, None, 0]
    try:
        # The thread that forked is the child's one thread, with a new id.
        _tls.tid = _gnid()
        _hello()
    except Exception:
        unhook()


def unhook():
    """Restores every original still in place and stops reporting. Safe to call twice."""
    global _fd, _lone, _cwd
    _fd = -1
    _lone = False
    _cwd = ""
    # The wrappers' fast path finds no entry: every call takes the path that tests _fd.
    _sticky.clear()
    _once.clear()
    _fast_clear()
    for ns, name, orig, w in reversed(_installed):
        if ns is None:
            # The import watch.
            try:
                _sys.meta_path.remove(w)
            except ValueError:
                pass
            continue
        try:
            # A class's own attribute as it holds it (a staticmethod, not what it gives).
            cur = ns.__dict__.get(name) if isinstance(ns, type) else getattr(ns, name, None)
            if cur is w:
                if orig is None:
                    delattr(ns, name)
                else:
                    setattr(ns, name, orig)
        except Exception:
            pass
        if ns is _os:
            for s in _SUPPORTS:
                group = getattr(_os, s, None)
                if isinstance(group, set):
                    group.discard(w)
    del _installed[:]
    _WATCHED.clear()
    _sys.modules.pop("_dejavu_agent", None)


def _start():
    global _fd, _STDLIB, _gnid, _tls
    fd = _channel()
    if fd < 0:
        return
    import _thread

    _gnid = _thread.get_native_id
    _tls = _thread._local()
    _STDLIB = _os.path.dirname(_os.__file__) + _os.sep
    _fd = fd
    import builtins
    import io

    for name in (
        "stat", "lstat", "access", "listdir", "scandir", "mkdir", "rmdir", "readlink",
        "remove", "unlink", "rename", "replace", "chmod", "chown", "utime", "truncate",
        "symlink", "link", "chdir", "statvfs",
        # Processes: the child's calls until its exec, and its exec, are the line's.
        # (spawnl*, execl* and execvp* go through these; os.popen through subprocess.)
        "system", "posix_spawn", "posix_spawnp", "spawnv", "spawnve", "spawnvp",
        "spawnvpe", "execv", "execve",
    ):
        _install(_os, name)
    # Not reported (as before), but it changes the working directory the agent keeps.
    _install(_os, "fchdir", report=False)
    # os.open's descriptor: its later calls (os.read, os.write) are the open's line.
    _install(_os, "open", _opened_fd)
    # A pipe's two descriptors: their later calls (a multiprocessing queue's writes, from
    # its feeder thread, through os.write, which the standard library took at its import)
    # are the line that made the pipe.
    _install(_os, "pipe", _opened_fd)
    _install(_os, "pipe2", _opened_fd)
    # builtins.open is io.open: one wrapper for both, so `open is io.open` stays true.
    # What the file object does later (its reads, writes, flushes, close) is on its
    # descriptor: the open's line.
    orig_open = io.open
    _install(io, "open", _opened_file)
    if builtins.open is orig_open:
        if io.open is not orig_open:
            builtins.open = io.open
            _installed.append((builtins, "open", orig_open, io.open))
    else:
        _install(builtins, "open", _opened_file)
    # print() and sys.stdout / sys.stderr writes where they make a write(2).
    _wrap_stdio(io)
    _keep_channel_in_children()
    _watch_threads(_thread)
    _watch_imports()
    _watch_import_stats()
    try:
        _os.register_at_fork(after_in_child=_after_fork)
    except Exception:
        pass
    # Loaded: the hello says so (dejavu marks the end of the interpreter's start-up
    # with it). Without a working channel, nothing of ours stays.
    if not _hello():
        unhook()


_STDLIB = "\0"
_gnid = None
_tls = None
try:
    _start()
except Exception:
    # Never into the program: without a working agent it runs as without dejavu.
    try:
        unhook()
    except Exception:
        pass
