#!/usr/bin/env python3
"""agent_instructions.py: the Python agent's cost per call, counted in instructions.

Wall times of a 200,000-call loop move by more than an agent change saves on a shared
machine; instructions do not. This runs bench/workloads/stat_loop.py under valgrind's
callgrind (which counts every instruction the process executes) at two loop sizes, plainly
and with the agent loaded and reporting to a pipe this script drains (as agents.py's
"pipe" variant), and prints the instructions per call: the slope between the two sizes,
so start-up (the interpreter's, the agent's import and wrapping) drops out. With --before
REV, the agents of git revision REV too. Nothing here asserts anything.

    python3 bench/agent_instructions.py                 # working tree's agent
    python3 bench/agent_instructions.py --before HEAD~1 # and the agent it replaces

Needs valgrind. Standard library only; agents_at comes from agents.py beside it.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agents as ag  # noqa: E402  (bench/agents.py, next to this file)

WORKLOAD = ag.REPO / "bench" / "workloads" / "stat_loop.py"


def instructions(python: str, n: int, target: Path, agent_dir: Path | None) -> int:
    """Instructions callgrind counts for stat_loop.py N, with the agent from agent_dir."""
    # A fixed hash seed: dict and set probing, and so the count, the same every run.
    env = dict(os.environ, PYTHONHASHSEED="0")
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python,
            str(WORKLOAD), str(n), str(target)]
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.PIPE, text=True, check=False)
    if agent_dir is None:
        p = subprocess.run(argv, env=env, **quiet)
    else:
        env["PYTHONPATH"] = str(agent_dir / "python")
        # A fresh copy of the agent is compiled, and its bytecode written, at its first
        # run: a run not counted does that, else the smaller loop alone pays the compile
        # (~34 million instructions) and the cost per call comes out ~425 too low with
        # the default sizes (as it did before this run was added).
        warm = dict(env)
        with ag.agent_channel(warm):
            subprocess.run([python, str(WORKLOAD), "0", str(target)], env=warm,
                           pass_fds=(ag.AGENT_FD,), **quiet)
        with ag.agent_channel(env) as drained:
            p = subprocess.run(argv, env=env, pass_fds=(ag.AGENT_FD,), **quiet)
        if not drained or drained[0] == 0:
            # An agent that fails to load (a syntax error) costs nothing: say so rather
            # than print a cost of zero.
            raise SystemExit(f"the agent in {agent_dir} sent nothing: it did not load "
                             f"({p.stderr.strip()[-300:]})")
    m = re.search(r"refs:\s+([\d,]+)", p.stderr)
    if p.returncode != 0 or not m:
        raise SystemExit(f"valgrind: exit {p.returncode}: {p.stderr[-400:]}")
    return int(m.group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", metavar="REV", help="also the agents of this git revision")
    ap.add_argument("--small", type=int, default=20000, help="the smaller loop (20000)")
    ap.add_argument("--large", type=int, default=100000, help="the larger loop (100000)")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        target = tmpd / "stat-target.txt"
        target.write_text("x" * 1000)
        variants: list[tuple[str, Path | None]] = [("plain Python", None)]
        variants.append(("agent (working tree)", ag.agents_at(None, tmpd / "now")))
        if a.before:
            variants.append((f"agent ({a.before})", ag.agents_at(a.before, tmpd / "before")))
        print(f"stat_loop.py under callgrind, {a.small:,} and {a.large:,} calls; "
              f"python {a.python}\n")
        print("| variant | instructions per call | over plain Python |")
        print("| --- | ---: | ---: |")
        base = None
        for name, d in variants:
            small = instructions(a.python, a.small, target, d)
            large = instructions(a.python, a.large, target, d)
            per = (large - small) / (a.large - a.small)
            base = per if base is None else base
            over = "" if d is None else f"{per - base:,.0f}"
            print(f"| {name} | {per:,.0f} | {over} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
