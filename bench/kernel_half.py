#!/usr/bin/env python3
"""kernel_half.py: what the eBPF backend's kernel programs cost per system call.

The wall-time ratios of overhead.py move by 0.15-0.3x between runs on a shared VM; the
kernel's own accounting of its BPF programs does not move as much. With
kernel.bpf_stats_enabled = 1 (set here for the run, and put back) the kernel counts, per
program, the times it ran and the nanoseconds it spent (what `bpftool prog show` prints as
run_time_ns / run_cnt; read here from /proc/PID/fdinfo of dejavu's program descriptors,
no bpftool needed). This runs a stat loop (bench/workloads/stat_loop.js or .py, N calls)
under `dejavu record` for each binary given and each configuration (the default, and
--stacks off), interleaved round-robin, and prints per configuration the median
nanoseconds per run of the sys_enter and sys_exit programs and their sum: what each
traced call pays in the programs' bodies. The counting itself adds a few tens of
nanoseconds per run (two clock reads): compare rows, do not read them as absolute.

What it does not measure: the tracepoints' own dispatch (the same for any program), the
language agents (bench/agents.py), dejavu's reader (overhead.py, `dejavu record -v`).

Needs root (the sysctl and the programs). Standard library only.

    cargo build --release -p dejavu
    python3 bench/kernel_half.py --reps 5
    python3 bench/kernel_half.py --before-dejavu /tmp/dejavu-before --reps 5 --workload stat_py
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead as ov  # noqa: E402

STATS = Path("/proc/sys/kernel/bpf_stats_enabled")
TRACING = "26"  # BPF_PROG_TYPE_TRACING: the tp_btf programs


def prog_stats(pid: int) -> dict[int, dict[str, int]]:
    """The tracing programs dejavu `pid` holds, by descriptor: their fdinfo counters."""
    out: dict[int, dict[str, int]] = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return out
    for fd in fds:
        try:
            text = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        kv = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        if kv.get("prog_type", "").strip() != TRACING:
            continue
        try:
            out[int(fd)] = {k: int(kv[k]) for k in ("run_time_ns", "run_cnt", "verified_insns")}
        except (KeyError, ValueError):
            continue
    return out


def one_run(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Runs `argv` (a dejavu record); the ns per run of sys_enter and sys_exit, read from
    the last look at its programs before they were detached."""
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    last: dict[int, dict[str, int]] = {}
    while p.poll() is None:
        s = prog_stats(p.pid)
        # Keep the look with the most runs: the last ones can miss programs being closed.
        if s and sum(v["run_cnt"] for v in s.values()) >= sum(v["run_cnt"] for v in last.values()):
            last = s
        time.sleep(0.02)
    err = p.stderr.read() if p.stderr else ""
    if p.returncode != 0:
        raise SystemExit(f"exit {p.returncode}: {' '.join(argv)}\n{err}")
    # sys_enter and sys_exit run for every system call: the two busiest programs; sys_exit
    # is the larger one (it copies what the call read and wrote).
    busiest = sorted(last.values(), key=lambda v: v["run_cnt"], reverse=True)[:2]
    if len(busiest) < 2 or min(v["run_cnt"] for v in busiest) == 0:
        raise SystemExit(f"no program counts were read for {' '.join(argv)}")
    enter, exit_ = sorted(busiest, key=lambda v: v["verified_insns"])
    return (enter["run_time_ns"] / enter["run_cnt"], exit_["run_time_ns"] / exit_["run_cnt"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dejavu", default=str(ov.REPO / "target" / "release" / "dejavu"))
    ap.add_argument("--before-dejavu", metavar="BINARY", help="also this dejavu binary")
    ap.add_argument("--workload", choices=["stat_js", "stat_py"], default="stat_js")
    ap.add_argument("--n", type=int, default=1000000, help="calls per run (default 1000000)")
    ap.add_argument("--reps", type=int, default=5, help="runs of each row (default 5)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("kernel_half.py needs root (kernel.bpf_stats_enabled, the eBPF backend)")
    if not STATS.exists():
        raise SystemExit(f"{STATS} is missing: this kernel cannot count its BPF programs' time")
    binaries = {"this": args.dejavu}
    if args.before_dejavu:
        binaries["before"] = args.before_dejavu
    saved = STATS.read_text().strip()
    facts = ov.machine_facts(Path(args.dejavu), args.dejavu)
    print(f"- date (UTC): {facts['date_utc']}; {facts['nproc']} CPUs, {facts['cpu']}; "
          f"kernel {os.uname().release}; load at start {facts['load_start']}")
    with tempfile.TemporaryDirectory(prefix="dejavu-kernel-half-") as tmp:
        tmp_p = Path(tmp)
        target = ov.write_stat_target(tmp_p)
        script = "stat_loop.js" if args.workload == "stat_js" else "stat_loop.py"
        prog = ["node" if args.workload == "stat_js" else sys.executable,
                str(ov.WORKLOADS_DIR / script), str(args.n), str(target)]
        rows = [(label, exe, mode) for label, exe in binaries.items()
                for mode in ("default", "--stacks off")]
        got: dict[tuple[str, str], list[tuple[float, float]]] = {(r[0], r[2]): [] for r in rows}
        STATS.write_text("1")
        try:
            for rep in range(args.reps):
                for label, exe, mode in rows:
                    ov.log(f"{label} {mode} run {rep + 1}/{args.reps}")
                    argv = [exe, "record", "--backend", "ebpf", "-o", str(tmp_p / "t.dvt")]
                    if mode != "default":
                        argv += mode.split()
                    got[(label, mode)].append(one_run(argv + ["--"] + prog, tmp_p))
        finally:
            STATS.write_text(saved)
    print(f"- {args.workload}: `{' '.join(Path(a).name if '/' in a else a for a in prog)}`, "
          f"{args.reps} runs per row, interleaved; medians of ns per program run")
    print()
    print("| dejavu | configuration | sys_enter ns | sys_exit ns | both |")
    print("| --- | --- | ---: | ---: | ---: |")
    for label, exe, mode in rows:
        runs = got[(label, mode)]
        e = statistics.median(r[0] for r in runs)
        x = statistics.median(r[1] for r in runs)
        b = statistics.median(r[0] + r[1] for r in runs)
        print(f"| {label} ({exe}) | {mode} | {e:.0f} | {x:.0f} | {b:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
