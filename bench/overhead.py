#!/usr/bin/env python3
"""overhead.py: what recording with dejavu costs, next to its peers, as ratios to native.

For each workload in bench/workloads/ (Node.js and Python stat loops, a C
open/write/close loop, a C loop of small writes to one file, a `make -j2` of a small
generated C project, and `true`: the fixed cost alone), this runs, in one
invocation and interleaved round-robin so that machine noise hits every variant alike:

    native                      the workload alone
    strace                      strace -f -o /dev/null (every syscall stops)
    strace-bpf                  strace -f --seccomp-bpf -e trace=<dejavu's set> -o /dev/null
    perf-trace                  perf trace -o <tmp> -e <dejavu's set> (tracepoints, no ptrace)
    dejavu                      dejavu record --backend ptrace (ptrace + seccomp-bpf, the same set)
    dejavu-ebpf                 dejavu record --backend ebpf (in the kernel; needs root or
                                CAP_BPF + CAP_PERFMON, skipped with the reason otherwise)
    dejavu-ebpf-nostacks        the same with --stacks off (no language agents, no user
                                stacks: the backend's own cost)
    dejavu-ebpf-cold            dejavu record --backend ebpf with DEJAVU_BPF_KEEP=off: its
                                programs loaded and verified at every start, as on a
                                recording's first run after a boot (the others reuse the
                                programs an earlier run kept loaded, docs/ebpf-backend.md)

R times each (default 5), and prints a markdown table per workload: median and min wall
time, median over native, and notes (trace size per event for dejavu, events perf wrote,
CPU time of the whole process tree, and any run whose output or exit code differed from
native: a tracer that changes what the program does makes its timing worthless).
`--pin` adds every variant again under `taskset -c 0` (tracer and tracee on one CPU).
`--before-dejavu BIN` adds each dejavu variant again with another dejavu binary (another
revision's build), interleaved in the same rounds: the cost of a change, side by side (as
root with a BPF filesystem at /sys/fs/bpf, that build keeps its programs in a directory of
its own there, removed at the end: the two builds' would otherwise evict each other's).

Standard library only (Python 3.11). Nothing here asserts on times: it is a benchmark,
not a test. Progress goes to stderr, the report to stdout, raw numbers to --json FILE.
See bench/README.md for how to read the output.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
WORKLOADS_DIR = REPO / "bench" / "workloads"

# The calls dejavu's ptrace backend asks its seccomp filter to stop on, so the filtered
# strace and perf trace variants do the same amount of tracing work. fchmodat2 is left
# out: strace 6.1 does not know it (and rejects the whole list). dejavu also stops on
# mmap, but only of files (its filter tests the arguments); strace cannot filter on
# arguments, so mmap is left out here too and the peers trace slightly less.
TRACED_SET = (
    "open,openat,openat2,creat,close,close_range,read,pread64,readv,preadv,preadv2,"
    "write,pwrite64,writev,pwritev,pwritev2,lseek,stat,lstat,fstat,newfstatat,statx,"
    "access,faccessat,faccessat2,readlink,readlinkat,getdents64,mkdir,mkdirat,rmdir,"
    "unlink,unlinkat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,chmod,"
    "fchmod,fchmodat,chown,fchown,lchown,fchownat,truncate,ftruncate,fsync,fdatasync,"
    "sync_file_range,dup,dup2,dup3,fcntl,pipe,pipe2,socket,accept,accept4,connect,"
    "sendfile,copy_file_range,splice,utimensat,chdir,fchdir,execve,execveat,"
    "memfd_create,io_uring_setup,io_uring_enter"
)

STAT_TARGET_BYTES = 1000  # size of the file the stat loops stat: makes their output fixed


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- machine


def capture(argv: list[str], cwd: Path | None = None, timeout: float = 60) -> str:
    """First line of a command's output, or why there is none (for the facts block)."""
    try:
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return f"n/a ({e.__class__.__name__}: {e})"
    text = (p.stdout.strip() or p.stderr.strip()).splitlines()
    return text[0] if text else f"n/a (exit {p.returncode}, no output)"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "n/a"


def mem_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError):
        pass
    return "n/a"


