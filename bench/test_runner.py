#!/usr/bin/env python3
"""test_runner.py: what the default configuration costs on real Node.js tools.

The stat loops of overhead.py are the case the agents are built for (a program calling fs
itself, one line, one path). Real tools are the other end: jest 29 reads each module
again for every test file, from deep in its own code, with no frame of the program's on
the stack for most calls (each call is captured 40 frames deep and most stacks are new);
npm ci makes thousands of asynchronous calls on paths of their own. This sets them up
under --workdir (npm; `jest`: jest 29 and 12 small test files; `npm-ci`: a project of
express, lodash and chalk with its lockfile, installed again from npm's cache) and
runs, interleaved round-robin so that machine noise hits every variant alike:

    native                      the tool alone
    pipe (LABEL)                the tool with the agent of LABEL loaded, reporting to a pipe
                                this script drains (the agent's own cost, no dejavu)
    dejavu record (LABEL)       the default configuration (eBPF as root, stacks on)
    dejavu record --stacks off  (the --dejavu binary)

LABEL is `after` (the working tree's agent, --dejavu) and, with --before REV and
--before-dejavu BINARY, `before`. It prints a markdown table: median and min wall time,
the ratio to native, and for the dejavu rows dejavu's own CPU time (its `-v` line, every
thread of dejavu, none of the program's). Nothing here asserts on times.

    cargo build --release -p dejavu
    python3 bench/test_runner.py --reps 5
    python3 bench/test_runner.py --reps 5 --before HEAD~3 --before-dejavu /tmp/dejavu-before
    python3 bench/test_runner.py --workloads npm-ci --reps 3

Standard library only; npm must reach its registry (the first run installs).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agents as ag  # noqa: E402  (bench/agents.py, next to this file)
import overhead as ov  # noqa: E402

JEST = "jest@29.7.0"
TESTS = 12


def npm_env(work: Path) -> dict[str, str]:
    return {"npm_config_cache": str(work / "npm-cache"), "npm_config_update_notifier": "false",
            "npm_config_audit": "false", "npm_config_fund": "false"}


def setup_npm_ci(work: Path) -> tuple[list[str], Path, dict[str, str]]:
    """A project with a lockfile under work/npm-ci, its packages in npm's cache (the first
    run installs from the registry); the command then installs it again, offline."""
    proj = work / "npm-ci"
    proj.mkdir(parents=True, exist_ok=True)
    env = npm_env(work)
    if not (proj / "package-lock.json").exists():
        (proj / "package.json").write_text(
            '{"name": "npm-ci-bench", "version": "1.0.0", "private": true, "dependencies": '
            '{"express": "^4.21.0", "lodash": "^4.17.21", "chalk": "^5.3.0"}}\n')
        subprocess.run(["npm", "install", "--silent"], cwd=proj, check=True,
                       env={**os.environ, **env})
    return ["npm", "ci", "--silent", "--prefer-offline"], proj, env


def setup_jest(work: Path) -> tuple[list[str], Path, dict[str, str]]:
    proj = setup(work)
    return (["node", str(work / "node_modules" / "jest" / "bin" / "jest.js"), "--rootDir", "."],
            proj, {})


def setup(work: Path) -> Path:
    """jest installed in `work`, and a project of TESTS test files under work/proj."""
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "node_modules" / "jest" / "package.json").exists():
        (work / "package.json").write_text('{"name": "jest-bench", "version": "1.0.0"}\n')
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", JEST],
                       cwd=work, check=True)
    proj = work / "proj"
    src = proj / "src"
    src.mkdir(parents=True, exist_ok=True)
    (proj / "package.json").write_text('{"name": "proj", "version": "1.0.0"}\n')
    for i in range(1, TESTS + 1):
        (src / f"m{i}.js").write_text("const add = (a, b) => a + b;\nmodule.exports = { add };\n")
        (src / f"m{i}.test.js").write_text(
            f"const {{ add }} = require('./m{i}');\n"
            f"test('t{i}', () => {{ expect(add(1, {i})).toBe({1 + i}); }});\n"
            f"test('u{i}', () => {{ console.log('hello {i}'); expect(1).toBe(1); }});\n")
    return proj


WORKLOADS = {"jest": setup_jest, "npm-ci": setup_npm_ci}


def timed_run(argv: list[str], cwd: Path, env: dict[str, str]) -> ov.RunResult:
    """overhead.py's timed run, with `env` added to the environment."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return ov.timed_run(argv, cwd, 900)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def own_cpu(stderr: str) -> float | None:
    m = re.search(r"its own CPU time: ([\d.]+) s user, ([\d.]+) s system", stderr)
    return float(m.group(1)) + float(m.group(2)) if m else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="runs of each variant (default 5)")
    ap.add_argument("--dejavu", default=str(ov.REPO / "target" / "release" / "dejavu"))
    ap.add_argument("--before", metavar="REV", help="also the agent of this git revision")
    ap.add_argument("--before-dejavu", metavar="BINARY",
                    help="also this dejavu binary (built at --before)")
    ap.add_argument("--workdir", default="/tmp/dejavu-jest", help="where the tools are set up")
    ap.add_argument("--workloads", default="jest",
                    help=f"comma-separated, of {', '.join(WORKLOADS)} (default jest)")
    args = ap.parse_args()
    for key in args.workloads.split(","):
        if key not in WORKLOADS:
            ap.error(f"unknown workload {key!r} (known: {', '.join(WORKLOADS)})")

    work = Path(args.workdir)
    facts = ov.machine_facts(Path(args.dejavu), args.dejavu)
    print(f"- date (UTC): {facts['date_utc']}; {facts['nproc']} CPUs, {facts['cpu']}; "
          f"load at start {facts['load_start']}")
    print(f"- node {facts['versions']['node']}; {args.reps} runs per variant, interleaved; "
          f"after = the working tree's agent and {args.dejavu}"
          + (f"; before = {args.before}'s agent" if args.before else "")
          + (f" and {args.before_dejavu}" if args.before and args.before_dejavu else ""))
    trees = {"after": ag.agents_at(None, work / "agents-after")}
    binaries = {"after": args.dejavu}
    if args.before:
        trees["before"] = ag.agents_at(args.before, work / "agents-before")
        if args.before_dejavu:
            binaries["before"] = args.before_dejavu
    for key in args.workloads.split(","):
        cmd, proj, env = WORKLOADS[key](work)
        variants = [ag.Variant("native", cmd, dict(env))]
        for label, tree in trees.items():
            variants.append(ag.Variant(
                f"pipe ({label})", cmd,
                {**env, "NODE_OPTIONS": f"--require {tree / 'node' / 'dejavu-agent.js'}"},
                pipe=True))
        trace = str(work / "t.dvt")
        for label, exe in binaries.items():
            variants.append(ag.Variant(f"dejavu record ({label})",
                                       [exe, "record", "-v", "-o", trace, "--"] + cmd, dict(env)))
        variants.append(ag.Variant("dejavu record --stacks off",
                                   [args.dejavu, "record", "-v", "--stacks", "off", "-o", trace,
                                    "--"] + cmd, dict(env)))
        cpus: dict[str, list[float]] = {v.name: [] for v in variants}
        for rep in range(args.reps):
            for v in variants:
                ov.log(f"{key} {v.name} run {rep + 1}/{args.reps}")
                if v.pipe:
                    v.walls.append(ag.run_with_pipe(v, proj))
                    continue
                r = timed_run(v.argv, proj, v.env)
                if r.rc != 0:
                    raise SystemExit(f"{v.name}: exit {r.rc}\n{r.stderr}")
                v.walls.append(r.wall)
                c = own_cpu(r.stderr)
                if c is not None:
                    cpus[v.name].append(c)
        base = statistics.median(variants[0].walls)
        print(f"\n#### {key}: `{' '.join(Path(a).name if '/' in a else a for a in cmd)}`\n")
        print("| variant | median s | min s | ratio to native | dejavu's own CPU s |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for v in variants:
            med = statistics.median(v.walls)
            cpu = f"{statistics.median(cpus[v.name]):.3f}" if cpus[v.name] else ""
            print(f"| {v.name} | {med:.3f} | {min(v.walls):.3f} | {med / base:.2f}x | {cpu} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
