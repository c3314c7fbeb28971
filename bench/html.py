"""html.py: the HTML report of a 1M-event trace: its size, how long `dejavu report
--format html` takes to write it, and how long headless Chromium takes to draw it.

Two traces: a real recording (Python's os.stat of one file N times, with stacks, under the
default backend) and detectbench's synthetic mix (stat loops, open/read/close cycles,
payload writes, 200,000 distinct paths in 4 processes, no stacks). For each, the page is
loaded RUNS times by `chromium --headless --dump-dom` with a fresh profile; the page
records in <html data-render-ms> the milliseconds from the start of navigation to the end
of its script (flame graph and timeline drawn), which is the render time reported. The
wall time of the whole Chromium run, and that of a blank page beside it, are printed
too: most of a headless run is the browser starting.

Times are measured, never asserted (bench/README.md).

usage: python3 bench/html.py [--dejavu BIN] [--events N] [--runs R] [--out DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed: {p.stderr.decode(errors='replace')[-2000:]}")
    return p, time.perf_counter() - t


def chromium(url, out):
    with tempfile.TemporaryDirectory(dir=out) as profile:
        p, wall = run([
            "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", url,
        ])
    dom = p.stdout.decode(errors="replace")
    m = re.search(r'data-render-ms="(\d+)"', dom)
    return (int(m.group(1)) if m else None), wall, dom


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dejavu", default=os.path.join(ROOT, "target/release/dejavu"))
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "dejavu-html-bench"))
    a = ap.parse_args()
    if not shutil.which("chromium"):
        sys.exit("chromium is not installed (scripts/setup installs it)")
    os.makedirs(a.out, exist_ok=True)

    traces = []
    real = os.path.join(a.out, "stat_py.dvt")
    if not os.path.exists(real):
        run([a.dejavu, "record", "-o", real, "--", "python3",
             os.path.join(ROOT, "bench/workloads/stat_loop.py"), str(a.events)])
    traces.append(("stat_py (os.stat x %s, recorded, stacks)" % f"{a.events:,}", real))
    mixed = os.path.join(a.out, "mixed.dvt")
    if not os.path.exists(mixed):
        run(["cargo", "build", "--release", "--locked", "-q", "-p", "dejavu-detect",
             "--example", "detectbench"], cwd=ROOT)
        run([os.path.join(ROOT, "target/release/examples/detectbench"), "-n", str(a.events),
             "--keep", mixed, "--runs", "1"])
    traces.append(("mixed (detectbench -n %s, synthetic, no stacks)" % f"{a.events:,}", mixed))

    blank = os.path.join(a.out, "blank.html")
    with open(blank, "w") as f:
        f.write("<!doctype html><title>blank</title><p>blank</p>")
    blank_walls = [chromium("file://" + blank, a.out)[1] for _ in range(a.runs)]

    print(f"chromium: {subprocess.run(['chromium', '--version'], capture_output=True, text=True).stdout.strip()}")
    print(f"blank page, whole headless run: best {min(blank_walls):.2f} s of {a.runs}\n")
    print("| trace | events | HTML size | `report --format html` (wall) | render in Chromium (data-render-ms, best / median of %d) | whole headless run (best) |" % a.runs)
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, trace in traces:
        summ, _ = run([a.dejavu, "summary", "--json", trace])
        import json
        events = sum(s["calls"] for s in json.loads(summ.stdout)["syscalls"].values())
        html = os.path.join(a.out, os.path.basename(trace) + ".html")
        _, write = run([a.dejavu, "report", "--format", "html", "-o", html, trace])
        size = os.path.getsize(html)
        renders, walls = [], []
        for _ in range(a.runs):
            ms, wall, dom = chromium("file://" + html, a.out)
            if ms is None:
                sys.exit(f"{html}: the page did not finish drawing (no data-render-ms)")
            renders.append(ms)
            walls.append(wall)
        renders.sort()
        print(f"| {name} | {events:,} | {size / 1024:,.0f} KiB | {write:.2f} s | "
              f"{renders[0]} ms / {renders[len(renders) // 2]} ms | {min(walls):.2f} s |")


if __name__ == "__main__":
    main()