def git_revision() -> str:
    # Read-only queries; --no-optional-locks keeps `git status` from touching the index,
    # which the maintainer (and other engineers) may be using at the same time.
    head = capture(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(
        ["git", "--no-optional-locks", "-C", str(REPO), "status", "--porcelain",
         "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    return head + (" (working tree has uncommitted changes)" if dirty else "")


def machine_facts(dejavu: Path | None, dejavu_source: str) -> dict:
    facts = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu": cpu_model(),
        "memory": mem_total(),
        "kernel": platform.release(),
        "load_start": loadavg(),
        "git": git_revision(),
        "versions": {
            "dejavu": capture([str(dejavu), "--version"]) if dejavu else "n/a",
            "dejavu_binary": dejavu_source,
            "strace": capture(["strace", "-V"]),
            "perf": capture(["perf", "version"]),
            "node": capture(["node", "--version"]),
            "python (workload)": f"{platform.python_version()} ({sys.executable})",
            "cc": capture(["cc", "--version"]),
            "make": capture(["make", "--version"]),
        },
    }
    return facts


# --------------------------------------------------------------------------- workloads


@dataclass
class Workload:
    key: str
    title: str
    n_full: int
    n_quick: int
    # setup(tmpdir, n) -> (argv, cwd); runs once, untimed (compiles, generates files)
    setup: Callable[[Path, int], tuple[list[str], Path]]
    # runs before every timed run, untimed (make clean)
    before_run: Callable[[Path], None] | None = None
    unit: str = "iterations"


def write_stat_target(tmp: Path) -> Path:
    target = tmp / "stat-target.txt"
    target.write_bytes(b"x" * (STAT_TARGET_BYTES - 1) + b"\n")
    return target


def setup_stat_js(tmp: Path, n: int) -> tuple[list[str], Path]:
    target = write_stat_target(tmp)
    return ["node", str(WORKLOADS_DIR / "stat_loop.js"), str(n), str(target)], tmp


def setup_stat_py(tmp: Path, n: int) -> tuple[list[str], Path]:
    target = write_stat_target(tmp)
    # sys.executable is the real interpreter: `python3` may be a pyenv shell shim whose
    # own bash and exec work would be traced and timed along with the workload.
    return [sys.executable, str(WORKLOADS_DIR / "stat_loop.py"), str(n), str(target)], tmp


def setup_stat_c2(tmp: Path, n: int) -> tuple[list[str], Path]:
    # The test fixture itself (tests/workloads/c/two_lines.c), built as the benchmarks'
    # other C workloads are.
    exe = tmp / "two_lines"
    subprocess.run(["cc", "-O2", "-g", "-o", str(exe),
                    str(REPO / "tests" / "workloads" / "c" / "two_lines.c")], check=True)
    target = write_stat_target(tmp)
    return [str(exe), str(target), str(n)], tmp


def setup_owc(tmp: Path, n: int) -> tuple[list[str], Path]:
    exe = tmp / "owc"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(WORKLOADS_DIR / "open_write_close.c")],
                   check=True)
    out = tmp / "owc-out"
    out.mkdir()
    return [str(exe), str(out), str(n)], tmp


def setup_make(tmp: Path, modules: int) -> tuple[list[str], Path]:
    proj = tmp / "cproject"
    subprocess.run([sys.executable, str(WORKLOADS_DIR / "cproject" / "gen.py"), str(proj),
                    str(modules)], check=True)
    return ["make", "-s", "-j2"], proj


def setup_writes(tmp: Path, n: int) -> tuple[list[str], Path]:
    exe = tmp / "small_writes"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(WORKLOADS_DIR / "small_writes.c")],
                   check=True)
    out = tmp / "writes-out"
    out.mkdir()
    return [str(exe), str(out), str(n)], tmp


def setup_go_http(tmp: Path, n: int) -> tuple[list[str], Path]:
    # Built here (the Go toolchain, no module to download): a server and its clients in one
    # process, each request on a new connection, so each is served on a new goroutine.
    exe = tmp / "go_http"
    subprocess.run(["go", "build", "-o", str(exe), "."], cwd=WORKLOADS_DIR / "go_http",
                   check=True, env={**os.environ, "GOFLAGS": "-mod=mod"})
    target = write_stat_target(tmp)
    return [str(exe), str(n), str(target)], tmp


