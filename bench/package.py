#!/usr/bin/env python3
"""What the packaged dejavu weighs and what it costs to start (docs/install.md).

Sizes of the files scripts/package built (the binary, tarball, wheel, npm packages), the
time `pip install` of the wheel into a fresh venv and `npm install` of the two npm
packages into a fresh project take, and the start-up cost of the binary: `dejavu
--version`, and `dejavu record -- true` under each backend beside native `true`, all in
the same rounds, interleaved (median and min of --reps runs).

    scripts/package
    python3 bench/package.py --reps 20

Prints a Markdown table for bench/RESULTS.md.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "target", "package")


def version():
    with open(os.path.join(ROOT, "Cargo.toml")) as f:
        for line in f:
            if line.startswith("version = "):
                return line.split('"')[1]
    raise SystemExit("no version in Cargo.toml")


def timed(cmd, **kw):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=20, help="runs of each start-up variant (default 20)")
    a = ap.parse_args()
    v = version()
    binary = os.path.join(OUT, "dejavu")
    files = {
        "binary (stripped, glibc 2.28)": binary,
        "tarball": os.path.join(OUT, f"dejavu-{v}-x86_64-linux.tar.gz"),
        "wheel": os.path.join(OUT, f"dejavu_profiler-{v}-py3-none-manylinux_2_28_x86_64.whl"),
        "npm main package": os.path.join(OUT, f"dejavu-profiler-{v}.tgz"),
        "npm platform package": os.path.join(OUT, f"dejavu-profiler-linux-x64-{v}.tgz"),
    }
    for name, p in files.items():
        if not os.path.exists(p):
            raise SystemExit(f"{p} is missing: run scripts/package first")
    print("| file | size |\n| --- | ---: |")
    for name, p in files.items():
        n = os.path.getsize(p)
        print(f"| {name} | {n / 1e6:.2f} MB |" if n >= 100_000 else f"| {name} | {n / 1e3:.1f} kB |")

    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "venv", os.path.join(d, "venv")], check=True)
        pip = os.path.join(d, "venv", "bin", "pip")
        t_pip = timed([pip, "install", "--no-index", "--disable-pip-version-check", files["wheel"]])
        proj = os.path.join(d, "proj")
        os.mkdir(proj)
        subprocess.run(["npm", "init", "-y"], cwd=proj, check=True, stdout=subprocess.DEVNULL)
        t_npm = timed(["npm", "install", "--no-audit", "--no-fund", files["npm platform package"],
                       files["npm main package"]], cwd=proj)
    print(f"\n| install | seconds |\n| --- | ---: |")
    print(f"| `pip install` of the wheel into a fresh venv (no index) | {t_pip:.2f} |")
    print(f"| `npm install` of both npm packages into a fresh project (local files) | {t_npm:.2f} |")

    trace = tempfile.mktemp(suffix=".dvt")
    true = shutil.which("true")
    variants = {
        "native `true`": [true],
        "`dejavu --version`": [binary, "--version"],
        "`dejavu record --backend ptrace -- true`": [binary, "record", "--backend", "ptrace", "-o", trace, "--", true],
        "`dejavu record --backend ebpf -- true`": [binary, "record", "--backend", "ebpf", "-o", trace, "--", true],
        "`dejavu record --backend ebpf --stacks off -- true`": [binary, "record", "--backend", "ebpf", "--stacks", "off", "-o", trace, "--", true],
    }
    times = {k: [] for k in variants}
    for _ in range(a.reps):
        for k, cmd in variants.items():
            times[k].append(timed(cmd))
            if os.path.exists(trace):
                os.unlink(trace)
    print(f"\n| start-up ({a.reps} runs, interleaved) | median ms | min ms |\n| --- | ---: | ---: |")
    for k, ts in times.items():
        print(f"| {k} | {statistics.median(ts) * 1e3:.1f} | {min(ts) * 1e3:.1f} |")
    try:
        load = os.getloadavg()[0]
        print(f"\nload average during the run: {load:.2f} (2 CPUs)")
    except OSError:
        pass


if __name__ == "__main__":
    main()
