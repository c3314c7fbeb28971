#!/usr/bin/env python3
"""agents.py: what the language agents cost per call, and how a change to them moves it.

For the stat loops (Node.js bench/workloads/stat_loop.js: fs.statSync of one file N times;
Python bench/workloads/stat_loop.py: os.stat of one file N times; N defaults to 200,000),
and with --workloads stat_js_helper,stat_py_helper the same calls in a helper called from
two lines, a warm-up of 100 calls, then N (bench/workloads/stat_helper.js and .py: the
path's site switches once), with --workloads stat_js_rel,stat_py_rel the stat loops on a
relative path (the file's name, in the working directory), with --workloads
print_py_out,print_py_err N print() calls to a pipe on stdout or stderr
(bench/workloads/print_loop.py), with --workloads console_js_out,console_js_err N
console.log or console.error calls to a pipe (bench/workloads/console_loop.js), this
runs, interleaved round-robin so that machine noise hits every variant alike:

    native                  the workload alone
    pipe                    with the agent loaded and reporting to a pipe this script
                            drains (the agent's own cost in the program, no dejavu)
    ptrace                  dejavu record --backend ptrace (stacks on: the agents report)
    ebpf                    dejavu record --backend ebpf

With --before REV (and --before-dejavu BINARY, a dejavu built at REV), the pipe variant
also runs the agents of git revision REV and the dejavu rows also run that binary, so a
change to the agents is measured against what it replaces in the same run.

It prints a markdown table per workload: median and min wall time, and the time per call
over native ((median - native median) / N). Nothing here asserts on times. Standard
library only; the machinery comes from overhead.py beside it.

    cargo build --release -p dejavu
    python3 bench/agents.py --reps 5
    python3 bench/agents.py --before HEAD~1 --before-dejavu /tmp/dejavu-before --reps 5
    python3 bench/agents.py --before main --no-dejavu --workloads stat_js_helper --reps 5
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead as ov  # noqa: E402  (bench/overhead.py, next to this file)

REPO = ov.REPO
AGENT_FD = 1000
# --workloads: key -> (runtime, script in bench/workloads)
WORKLOADS = {
    "stat_js": ("node", "stat_loop.js"),
    "stat_py": ("python", "stat_loop.py"),
    "stat_js_helper": ("node", "stat_helper.js"),
    "stat_py_helper": ("python", "stat_helper.py"),
    # The stat loops on the file's name alone, relative to the working directory.
    "stat_js_rel": ("node", "stat_loop.js"),
    "stat_py_rel": ("python", "stat_loop.py"),
    # print() per line to a pipe: stdout (block-buffered) and stderr (line-buffered).
    "print_py_out": ("python", "print_loop.py"),
    "print_py_err": ("python", "print_loop.py"),
    # console.log / console.error per line to a pipe (stdout / stderr).
    "console_js_out": ("node", "console_loop.js"),
    "console_js_err": ("node", "console_loop.js"),
}


@dataclass
class Variant:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # "node" or "python": run with the agent reporting to a pipe of ours
    pipe: bool = False
    walls: list[float] = field(default_factory=list)


def agents_at(rev: str | None, dest: Path) -> Path:
    """The agents' files (node/, python/) of the working tree, or of git revision `rev`."""
    files = ["agents/node/dejavu-agent.js", "agents/python/sitecustomize.py",
             "agents/python/_dejavu_agent.py"]
    # The loader's part beside the zip (since 2026-11-28; older revisions have none).
    optional = ["agents/python/_dejavu_site.py"]
    for f in files + optional:
        out = dest / f
        out.parent.mkdir(parents=True, exist_ok=True)
        if rev is None:
            if f in optional and not (REPO / f).exists():
                continue
            out.write_bytes((REPO / f).read_bytes())
        else:
            got = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{f}"],
                                 check=f not in optional, capture_output=True)
            if got.returncode != 0:
                continue
            out.write_bytes(got.stdout)
    return dest / "agents"


@contextlib.contextmanager
def agent_channel(env: dict[str, str]) -> Iterator[list[int]]:
    """A channel for an agent, as dejavu gives one: a pipe whose write end is AGENT_FD
    (non-blocking: a full pipe drops, never waits), named in `env` (DEJAVU_AGENT_FD), read
    by a thread here. Yields a list that holds the bytes the agent sent once the block
    ends; whatever AGENT_FD was before is put back. (agent_instructions.py uses it too.)"""
    r, w = os.pipe2(os.O_CLOEXEC)
    os.set_blocking(w, False)
    saved = os.dup(AGENT_FD) if _is_open(AGENT_FD) else None
    os.dup2(w, AGENT_FD, inheritable=True)
    os.close(w)
    env["DEJAVU_AGENT_FD"] = f"{AGENT_FD}:{os.fstat(AGENT_FD).st_ino}"
    got: list[int] = []

    def drain() -> None:
        n = 0
        while True:
            b = os.read(r, 1 << 16)
            if not b:
                break
            n += len(b)
        got.append(n)

    t = threading.Thread(target=drain)
    t.start()
    try:
        yield got
    finally:
        os.close(AGENT_FD)
        if saved is not None:
            os.dup2(saved, AGENT_FD)
            os.close(saved)
        t.join()
        os.close(r)


