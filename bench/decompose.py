#!/usr/bin/env python3
"""decompose.py: what the default recording of a stat loop costs, taken apart.

Runs bench/workloads/stat_loop.py (or, with --workload stat_js, stat_loop.js under Node.js)
N times over (default 1,000,000 calls, so that start-up
weighs little) in five configurations, interleaved round-robin, and prints each one's
minimum and median wall time and its cost per call over native:

    native                  the loop alone
    agent                   the language agent loaded and reporting to a pipe this script
                            drains (as bench/agents.py's "pipe" variant), no dejavu
    off                     dejavu record --stacks off (the kernel half, no agent)
    off+agent               dejavu record --stacks off, with the agent loaded on a pipe of
                            its own (both costs, without dejavu reading the agent)
    default                 dejavu record (stacks on: the kernel half, the agent, stacks)

If off+agent is about native + (agent - native) + (off - native), the two halves add up
and the default costs what its parts do. Nothing here asserts anything.

    python3 bench/decompose.py                       # target/release/dejavu
    python3 bench/decompose.py --dejavu BIN --n 200000 --reps 7
    python3 bench/decompose.py --workload stat_js --n 200000 --reps 7

Standard library only; agent_channel comes from agents.py beside it.
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
import agents as ag  # noqa: E402  (bench/agents.py, next to this file)

WORKLOADS = ag.REPO / "bench" / "workloads"
NODE_AGENT = ag.REPO / "agents" / "node" / "dejavu-agent.js"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dejavu", default=str(ag.REPO / "target" / "release" / "dejavu"))
    ap.add_argument("--n", type=int, default=1_000_000, help="calls per run")
    ap.add_argument("--reps", type=int, default=5, help="runs of each configuration")
    ap.add_argument("--python", default=os.path.realpath(sys.executable),
                    help="the interpreter (the real one, not a pyenv shim)")
    ap.add_argument("--workload", choices=("stat_py", "stat_js"), default="stat_py",
                    help="Python's os.stat loop (default) or Node.js's fs.statSync loop")
    a = ap.parse_args()
    if not Path(a.dejavu).exists():
        raise SystemExit(f"no dejavu at {a.dejavu}: cargo build --release, or --dejavu BIN")
    base = dict(os.environ)
    base.pop("PYTHONPATH", None)
    base.pop("NODE_OPTIONS", None)
    agent_dir = str(ag.REPO / "agents" / "python")
    js = a.workload == "stat_js"
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "stat-target.txt"
        target.write_text("x" * 1000)
        trace = Path(tmp) / "t.dvt"
        if js:
            loop = ["node", str(WORKLOADS / "stat_loop.js"), str(a.n), str(target)]
        else:
            loop = [a.python, str(WORKLOADS / "stat_loop.py"), str(a.n), str(target)]
        record = [a.dejavu, "record", "-o", str(trace)]

        def run(cmd: list[str], env: dict[str, str], fds: tuple[int, ...] = ()) -> float:
            start = time.perf_counter()
            p = subprocess.run(cmd, env=env, pass_fds=fds, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            took = time.perf_counter() - start
            if p.returncode != 0:
                raise SystemExit(f"{cmd}: exit {p.returncode}: {p.stderr[-400:]}")
            return took

        def with_agent(cmd: list[str]) -> float:
            if js:
                env = dict(base, NODE_OPTIONS=f"--require {NODE_AGENT}")
            else:
                env = dict(base, PYTHONPATH=agent_dir)
            with ag.agent_channel(env) as drained:
                took = run(cmd, env, (ag.AGENT_FD,))
            if not drained or drained[0] == 0:
                raise SystemExit("the agent sent nothing: it did not load")
            return took

        runs: dict[str, list[float]] = {k: [] for k in
                                        ("native", "agent", "off", "off+agent", "default")}
        for _ in range(a.reps):
            runs["native"].append(run(loop, base))
            runs["agent"].append(with_agent(loop))
            runs["off"].append(run(record + ["--stacks", "off", "--"] + loop, base))
            runs["off+agent"].append(with_agent(record + ["--stacks", "off", "--"] + loop))
            runs["default"].append(run(record + ["--"] + loop, base))
    native = min(runs["native"])
    what = "stat_loop.js (node)" if js else f"stat_loop.py ({a.python})"
    print(f"{what}: {a.n:,} calls, {a.reps} runs each, interleaved\n")
    print("| configuration | min s | median s | us/call over native (min) |")
    print("| --- | ---: | ---: | ---: |")
    for name, t in runs.items():
        over = "" if name == "native" else f"{(min(t) - native) / a.n * 1e6:+.3f}"
        print(f"| {name} | {min(t):.3f} | {statistics.median(t):.3f} | {over} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
