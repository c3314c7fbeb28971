#!/usr/bin/env python3
"""stacks.py: what recording call stacks costs, next to dejavu without stacks and its peers.

For the stat-heavy loops (Node.js bench/workloads/stat_loop.js, Python
bench/workloads/stat_loop.py, and C tests/workloads/stacks/stat_site.c built with
`cc -O2 -g`, so its frames are unwound with DWARF CFI), this runs, in one invocation
and interleaved round-robin so that machine noise hits every variant alike:

    at N (default 200,000 calls):
      native                    the workload alone
      dejavu --stacks off       dejavu record --stacks off -o <tmp>.dvt
      dejavu (stacks on)        dejavu record -o <tmp>.dvt (the default: stacks on)
      perf trace dwarf          perf trace --call-graph dwarf -e <dejavu's set> -o <tmp>
    at a small N (default 2,000 calls; strace -k takes minutes at 200,000):
      native, dejavu --stacks off, dejavu (stacks on)
      strace -k                 strace -f -k -o /dev/null

and prints a markdown table per workload (median and min wall time, ratio to native at
the same N, added time per call over native, notes: how many calls got a stack, trace
size, events perf wrote), then the two ratios the Call sites issue sets as goals: stacks
on / stacks off at N (at most 2x) and strace -k / dejavu with stacks at the small N (at
least 20x).

Standard library only; the machinery (timed runs, reference-output checks, machine
facts, the dejavu binary) comes from overhead.py in this directory. Nothing here asserts
on times. Progress goes to stderr, the report to stdout, raw numbers to --json FILE.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead as ov  # noqa: E402  (bench/overhead.py, next to this file)

REPO = ov.REPO
STAT_SITE_C = REPO / "tests" / "workloads" / "stacks" / "stat_site.c"


# --------------------------------------------------------------------------- workloads


@dataclass
class Workload:
    key: str
    title: str
    unit: str
    # setup(dir) -> (argv for n calls, cwd); compiles once, untimed
    setup: Callable[[Path], tuple[Callable[[int], list[str]], Path]]


def setup_js(d: Path):
    target = ov.write_stat_target(d)
    return (lambda n: ["node", str(ov.WORKLOADS_DIR / "stat_loop.js"), str(n), str(target)]), d


def setup_py(d: Path):
    target = ov.write_stat_target(d)
    # The real interpreter, not a pyenv shim (see overhead.py).
    return (lambda n: [sys.executable, str(ov.WORKLOADS_DIR / "stat_loop.py"), str(n),
                       str(target)]), d


def setup_c(d: Path):
    target = ov.write_stat_target(d)
    exe = d / "stat_site"
    # -O2 without -fno-omit-frame-pointer: the program's frames need DWARF CFI.
    subprocess.run(["cc", "-O2", "-g", "-o", str(exe), str(STAT_SITE_C)], check=True)
    return (lambda n: [str(exe), str(target), str(n)]), d


WORKLOADS = {w.key: w for w in [
    Workload("stat_js", "Node.js: fs.statSync of one file, N times", "statSync calls", setup_js),
    Workload("stat_py", "Python: os.stat of one file, N times", "os.stat calls", setup_py),
    Workload("stat_c", "C (-O2 -g): stat(2) of one file from a named function, N times",
             "stat calls", setup_c),
]}


# --------------------------------------------------------------------------- variants


@dataclass
class Variant:
    key: str
    label: str
    size: str  # "full" or "small": which N it runs at
    prefix: Callable[[Path], list[str]]
    kind: str = "tool"
    forwards_exit: bool = True
    collect: Callable[[Path], dict] | None = None
    unavailable: str | None = None


def dejavu_collect(dejavu: Path) -> Callable[[Path], dict]:
    """Trace size, syscall records, and how many of them carry a stack."""
    def collect(run_dir: Path) -> dict:
        trace = run_dir / "t.dvt"
        if not trace.exists():
            return {"error": "no trace file written"}
        size = trace.stat().st_size
        syscalls = with_stack = 0
        last = ""
        p = subprocess.Popen([str(dejavu), "export", "--format", "jsonl", str(trace)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith('{"type":"syscall"'):
                syscalls += 1
                if '"stack":[' in line:
                    with_stack += 1
            last = line
        p.wait()
        trace.unlink()
        try:
            end = json.loads(last) if last else {}
        except json.JSONDecodeError:
            end = {}
        if end.get("type") != "end":
            return {"error": f"trace did not end cleanly: {last.strip()[:200]}", "bytes": size}
        return {"bytes": size, "syscalls": syscalls, "with_stack": with_stack,
                "records": int(end.get("records", 0)), "exit": end.get("exit")}
    return collect


def perf_collect(run_dir: Path) -> dict:
    """Events perf trace wrote (a line "TIME ( DUR ms): COMM/TID call(...)", each followed
    by its call chain, one frame a line) and its LOST reports."""
    out = run_dir / "perf.txt"
    if not out.exists():
        return {"error": "no perf output written"}
    events = frames = lost = 0
    with out.open("rb") as f:
        for line in f:
            if b"LOST" in line:
                lost += 1
            elif b" ms): " in line:
                events += 1
            elif line.strip():
                frames += 1
    out.unlink()
    return {"lines": events, "frames": frames, "lost_reports": lost}


def make_variants(dejavu: Path | None, missing: str | None) -> list[Variant]:
    collect = dejavu_collect(dejavu) if dejavu else None
    out = []
    for size in ("full", "small"):
        out += [
            Variant("native", "native", size, lambda d: [], kind="native"),
            Variant("dejavu-off", "dejavu record --stacks off", size,
                    lambda d: [str(dejavu), "record", "--stacks", "off", "-o",
                               str(d / "t.dvt"), "--"],
                    collect=collect, unavailable=missing),
            Variant("dejavu-on", "dejavu record (stacks on)", size,
                    lambda d: [str(dejavu), "record", "-o", str(d / "t.dvt"), "--"],
                    collect=collect, unavailable=missing),
        ]
    out.append(Variant("perf-dwarf", "perf trace --call-graph dwarf -e SET", "full",
                       lambda d: ["perf", "trace", "--call-graph", "dwarf", "-o",
                                  str(d / "perf.txt"), "-e", ov.TRACED_SET, "--"],
                       forwards_exit=False, collect=perf_collect))
    out.append(Variant("strace-k", "strace -f -k", "small",
                       lambda d: ["strace", "-f", "-k", "-o", "/dev/null"]))
    return out


# --------------------------------------------------------------------------- running


@dataclass
class Result:
    variant: Variant
    status: str = "ok"
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)

    def median(self) -> float | None:
        return statistics.median(self.walls) if self.walls else None


def run_workload(w: Workload, ns: dict[str, int], variants: list[Variant], reps: int,
                 tmp: Path, timeout: float) -> dict:
    wdir = tmp / w.key
    wdir.mkdir()
    argv_for, cwd = w.setup(wdir)
    refs = {}
    for size, n in ns.items():
        # Untimed native run at each N: the reference output, and a warm page cache.
        ref = ov.timed_run(argv_for(n), cwd, timeout)
        if ref.timed_out or ref.rc != 0:
            raise SystemExit(f"{w.key}: native reference run failed: {ref.stderr[:500]}")
        refs[size] = ref
        ov.log(f"== {w.key} N={n}: reference {ref.stdout.strip()!r}, {ref.wall:.2f} s")
    results = {(v.key, v.size): Result(v) for v in variants}
    for v in variants:
        if v.unavailable:
            results[(v.key, v.size)].status = f"n/a ({v.unavailable})"
            continue
        if v.kind == "native":
            continue
        # Is the tool usable here at all? (overhead.py's probe: one run on `true`.)
        pv = ov.Variant(v.key, v.label, v.prefix, forwards_exit=v.forwards_exit)
        reason, _ = ov.probe(pv, wdir, timeout=min(timeout, 120))
        if reason:
            results[(v.key, v.size)].status = f"n/a ({reason})"
            ov.log(f"   {v.key}: n/a ({reason})")
    runnable = [v for v in variants if results[(v.key, v.size)].status == "ok"]
    for rep in range(reps):
        k = rep % len(runnable)
        for v in runnable[k:] + runnable[:k]:
            run_dir = wdir / f"run-{v.key}-{v.size}"
            run_dir.mkdir(exist_ok=True)
            r = ov.timed_run(v.prefix(run_dir) + argv_for(ns[v.size]), cwd, timeout)
            res = results[(v.key, v.size)]
            if not r.timed_out:
                res.walls.append(r.wall)
                res.cpus.append(r.cpu)
            problem = ov.check_run(pv_of(v), r, refs[v.size])
            if problem:
                res.problems.append(f"rep {rep + 1}: {problem}")
            if v.collect:
                res.stats.append(v.collect(run_dir))
            for f in run_dir.iterdir():
                f.unlink()
            ov.log(f"   rep {rep + 1}/{reps} {v.key:<11} N={ns[v.size]:<7} {r.wall:8.3f} s"
                   + (f"  MISMATCH: {problem}" if problem else ""))
    return {"argv": {s: argv_for(n) for s, n in ns.items()}, "refs": refs,
            "results": results, "tmp": tmp}


def pv_of(v: Variant) -> ov.Variant:
    return ov.Variant(v.key, v.label, v.prefix, forwards_exit=v.forwards_exit, kind=v.kind)


# --------------------------------------------------------------------------- report


def notes_for(v: Variant, res: Result, n: int) -> list[str]:
    notes = []
    if res.cpus:
        notes.append(f"cpu {ov.fmt_s(statistics.median(res.cpus))} s")
    ok = [s for s in res.stats if "error" not in s]
    if v.key.startswith("dejavu") and ok:
        ws = sorted({s["with_stack"] for s in ok})
        sc = sorted({s["syscalls"] for s in ok})
        size = statistics.median(s["bytes"] for s in ok)
        notes.append(f"{ov.fmt_int(ws[0])}/{ov.fmt_int(sc[0])} calls with a stack"
                     if len(ws) == 1 and len(sc) == 1 else
                     f"{ov.fmt_int(ws[0])}-{ov.fmt_int(ws[-1])} of "
                     f"{ov.fmt_int(sc[0])}-{ov.fmt_int(sc[-1])} calls with a stack")
        notes.append(f"trace {size / 1024:,.0f} KiB")
    if v.key == "perf-dwarf" and ok:
        notes += ov.stats_note(ov.Variant("perf-trace", "", v.prefix), res.stats)
        per = statistics.median(s["frames"] / s["lines"] for s in ok if s["lines"])
        notes.append(f"{per:.1f} frames per event")
        notes.append("exit code not forwarded; stdout checked")
    errs = [s["error"] for s in res.stats if "error" in s]
    if errs:
        notes.append(f"stats error: {errs[0]}")
    if res.problems:
        notes.append(f"**WORKLOAD BROKEN in {len(res.problems)} run(s)**: "
                     + res.problems[0].replace("|", "/"))
    return notes


def render(w: Workload, wr: dict, ns: dict[str, int]) -> tuple[str, dict]:
    results: dict[tuple[str, str], Result] = wr["results"]
    lines = [
        f"#### {w.key}: {w.title}",
        "",
        f"`{ov.shown_command(wr['argv']['full'], wr['tmp'])}`; small N: "
        f"`{ov.shown_command(wr['argv']['small'], wr['tmp'])}`",
        "",
        "| variant | N | median s | min s | ratio to native (same N) | µs/call over native "
        "| notes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    out = {}
    for size in ("full", "small"):
        base = results[("native", size)].median()
        for (key, sz), res in results.items():
            if sz != size:
                continue
            v, n = res.variant, ns[size]
            if res.status != "ok":
                lines.append(f"| {v.label} | {n:,} | {res.status} | | | | |")
                out[f"{key}@{size}"] = {"status": res.status, "n": n}
                continue
            med = res.median()
            ratio = med / base if med is not None and base else None
            per_call = (med - base) / n * 1e6 if med is not None and base is not None else None
            lines.append(
                f"| {v.label} | {n:,} | {ov.fmt_s(med)} | "
                f"{ov.fmt_s(min(res.walls) if res.walls else None)} | "
                f"{'-' if ratio is None else f'{ratio:.2f}x'} | "
                f"{'-' if per_call is None or v.kind == 'native' else f'{per_call:.1f}'} | "
                f"{'; '.join(notes_for(v, res, n))} |")
            out[f"{key}@{size}"] = {"label": v.label, "n": n, "wall_s": res.walls,
                                    "cpu_s": res.cpus, "median_s": med, "ratio_to_native": ratio,
                                    "us_per_call_over_native": per_call,
                                    "problems": res.problems, "stats": res.stats}

    def med(key: str, size: str) -> float | None:
        r = results.get((key, size))
        return r.median() if r and r.status == "ok" else None

    on, off = med("dejavu-on", "full"), med("dejavu-off", "full")
    son, soff, sk = med("dejavu-on", "small"), med("dejavu-off", "small"), med("strace-k", "small")
    lines.append("")
    goals = {}
    if on and off:
        goals["on_over_off"] = on / off
        lines.append(f"- stacks on / stacks off at N = {ns['full']:,}: "
                     f"**{on / off:.2f}x** (goal: at most 2x)")
    if son and soff:
        goals["on_over_off_small"] = son / soff
        lines.append(f"- stacks on / stacks off at N = {ns['small']:,}: {son / soff:.2f}x")
    if sk and son:
        goals["strace_k_over_on"] = sk / son
        lines.append(f"- strace -f -k / dejavu with stacks at N = {ns['small']:,}: "
                     f"**{sk / son:.1f}x** (goal: at least 20x)")
    out["goals"] = goals
    return "\n".join(lines), out


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="runs of each variant (default 3)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated subset of: %(default)s")
    ap.add_argument("--n", type=int, default=200000, help="calls per run (default 200000)")
    ap.add_argument("--small-n", type=int, default=2000,
                    help="calls per run for the strace -k comparison (default 2000)")
    ap.add_argument("--quick", action="store_true", help="smoke run: N/10, small N/10, 1 rep")
    ap.add_argument("--dejavu", help="dejavu binary (default target/release/dejavu)")
    ap.add_argument("--json", metavar="FILE", help="write machine-readable results here")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run (default 900)")
    args = ap.parse_args()
    keys = [k.strip() for k in args.workloads.split(",") if k.strip()]
    bad = [k for k in keys if k not in WORKLOADS]
    if bad:
        ap.error(f"unknown workload(s) {', '.join(bad)}; choose from {', '.join(WORKLOADS)}")
    reps = 1 if args.quick else args.reps
    ns = {"full": args.n // (10 if args.quick else 1),
          "small": max(1, args.small_n // (10 if args.quick else 1))}

    with tempfile.TemporaryDirectory(prefix="dejavu-stacks-") as tmpname:
        tmp = Path(tmpname)
        dejavu, missing, source = ov.find_dejavu(args.dejavu, tmp)
        facts = ov.machine_facts(dejavu, source)
        variants = make_variants(dejavu, missing)
        header = [
            "## Stacks (bench/stacks.py)",
            "",
            f"Command: `python3 bench/stacks.py {' '.join(sys.argv[1:])}`".rstrip(),
            "",
            f"- date (UTC): {facts['date_utc']}",
            f"- machine: {facts['nproc']} CPUs ({facts['usable_cpus']} usable), "
            f"{facts['cpu']}, {facts['memory']}, kernel {facts['kernel']}",
            f"- load average (1/5/15 min) at start: {facts['load_start']}",
            f"- dejavu: {facts['versions']['dejavu']}, git {facts['git']}; "
            f"{facts['versions']['dejavu_binary']}",
        ] + [f"- {k}: {v}" for k, v in facts["versions"].items()
             if k in ("strace", "perf", "node", "python (workload)", "cc")] + [
            f"- {reps} runs per variant, interleaved round-robin; ratio = median / median of "
            "native at the same N; µs/call = (median - native median) / N",
        ]
        print("\n".join(header), flush=True)
        report = {"facts": facts, "reps": reps, "n": ns, "workloads": {}}
        for key in keys:
            w = WORKLOADS[key]
            wr = run_workload(w, ns, variants, reps, tmp, args.timeout)
            table, data = render(w, wr, ns)
            print("\n" + table + f"\n\nLoad average after {key}: {ov.loadavg()}", flush=True)
            report["workloads"][key] = data
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
            ov.log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