def run_with_pipe(v: Variant, cwd: Path) -> float:
    """Runs `v` with DEJAVU_AGENT_FD naming a pipe at AGENT_FD that a thread drains."""
    env = dict(os.environ, **v.env)
    with agent_channel(env) as got:
        t0 = time.perf_counter()
        # stdout and stderr as the other variants have them (overhead.timed_run): pipes
        # read to their end, so a program that prints writes to a pipe in every variant.
        p = subprocess.run(v.argv, cwd=cwd, env=env, pass_fds=(AGENT_FD,),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
    if p.returncode != 0 or not got or got[0] == 0:
        raise SystemExit(f"{v.name}: exit {p.returncode}, {got} bytes reported")
    return wall


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200000, help="calls per run (default 200000)")
    ap.add_argument("--reps", type=int, default=5, help="runs of each variant (default 5)")
    ap.add_argument("--dejavu", default=str(REPO / "target" / "release" / "dejavu"))
    ap.add_argument("--before", metavar="REV", help="also the agents of this git revision")
    ap.add_argument("--before-dejavu", metavar="BINARY",
                    help="also this dejavu binary (built at --before)")
    ap.add_argument("--workloads", default="stat_js,stat_py",
                    help=f"comma-separated, of {', '.join(WORKLOADS)} (default stat_js,stat_py)")
    ap.add_argument("--no-dejavu", action="store_true",
                    help="only native and pipe: the agents alone, no dejavu record rows")
    args = ap.parse_args()
    for key in args.workloads.split(","):
        if key not in WORKLOADS:
            ap.error(f"unknown workload {key!r} (known: {', '.join(WORKLOADS)})")

    facts = ov.machine_facts(Path(args.dejavu), args.dejavu)
    with tempfile.TemporaryDirectory(prefix="dejavu-agents-bench-") as tmp:
        tmp = Path(tmp)
        target = ov.write_stat_target(tmp)
        trees = {"after": agents_at(None, tmp / "after")}
        binaries = {} if args.no_dejavu else {"after": args.dejavu}
        if args.before:
            trees["before"] = agents_at(args.before, tmp / "before")
        if args.before_dejavu and not args.no_dejavu:
            binaries["before"] = args.before_dejavu
        print(f"- date (UTC): {facts['date_utc']}; {facts['nproc']} CPUs, {facts['cpu']}; "
              f"load at start {facts['load_start']}")
        print(f"- node {facts['versions']['node']}, python {facts['versions']['python (workload)']}")
        print(f"- N = {args.n}, {args.reps} runs per variant, interleaved; after = the working "
              f"tree's agents" + ("" if args.no_dejavu else f" and {args.dejavu}")
              + (f"; before = {args.before}'s agents" if args.before else "")
              + (f" and {args.before_dejavu}" if args.before and "before" in binaries else ""))
        for key in args.workloads.split(","):
            runtime, script = WORKLOADS[key]
            # Python: the real interpreter, not a pyenv shim (see overhead.py).
            # (Every run's working directory is the target's.)
            file = target.name if key.endswith("_rel") else str(target)
            if key.startswith(("print_", "console_")):
                file = key.rsplit("_", 1)[1]  # the stream
            prog = ["node" if runtime == "node" else sys.executable,
                    str(ov.WORKLOADS_DIR / script), str(args.n), file]
            variants = [Variant("native", prog)]
            for label, tree in trees.items():
                env = ({"NODE_OPTIONS": f"--require {tree / 'node' / 'dejavu-agent.js'}"}
                       if runtime == "node" else {"PYTHONPATH": str(tree / "python")})
                variants.append(Variant(f"pipe ({label})", prog, env, pipe=True))
            for label, exe in binaries.items():
                for backend in ["ptrace", "ebpf"]:
                    variants.append(Variant(
                        f"dejavu record --backend {backend} ({label})",
                        [exe, "record", "--backend", backend, "-o", str(tmp / "t.dvt"), "--"]
                        + prog))
            for rep in range(args.reps):
                for v in variants:
                    ov.log(f"{key} {v.name} run {rep + 1}/{args.reps}")
                    if v.pipe:
                        v.walls.append(run_with_pipe(v, tmp))
                    else:
                        r = ov.timed_run(v.argv, tmp, 900)
                        if r.rc != 0:
                            raise SystemExit(f"{v.name}: exit {r.rc}\n{r.stderr}")
                        v.walls.append(r.wall)
            base = statistics.median(variants[0].walls)
            print(f"\n#### {key}: `{' '.join(Path(a).name if '/' in a else a for a in prog)}`\n")
            print("| variant | median s | min s | µs/call over native |")
            print("| --- | ---: | ---: | ---: |")
            for v in variants:
                med = statistics.median(v.walls)
                per = "" if v is variants[0] else f"{(med - base) / args.n * 1e6:.2f}"
                print(f"| {v.name} | {med:.2f} | {min(v.walls):.2f} | {per} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