def setup_true(tmp: Path, n: int) -> tuple[list[str], Path]:
    return ["true"], tmp


def make_clean(cwd: Path) -> None:
    subprocess.run(["make", "-s", "clean"], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL)


WORKLOADS = {
    w.key: w
    for w in [
        Workload("stat_js", "Node.js: fs.statSync of one file, N times", 200000, 20000,
                 setup_stat_js, unit="statSync calls"),
        Workload("stat_py", "Python: os.stat of one file, N times", 200000, 20000,
                 setup_stat_py, unit="os.stat calls"),
        Workload("owc", "C: open(O_APPEND)+write+close of one file, N times", 20000, 2000,
                 setup_owc, unit="open/write/close"),
        Workload("stat_c2", "C: stat(2) of one file from a helper called from two lines of "
                 "a loop, N times each (one place, two stacks taking turns)", 100000, 10000,
                 setup_stat_c2, unit="calls per line"),
        Workload("writes", "C: write(2) of one short line to a data file, N times",
                 200000, 20000, setup_writes, unit="writes"),
        Workload("make", "make -j2 of a generated C project (make clean before each run)",
                 32, 8, setup_make, before_run=make_clean, unit="modules"),
        Workload("go_http", "Go: an HTTP server stats a file per request, N requests on "
                 "new connections (a goroutine each)", 16000, 1600, setup_go_http,
                 unit="requests"),
        # Nothing to do: each tool's fixed cost (start-up, attach, end), R times.
        Workload("true", "`true`, the tools' fixed cost", 1, 1, setup_true, unit="run"),
    ]
}


# --------------------------------------------------------------------------- variants


@dataclass
class Variant:
    key: str
    label: str
    # prefix(run_dir) -> argv placed before the workload's argv
    prefix: Callable[[Path], list[str]]
    forwards_exit: bool = True  # perf trace exits 0 whatever the workload did
    kind: str = "tool"  # "native", "tool"
    pinned: bool = False
    # collect(run_dir) -> per-run stats (trace size, events); runs untimed after each run
    collect: Callable[[Path], dict] | None = None
    unavailable: str | None = None  # reason, when the probe failed


def dejavu_collect(dejavu: Path) -> Callable[[Path], dict]:
    def collect(run_dir: Path) -> dict:
        trace = run_dir / "t.dvt"
        if not trace.exists():
            return {"error": "no trace file written"}
        size = trace.stat().st_size
        # The export's last line is the end block (records, lost_events, exit), or a
        # truncation/error line; count syscall lines on the way (the type comes first).
        syscalls = 0
        last = ""
        p = subprocess.Popen([str(dejavu), "export", "--format", "jsonl", str(trace)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith('{"type":"syscall"'):
                syscalls += 1
            last = line
        err = p.stderr.read() if p.stderr else ""
        p.wait()
        trace.unlink()
        try:
            end = json.loads(last) if last else {}
        except json.JSONDecodeError:
            end = {}
        if end.get("type") != "end":
            return {"error": f"trace did not end cleanly: {last.strip()[:200]} {err.strip()[:200]}",
                    "bytes": size}
        records = int(end.get("records", 0))
        return {
            "bytes": size,
            "records": records,
            "syscall_records": syscalls,
            "lost_events": end.get("lost_events"),
            "exit": end.get("exit"),
            "bytes_per_record": size / records if records else None,
        }
    return collect


def perf_collect(run_dir: Path) -> dict:
    out = run_dir / "perf.txt"
    if not out.exists():
        return {"error": "no perf output written"}
    lines = lost = 0
    with out.open("rb") as f:
        for line in f:
            if b"LOST" in line:
                # perf trace reports ring-buffer overruns inline: "LOST 1234 events!"
                lost += 1
            else:
                lines += 1
    out.unlink()
    return {"lines": lines, "lost_reports": lost}


BPFFS = Path("/sys/fs/bpf")
BEFORE_KEEP = BPFFS / "dejavu_bench_before"


def before_keep_dir() -> str | None:
    """A directory for the --before-dejavu build's kept programs, on the machine's BPF
    filesystem (as root, when one is mounted there), emptied first and removed at exit
    (remove_before_keep); None otherwise (that build then shares the default one)."""
    if os.geteuid() != 0 or not os.path.ismount(BPFFS):
        return None
    try:
        remove_before_keep()
        BEFORE_KEEP.mkdir(mode=0o700)
    except OSError as e:
        log(f"no directory of its own for the --before-dejavu build's kept programs: {e}")
        return None
    atexit.register(remove_before_keep)
    return str(BEFORE_KEEP)


def remove_before_keep() -> None:
    """Frees what the --before-dejavu build kept (its pins; the kernel frees the maps and
    programs with the last one)."""
    if BEFORE_KEEP.exists():
        shutil.rmtree(BEFORE_KEEP)


def make_variants(dejavu: Path | None, dejavu_missing: str | None, pin: bool,
                  only: set[str] | None,
                  before: tuple[Path | None, str | None, str, str | None] | None = None
                  ) -> list[Variant]:
    base = [
        Variant("native", "native", lambda d: [], kind="native"),
        Variant("strace", "strace -f", lambda d: ["strace", "-f", "-o", "/dev/null"]),
        Variant("strace-bpf", "strace -f --seccomp-bpf -e trace=SET",
                lambda d: ["strace", "-f", "--seccomp-bpf", "-e", "trace=" + TRACED_SET,
                           "-o", "/dev/null"]),
        # perf trace follows children by default (inherit); its -f is --force, not
        # follow-forks, so it is not needed. It writes to a file like dejavu does.
        Variant("perf-trace", "perf trace -e SET",
                lambda d: ["perf", "trace", "-o", str(d / "perf.txt"), "-e", TRACED_SET, "--"],
                forwards_exit=False, collect=perf_collect),
        Variant("dejavu", "dejavu record --backend ptrace",
                lambda d: [str(dejavu), "record", "--backend", "ptrace", "-o", str(d / "t.dvt"),
                           "--"],
                collect=dejavu_collect(dejavu) if dejavu else None,
                unavailable=dejavu_missing),
        Variant("dejavu-ebpf", "dejavu record --backend ebpf",
                lambda d: [str(dejavu), "record", "--backend", "ebpf", "-o", str(d / "t.dvt"),
                           "--"],
                collect=dejavu_collect(dejavu) if dejavu else None,
                unavailable=dejavu_missing),
        Variant("dejavu-ebpf-nostacks", "dejavu record --backend ebpf --stacks off",
                lambda d: [str(dejavu), "record", "--backend", "ebpf", "--stacks", "off",
                           "-o", str(d / "t.dvt"), "--"],
                collect=dejavu_collect(dejavu) if dejavu else None,
                unavailable=dejavu_missing),
        Variant("dejavu-ebpf-cold", "dejavu record --backend ebpf, nothing kept loaded",
                lambda d: ["env", "DEJAVU_BPF_KEEP=off", str(dejavu), "record", "--backend",
                           "ebpf", "-o", str(d / "t.dvt"), "--"],
                collect=dejavu_collect(dejavu) if dejavu else None,
                unavailable=dejavu_missing),
    ]
    if before is not None:
        # The same dejavu rows with the other binary (key suffix @before). Its kept
        # programs (docs/ebpf-backend.md, "Kept loaded") in a directory of their own when
        # one could be made: the two builds' objects differ, and with stacks on and off
        # they are four keys for the three slots one directory keeps, so each would evict
        # the other's and both would load cold.
        bin_, missing, label, keep = before
        env = ["env", f"DEJAVU_BPF_KEEP={keep}"] if keep else []
        for v in [v for v in base if v.key.startswith("dejavu") and v.prefix(Path("."))[0]
                  == str(dejavu)]:
            argv_of = (lambda p: lambda d: env + [str(bin_)] + p(d)[1:])(v.prefix)
            base.append(Variant(
                v.key + "@before", v.label + f" [{label}]", argv_of,
                collect=dejavu_collect(bin_) if bin_ else None,
                unavailable=missing))
    if only is not None:
        base = [v for v in base
                if v.key in only or v.key.removesuffix("@before") in only
                or v.kind == "native"]
    variants = list(base)
    if pin:
        for v in base:
            # Both the tracer and the tracee (affinity is inherited) run on CPU 0: no
            # cross-CPU wake-ups per stop, but also no parallelism for make -j2, so
            # pinned rows are compared with pinned native.
            variants.append(Variant(
                v.key + "@cpu0", v.label + " (taskset -c 0)",
                (lambda p: lambda d: ["taskset", "-c", "0"] + p(d))(v.prefix),
                forwards_exit=v.forwards_exit, kind=v.kind, pinned=True,
                collect=v.collect, unavailable=v.unavailable))
    return variants


def probe(variant: Variant, tmp: Path, timeout: float) -> tuple[str | None, float | None]:
    """(why the variant cannot run here or None, wall seconds): run it on `true` once.

    This also warms the tool's binary and libraries in the page cache before timing,
    and its time is the tool's fixed start-up and tear-down cost, which dominates
    short workloads (one cold sample: indicative only).
    """
    if variant.unavailable:
        return variant.unavailable, None
    d = tmp / f"probe-{variant.key}"
    d.mkdir(exist_ok=True)
    argv = variant.prefix(d) + ["true"]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return f"{argv[0]} not installed", None
    except subprocess.TimeoutExpired:
        return f"`{' '.join(argv[:3])} ... true` timed out", None
    wall = time.perf_counter() - t0
    shutil.rmtree(d, ignore_errors=True)
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip() or "no message").splitlines()[0]
        return f"exit {p.returncode} on `true`: {msg[:160]}", None
    return None, wall


# --------------------------------------------------------------------------- running


@dataclass
class RunResult:
    wall: float
    cpu: float  # user+sys of the whole process tree (tracer included)
    rc: int | None
    stdout: str
    stderr: str
    timed_out: bool


def timed_run(argv: list[str], cwd: Path, timeout: float) -> RunResult:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # A session of its own so that a timeout can end exactly this run's processes.
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return RunResult(wall, cpu, p.returncode, out.decode(errors="replace"),
                     err.decode(errors="replace"), timed_out)


@dataclass
class VariantResult:
    variant: Variant
    status: str = "ok"  # "ok" or "n/a (reason)"
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    extra_stderr: list[str] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    probe_s: float | None = None  # one run of the variant on `true`

    def median(self) -> float | None:
        return statistics.median(self.walls) if self.walls else None


def check_run(v: Variant, r: RunResult, ref: RunResult) -> str | None:
    """What differs from the native reference run, or None."""
    if r.timed_out:
        return "timed out"
    problems = []
    if r.stdout != ref.stdout:
        got = r.stdout.strip().splitlines()
        problems.append(f"stdout {got[-1][:80] if got else '(empty)'!r} "
                        f"instead of {ref.stdout.strip()[:80]!r}")
    if v.forwards_exit and r.rc != ref.rc:
        problems.append(f"exit {r.rc} instead of {ref.rc}")
    return "; ".join(problems) or None


def run_workload(w: Workload, n: int, variants: list[Variant], reps: int, tmp: Path,
                 timeout: float) -> dict:
    wdir = tmp / w.key
    wdir.mkdir()
    argv, cwd = w.setup(wdir, n)
    log(f"== {w.key}: {' '.join(argv)} (cwd {cwd})")

    # One untimed native run: the reference output every variant must reproduce, and a
    # warm page cache (node, python, cc headers) for everyone.
    if w.before_run:
        w.before_run(cwd)
    ref = timed_run(argv, cwd, timeout)
    if ref.timed_out or ref.rc != 0:
        raise SystemExit(f"{w.key}: the native reference run failed (exit {ref.rc}): "
                         f"{ref.stderr.strip()[:500]}")
    log(f"   reference: exit {ref.rc}, stdout {ref.stdout.strip()!r}, {ref.wall:.2f} s")

    results = {v.key: VariantResult(v) for v in variants}
    for v in variants:
        reason, results[v.key].probe_s = probe(v, wdir, timeout=min(timeout, 120))
        if reason:
            results[v.key].status = f"n/a ({reason})"
            log(f"   {v.key}: {results[v.key].status}")
    runnable = [v for v in variants if results[v.key].status == "ok"]

    for rep in range(reps):
        # Round-robin, and rotate the start each repetition so that no variant always
        # runs right after the same other one (warm caches, a neighbour's build step).
        k = rep % len(runnable)
        for v in runnable[k:] + runnable[:k]:
            if w.before_run:
                w.before_run(cwd)
            run_dir = wdir / f"run-{v.key}"
            run_dir.mkdir(exist_ok=True)
            r = timed_run(v.prefix(run_dir) + argv, cwd, timeout)
            res = results[v.key]
            if not r.timed_out:
                res.walls.append(r.wall)
                res.cpus.append(r.cpu)
            problem = check_run(v, r, ref)
            if problem:
                res.mismatches.append(f"rep {rep + 1}: {problem}")
                if r.stderr.strip():
                    res.mismatches[-1] += f" [stderr: {r.stderr.strip().splitlines()[-1][:160]}]"
            elif r.stderr != ref.stderr:
                res.extra_stderr.append(r.stderr.strip().splitlines()[0][:160]
                                        if r.stderr.strip() else "(stderr differs)")
            if v.collect:
                st = v.collect(run_dir)
                res.stats.append(st)
                if "exit" in st and st["exit"] != {"code": ref.rc}:
                    res.mismatches.append(f"rep {rep + 1}: trace end block says exit "
                                          f"{st['exit']}, workload exited {r.rc}")
            shutil.rmtree(run_dir, ignore_errors=True)
            log(f"   rep {rep + 1}/{reps} {v.key:<16} {r.wall:8.3f} s"
                + ("  MISMATCH: " + problem if problem else ""))
    return {"argv": argv, "n": n, "reference": ref, "results": results, "tmp": tmp}


# --------------------------------------------------------------------------- report


def fmt_s(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.2f}")


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def stats_note(v: Variant, stats: list[dict]) -> list[str]:
    ok = [s for s in stats if "error" not in s]
    notes = [f"stats error: {s['error']}" for s in stats if "error" in s][:1]
    if not ok:
        return notes
    if v.key.startswith("dejavu"):
        recs = sorted({s["records"] for s in ok})
        sysc = sorted({s["syscall_records"] for s in ok})
        rec = fmt_int(recs[0]) if len(recs) == 1 else f"{fmt_int(recs[0])}-{fmt_int(recs[-1])}"
        sc = fmt_int(sysc[0]) if len(sysc) == 1 else f"{fmt_int(sysc[0])}-{fmt_int(sysc[-1])}"
        bpr = statistics.median(s["bytes_per_record"] for s in ok if s["bytes_per_record"])
        size = statistics.median(s["bytes"] for s in ok)
        notes.append(f"{rec} records ({sc} syscalls), {size / 1024:,.0f} KiB, "
                     f"{bpr:.1f} B/record")
        lost = sum(int(s.get("lost_events") or 0) for s in ok)
        if lost:
            notes.append(f"lost events: {lost} over {len(ok)} runs")
    elif v.key.startswith("perf-trace"):
        lines = sorted({s["lines"] for s in ok})
        ln = fmt_int(lines[0]) if len(lines) == 1 else f"{fmt_int(lines[0])}-{fmt_int(lines[-1])}"
        notes.append(f"{ln} events written")
        lost = sum(s["lost_reports"] for s in ok)
        if lost:
            notes.append(f"{lost} LOST reports (perf dropped events)")
    return notes


def shown_command(argv: list[str], tmp: Path) -> str:
    """The workload's command as a reader can repeat it: program by name, paths relative
    to the repo root, the run's temporary directory as $TMP."""
    words = [Path(argv[0]).name]
    for a in argv[1:]:
        a = a.replace(str(tmp), "$TMP")
        if a.startswith(str(REPO) + "/"):
            a = a[len(str(REPO)) + 1:]
        words.append(a)
    return " ".join(words)


def render(workload: Workload, wr: dict, reps: int) -> tuple[str, dict]:
    results: dict[str, VariantResult] = wr["results"]
    native = {False: results.get("native"), True: results.get("native@cpu0")}
    lines = [
        f"### {workload.key}: {workload.title}",
        "",
        f"`{shown_command(wr['argv'], wr['tmp'])}` "
        f"(N = {wr['n']:,} {workload.unit}); reference output: "
        f"`{wr['reference'].stdout.strip()}`",
        "",
        "| variant | median s | min s | ratio to native | notes |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    out = {}
    for key, res in results.items():
        v = res.variant
        med = res.median()
        base = native[v.pinned].median() if native[v.pinned] else None
        ratio = med / base if med is not None and base else None
        notes = []
        if res.status != "ok":
            lines.append(f"| {v.label} | {res.status} | | | |")
            out[key] = {"label": v.label, "status": res.status}
            continue
        if res.cpus:
            notes.append(f"cpu {fmt_s(statistics.median(res.cpus))} s")
        if v.kind != "native" and res.probe_s is not None:
            notes.append(f"on `true`: {fmt_s(res.probe_s)} s")
        if v.pinned and v.kind != "native":
            notes.append("ratio vs pinned native")
        notes += stats_note(v, res.stats)
        if not v.forwards_exit:
            notes.append("exit code not forwarded by the tool; stdout checked")
        if res.mismatches:
            notes.append(f"**WORKLOAD BROKEN in {len(res.mismatches)} run(s)**: "
                         + res.mismatches[0].replace("|", "/"))
        if res.extra_stderr:
            notes.append("extra stderr: " + res.extra_stderr[0].replace("|", "/"))
        if len(res.walls) < reps:
            notes.append(f"only {len(res.walls)}/{reps} runs completed")
        lines.append(f"| {v.label} | {fmt_s(med)} | {fmt_s(min(res.walls) if res.walls else None)}"
                     f" | {'-' if ratio is None else f'{ratio:.2f}x'} | {'; '.join(notes)} |")
        out[key] = {
            "label": v.label,
            "status": res.status,
            "pinned": v.pinned,
            "wall_s": res.walls,
            "cpu_s": res.cpus,
            "median_s": med,
            "min_s": min(res.walls) if res.walls else None,
            "ratio_to_native": ratio,
            "mismatches": res.mismatches,
            "extra_stderr": res.extra_stderr,
            "stats": res.stats,
            "probe_true_s": res.probe_s,
        }
    return "\n".join(lines), out


# --------------------------------------------------------------------------- main


def find_dejavu(arg: str | None, tmp: Path, name: str = "dejavu"
                ) -> tuple[Path | None, str | None, str]:
    """(copy of the binary to use, reason it is unavailable, where it came from)."""
    path = Path(arg) if arg else REPO / "target" / "release" / "dejavu"
    if not path.is_absolute():
        path = REPO / path
    if not path.exists():
        if arg:
            return None, f"{path} does not exist", str(path)
        log(f"{path} missing: cargo build --release")
        p = subprocess.run(["cargo", "build", "--release"], cwd=REPO)
        if p.returncode != 0 or not path.exists():
            return None, "cargo build --release failed", str(path)
    # Run a private copy: others may rebuild target/release/dejavu while this runs, and
    # every run of one invocation must measure the same binary.
    copy = tmp / name
    shutil.copy2(path, copy)
    mtime = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(path.stat().st_mtime))
    return copy, None, f"{path} (built {mtime}, copied for the run)"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Workloads: " + ", ".join(f"{w.key} ({w.title})" for w in WORKLOADS.values()))
    ap.add_argument("--reps", type=int, help="runs of each variant (default 5, 2 with --quick)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of: %(default)s")
    ap.add_argument("--variants", help="comma-separated subset of: strace,strace-bpf,"
                    "perf-trace,dejavu,dejavu-ebpf,dejavu-ebpf-nostacks,dejavu-ebpf-cold (native always runs)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: N/10 (8 modules for make) and 2 reps")
    ap.add_argument("--pin", action="store_true",
                    help="also run every variant under `taskset -c 0`, as separate rows")
    ap.add_argument("--dejavu", help="dejavu binary (default: target/release/dejavu under "
                    "the repo root, built with cargo build --release if missing)")
    ap.add_argument("--before-dejavu", metavar="BIN",
                    help="also run every dejavu variant with this binary (another revision's "
                    "build), as rows marked [--before-label]")
    ap.add_argument("--before-label", default="before",
                    help="what to call the --before-dejavu rows (default %(default)s)")
    ap.add_argument("--json", metavar="FILE", help="write machine-readable results here")
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds before one run is killed (default %(default)s)")
    args = ap.parse_args()

    keys = [k.strip() for k in args.workloads.split(",") if k.strip()]
    unknown = [k for k in keys if k not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    only = None
    if args.variants:
        only = {k.strip() for k in args.variants.split(",") if k.strip()}
        bad = only - {"native", "strace", "strace-bpf", "perf-trace", "dejavu", "dejavu-ebpf",
                        "dejavu-ebpf-nostacks", "dejavu-ebpf-cold"}
        if bad:
            ap.error(f"unknown variant(s) {', '.join(sorted(bad))}")
    reps = args.reps if args.reps else (2 if args.quick else 5)
    if reps < 1:
        ap.error("--reps must be at least 1")

    with tempfile.TemporaryDirectory(prefix="dejavu-overhead-") as tmpname:
        tmp = Path(tmpname)
        dejavu, missing, source = find_dejavu(args.dejavu, tmp)
        facts = machine_facts(dejavu, source)
        before = None
        if args.before_dejavu:
            bbin, bmissing, bsource = find_dejavu(args.before_dejavu, tmp, "dejavu-before")
            before = (bbin, bmissing, args.before_label, before_keep_dir())
            facts["versions"]["dejavu (" + args.before_label + ")"] = (
                capture([str(bbin), "--version"]) if bbin else "n/a") + f"; {bsource}"
        variants = make_variants(dejavu, missing, args.pin, only, before)

        header = [
            "## Overhead (bench/overhead.py)",
            "",
            f"Command: `python3 bench/overhead.py {' '.join(sys.argv[1:])}`".rstrip(),
            "",
            f"- date (UTC): {facts['date_utc']}",
            f"- machine: {facts['nproc']} CPUs ({facts['usable_cpus']} usable), "
            f"{facts['cpu']}, {facts['memory']}, kernel {facts['kernel']}",
            f"- load average (1/5/15 min) at start: {facts['load_start']}",
            f"- dejavu: {facts['versions']['dejavu']}, git {facts['git']}; "
            f"{facts['versions']['dejavu_binary']}",
        ] + [f"- {k}: {v}" for k, v in facts["versions"].items()
             if k not in ("dejavu", "dejavu_binary")] + [
            f"- {reps} runs per variant, interleaved round-robin; median and min of wall "
            "time; ratio = median / median of native (pinned rows: of pinned native); "
            "cpu = median user+sys of the whole process tree, tracer included",
            f"- SET = dejavu's traced calls ({len(TRACED_SET.split(','))} names, "
            "see bench/README.md)",
        ]
        print("\n".join(header), flush=True)
        log(f"tmp dir {tmp}; {reps} reps; workloads {','.join(keys)}")

        report = {"facts": facts, "reps": reps, "quick": args.quick, "pin": args.pin,
                  "traced_set": TRACED_SET.split(","), "workloads": {}}
        for key in keys:
            w = WORKLOADS[key]
            n = w.n_quick if args.quick else w.n_full
            wr = run_workload(w, n, variants, reps, tmp, args.timeout)
            table, data = render(w, wr, reps)
            load = loadavg()
            print("\n" + table + f"\n\nLoad average after {key}: {load}", flush=True)
            report["workloads"][key] = {
                "title": w.title, "n": n, "unit": w.unit, "argv": wr["argv"],
                "reference_stdout": wr["reference"].stdout, "load_after": load,
                "variants": data}

        facts["load_end"] = loadavg()
        print(f"\nLoad average (1/5/15 min) at end: {facts['load_end']} "
              f"(start: {facts['load_start']}; {facts['nproc']} CPUs).")
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
            log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
