#!/usr/bin/env python3
"""real_programs.py: run dejavu on real tools and tabulate what it reports.

Issue 9 asks, for real programs, how many findings dejavu reports, where the first
finding in the program's own code ranks, and what the top five are. This script sets up
about twenty real workloads (git, npm, tsc, eslint, mocha, pytest, pip, ruff, black,
make, cargo, go, sqlite3, rsync, tar, and three servers: Flask, Express, http.server),
records each one with

    DEJAVU run --keep-trace OUT/NAME.dvt --json -o OUT/NAME.json [--backend B] -- CMD
    DEJAVU report --color never OUT/NAME.dvt > OUT/NAME.txt

and writes a markdown summary (OUT/summary.md, also printed) plus the raw numbers
(OUT/summary.json). Every number in the summary comes from dejavu's JSON report; nothing
is hard-coded. The summary lists, per workload: processes, syscalls, redundant calls,
finding_count, hidden, lost events, the rank of the first finding whose `owner` is `own`
(`-` while findings carry no `owner` field), how many findings have a catch-all path
pattern (`/**/*`, or a `**` after fewer than two literal leading components), the
executables the first process actually exec'd (e.g. the pyenv shim chain behind
`python3`), and one line per top-5 finding.

Setup is idempotent: everything lives under --workdir (default /tmp/dejavu-real), each
workload's setup leaves a marker when it is complete, and only the package registries
are used (apt, PyPI through a venv, npm, crates.io, the Go module proxy). A workload
whose setup fails is skipped with one line; the run goes on.

Before the recorded run, each workload runs once natively (same command, same pre-step)
to check that it works (exit status 0) and to warm the page cache; its wall time is in
the table next to the recorded one. `--skip-native` leaves that out.

Servers (flask, express, http-server) bind 127.0.0.1 on a free port; the requests come
from this script (not recorded); then SIGINT goes to the dejavu process (SIGTERM, then
SIGKILL, if it does not exit), and the table says how it stopped.

Usage:
    python3 bench/real_programs.py --dejavu PATH --out DIR [--backend auto|ebpf|ptrace]
        [--only NAME,...] [--workdir DIR] [--skip-native] [--timeout S] [--list]

Standard library only (Python 3.11). Progress goes to stderr. Needs root for apt (and
for the eBPF backend).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

SETUP_VERSION = "1"  # bump to force every workload's setup to run again
DJANGO_VERSIONS = ["4.2"] + [f"4.2.{i}" for i in range(1, 21) if i != 12]  # 4.2.12 was never released
TOP = 5


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class SetupError(Exception):
    pass


# --------------------------------------------------------------------------- helpers


class Ctx:
    """Where things go, and the log every setup command writes to."""

    def __init__(self, workdir: Path, out: Path):
        self.work = workdir
        self.out = out
        self.setup_log = out / "setup.log"
        self.python3 = shutil.which("python3") or "python3"
        self.memo: dict[str, tuple[bool, object]] = {}

    def sh(self, argv: list[str] | str, cwd: Path | None = None, env: dict | None = None,
           timeout: float = 1800, stdin_path: Path | None = None) -> str:
        """Run a setup command; its output goes to setup.log. Raise SetupError on failure."""
        shell = isinstance(argv, str)
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        with open(self.setup_log, "a") as lf:
            lf.write(f"\n$ (cd {cwd or os.getcwd()}) {argv if shell else shlex.join(argv)}\n")
            lf.flush()
            try:
                stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
                p = subprocess.run(argv, cwd=cwd, env=full_env, shell=shell, stdin=stdin,
                                   capture_output=True, text=True, timeout=timeout,
                                   errors="replace")
            except (OSError, subprocess.SubprocessError) as e:
                raise SetupError(f"{argv if shell else argv[0]}: {e}") from e
            lf.write(p.stdout[-20000:])
            lf.write(p.stderr[-20000:])
        if p.returncode != 0:
            tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["no output"]
            cmd = argv if shell else shlex.join(argv)
            raise SetupError(f"`{cmd[:120]}` exited {p.returncode}: {tail[0][:200]}")
        return p.stdout

    def done(self, d: Path) -> bool:
        m = d / ".dejavu-setup-ok"
        return m.exists() and m.read_text().strip() == SETUP_VERSION

    def mark(self, d: Path) -> None:
        (d / ".dejavu-setup-ok").write_text(SETUP_VERSION + "\n")

    def fresh(self, d: Path) -> Path:
        """An empty directory d (a half-finished earlier setup is removed)."""
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d


def shared(fn: Callable[[Ctx], object]) -> Callable[[Ctx], object]:
    """A setup several workloads use runs (or fails) once per invocation."""
    def go(ctx: Ctx):
        key = fn.__name__
        if key not in ctx.memo:
            try:
                ctx.memo[key] = (True, fn(ctx))
            except SetupError as e:
                ctx.memo[key] = (False, e)
        ok, value = ctx.memo[key]
        if not ok:
            raise value
        return value
    go.__name__ = fn.__name__
    return go


def need_cmd(ctx: Ctx, cmd: str, apt_pkg: str | None = None) -> None:
    """Make sure `cmd` is on PATH, installing the Debian package when it is not."""
    if shutil.which(cmd):
        return
    if not apt_pkg:
        raise SetupError(f"{cmd} is not installed")
    marker = ctx.work / ".apt-updated"
    if not marker.exists():
        ctx.sh(["apt-get", "update", "-q"], timeout=900)
        marker.touch()
    ctx.sh(["apt-get", "install", "-y", "-q", apt_pkg], timeout=900,
           env={"DEBIAN_FRONTEND": "noninteractive"})
    if not shutil.which(cmd):
        raise SetupError(f"apt installed {apt_pkg} but {cmd} is still not on PATH")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def small_tree(root: Path, files: int, dirs: int) -> None:
    """`files` small text files (100 B .. 2 KiB, deterministic) spread over `dirs` dirs."""
    for i in range(files):
        d = root / f"dir{i % dirs:02d}"
        d.mkdir(parents=True, exist_ok=True)
        size = 100 + (i * 7919) % 1948
        line = f"file {i}: the quick brown fox jumps over the lazy dog {i * 31 % 97}\n"
        (d / f"f{i:04d}.txt").write_text((line * (size // len(line) + 1))[:size])


def undo_pyenv_exec() -> list[str]:
    """When this script runs through a pyenv shim, `pyenv exec` has put the interpreter's
    own bin directory (and pyenv's libexec and plugin dirs) in front of PATH and set
    PYENV_VERSION: every `python3` a workload starts would then skip the shim a user's
    shell goes through. Undo that, so commands run as a user would type them. Returns what
    was removed."""
    root = os.environ.get("PYENV_ROOT")
    if not root or "PYENV_VERSION" not in os.environ or "PYENV_DIR" not in os.environ:
        return []
    entries = os.environ.get("PATH", "").split(":")
    removed = []
    while entries and entries[0].startswith(root.rstrip("/") + "/") \
            and not entries[0].rstrip("/").endswith("/shims") and entries[0].rstrip("/") != root + "/bin":
        removed.append(entries.pop(0))
    if not removed:
        return []
    os.environ["PATH"] = ":".join(entries)
    for var in ("PYENV_VERSION", "PYENV_DIR", "PYENV_HOOK_PATH", "_PYENV_INSTALL_PREFIX"):
        if os.environ.pop(var, None) is not None:
            removed.append(var)
    return removed


def venv_env(venv: Path) -> dict[str, str]:
    """The environment of an activated venv (what `source venv/bin/activate` sets)."""
    return {"PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}


# --------------------------------------------------------------------------- shared setups


@shared
def py_tools(ctx: Ctx) -> Path:
    """A venv with pytest, ruff, black and flask (made with the `python3` on PATH)."""
    d = ctx.work / "py-tools"
    venv = d / "venv"
    if not ctx.done(d):
        ctx.fresh(d)
        ctx.sh([ctx.python3, "-m", "venv", str(venv)])
        ctx.sh([str(venv / "bin" / "pip"), "install", "-q", "pytest", "ruff", "black", "flask"],
               timeout=1800)
        ctx.mark(d)
    return venv


@shared
def django_wheels(ctx: Ctx) -> list[Path]:
    """Django 4.2.x wheels from PyPI: the history of the git repository and the Python tree."""
    d = ctx.work / "django-wheels"
    if not ctx.done(d):
        ctx.fresh(d)
        pip = py_tools(ctx) / "bin" / "pip"
        for v in DJANGO_VERSIONS:  # one version per call: pip resolves its arguments together
            ctx.sh([str(pip), "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(d),
                    f"django=={v}"], timeout=900)
        ctx.mark(d)
    wheels = []
    for v in DJANGO_VERSIONS:
        w = list(d.glob(f"Django-{v}-*.whl")) or list(d.glob(f"django-{v}-*.whl"))
        if not w:
            raise SetupError(f"the Django {v} wheel is missing from {d}")
        wheels.append(w[0])
    return wheels


def extract_package(wheel: Path, dest: Path, top: str = "django") -> None:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(top + "/") and not name.endswith("/"):
                z.extract(name, dest)


GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}


@shared
def git_repo(ctx: Ctx) -> Path:
    """A git repository whose commits are Django 4.2 .. 4.2.20, one release each, packed
    as a clone would be, with two edited files and one untracked file in the work tree."""
    d = ctx.work / "git"
    repo = d / "django"
    if not ctx.done(d):
        wheels = django_wheels(ctx)
        ctx.fresh(d)
        repo.mkdir()
        ctx.sh(["git", "init", "-q", "-b", "main", str(repo)])
        for n, (v, w) in enumerate(zip(DJANGO_VERSIONS, wheels)):
            for child in repo.iterdir():
                if child.name != ".git":
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
            extract_package(w, repo)
            date = f"2023-{1 + n // 2:02d}-{1 + (n % 2) * 14:02d}T12:00:00"
            env = dict(GIT_ENV, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
            ctx.sh(["git", "add", "-A"], cwd=repo, env=env)
            ctx.sh(["git", "commit", "-q", "-m", f"Django {v}"], cwd=repo, env=env)
        ctx.sh(["git", "gc", "-q"], cwd=repo)
        with open(repo / "django" / "utils" / "text.py", "a") as f:
            f.write("\n# local edit\n")
        with open(repo / "django" / "db" / "models" / "query.py", "a") as f:
            f.write("\n# another local edit\n")
        write(repo / "NOTES.txt", "untracked notes\n")
        ctx.mark(d)
    return repo


def npm_project(ctx: Ctx, d: Path, package_json: dict, files: dict[str, str]) -> None:
    """A directory with package.json, the given files, and `npm install` done (which
    writes package-lock.json). The npm cache lives under the workdir."""
    if ctx.done(d):
        for rel, text in files.items():  # a newer version of this script may have changed them
            if not (d / rel).exists() or (d / rel).read_text() != text:
                write(d / rel, text)
        return
    need_cmd(ctx, "npm")
    ctx.fresh(d)
    write(d / "package.json", json.dumps(package_json, indent=2) + "\n")
    for rel, text in files.items():
        write(d / rel, text)
    ctx.sh(["npm", "install", "--no-audit", "--no-fund"], cwd=d, env=npm_env(ctx), timeout=1800)
    if not (d / "package-lock.json").exists():
        raise SetupError("npm install wrote no package-lock.json")
    ctx.mark(d)


def npm_env(ctx: Ctx) -> dict[str, str]:
    return {"npm_config_cache": str(ctx.work / "npm-cache"), "npm_config_update_notifier": "false"}


# --------------------------------------------------------------------------- workloads


@dataclass
class Server:
    requests: list[str]          # URL paths, fetched in order
    port: int = 0


@dataclass
class Spec:
    cwd: Path
    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)
    pre: Callable[[], None] | None = None     # not recorded: run before every run
    stdin: Path | None = None
    server: Server | None = None

    def display(self) -> str:
        s = shlex.join(self.cmd)
        if self.stdin:
            s += f" < {self.stdin.name}"
        return s


def rm(*paths: Path) -> Callable[[], None]:
    def go() -> None:
        for p in paths:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
    return go


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def w_git_status(ctx: Ctx) -> Spec:
    return Spec(git_repo(ctx), ["git", "status"])


def w_git_log_p(ctx: Ctx) -> Spec:
    return Spec(git_repo(ctx), ["git", "log", "-p"])


def w_git_grep(ctx: Ctx) -> Spec:
    return Spec(git_repo(ctx), ["git", "grep", "-n", "cached_property"])


def w_npm_ci(ctx: Ctx) -> Spec:
    d = ctx.work / "npm-ci"
    npm_project(ctx, d, {
        "name": "npm-ci-bench", "version": "1.0.0", "private": True,
        "dependencies": {"express": "^4.21.0", "lodash": "^4.17.21", "chalk": "^5.3.0"},
    }, {"index.js": "const express = require('express');\nconsole.log(typeof express);\n"})
    return Spec(d, ["npm", "ci"], env=npm_env(ctx))


TS_FILES = 20


def ts_sources() -> dict[str, str]:
    files: dict[str, str] = {}
    for i in range(TS_FILES - 2):
        dep = f"import {{ Model{i - 1}, Record{i - 1} }} from './model{i - 1}';\n" if i else ""
        files[f"src/model{i}.ts"] = f"""{dep}
export interface Record{i} {{
  id: number;
  name: string;
  tags: string[];
  parent?: {'Record' + str(i - 1) if i else 'null'};
}}

export class Model{i} {{
  private items = new Map<number, Record{i}>();

  add(r: Record{i}): void {{
    this.items.set(r.id, r);
  }}

  byTag(tag: string): Record{i}[] {{
    return [...this.items.values()].filter((r) => r.tags.includes(tag));
  }}

  names(): string[] {{
    return [...this.items.values()].map((r) => r.name.toUpperCase()).sort();
  }}
{f'''
  parentModel(): Model{i - 1} {{
    return new Model{i - 1}();
  }}
''' if i else ''}}}
"""
    files["src/util.ts"] = """export function chunk<T>(xs: T[], n: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n));
  return out;
}

export const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
"""
    imports = "".join(f"import {{ Model{i} }} from './model{i}';\n" for i in range(TS_FILES - 2))
    uses = "".join(f"  new Model{i}().add({{ id: {i}, name: 'm{i}', tags: ['t'] }});\n"
                   for i in range(TS_FILES - 2))
    files["src/index.ts"] = f"""{imports}import {{ chunk, sum }} from './util';

export function main(): number {{
{uses}  return sum(chunk([1, 2, 3, 4, 5], 2).map((c) => c.length));
}}
"""
    files["tsconfig.json"] = json.dumps({"compilerOptions": {
        "target": "ES2020", "module": "commonjs", "strict": True, "outDir": "dist",
        "rootDir": "src", "declaration": True, "sourceMap": True}, "include": ["src"]}, indent=2)
    return files


def w_npx_tsc(ctx: Ctx) -> Spec:
    d = ctx.work / "tsc"
    npm_project(ctx, d, {"name": "tsc-bench", "version": "1.0.0", "private": True,
                         "devDependencies": {"typescript": "^5.4.0"}}, ts_sources())
    return Spec(d, ["npx", "tsc", "-p", "."], env=npm_env(ctx), pre=rm(d / "dist"))


ESLINT_CONFIG = """import js from "@eslint/js";
import globals from "globals";

// Every recommended rule, as a warning: the run reports what it finds and exits 0.
const rules = Object.fromEntries(Object.keys(js.configs.recommended.rules).map((r) => [r, "warn"]));

export default [
  {
    files: ["src/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "commonjs",
      globals: { ...globals.node, ...globals.browser, ...globals.amd },
    },
    rules,
  },
];
"""


def w_eslint(ctx: Ctx) -> Spec:
    d = ctx.work / "eslint"
    npm_project(ctx, d, {
        "name": "eslint-bench", "version": "1.0.0", "private": True, "type": "module",
        "dependencies": {"lodash": "4.17.21"},
        "devDependencies": {"eslint": "^9.0.0", "@eslint/js": "^9.0.0", "globals": "^15.0.0"},
    }, {"eslint.config.js": ESLINT_CONFIG})
    if not (d / "src" / "lodash").exists():  # lint a copy of lodash's sources (1000+ files)
        shutil.copytree(d / "node_modules" / "lodash", d / "src" / "lodash.tmp",
                        ignore=shutil.ignore_patterns("*.json", "*.md", "LICENSE"))
        (d / "src" / "lodash.tmp").rename(d / "src" / "lodash")
    return Spec(d, ["npx", "eslint", "src"], env=npm_env(ctx))


MOCHA_LIB = {
    "lib/cart.js": """const _ = require('lodash');

class Cart {
  constructor() { this.lines = []; }
  add(sku, qty, price) {
    if (qty <= 0) throw new Error('qty must be positive');
    const line = this.lines.find((l) => l.sku === sku);
    if (line) line.qty += qty; else this.lines.push({ sku, qty, price });
    return this;
  }
  remove(sku) { _.remove(this.lines, (l) => l.sku === sku); return this; }
  total() { return _.sumBy(this.lines, (l) => l.qty * l.price); }
  count() { return _.sumBy(this.lines, 'qty'); }
}
module.exports = { Cart };
""",
    "lib/text.js": """const _ = require('lodash');
exports.slug = (s) => _.kebabCase(_.deburr(s));
exports.title = (s) => _.startCase(_.toLower(s));
exports.wrap = (s, n) => _.chunk(s.split(' '), n).map((w) => w.join(' '));
exports.count = (s) => _.countBy(s.toLowerCase().replace(/[^a-z]/g, ''));
""",
    "lib/stats.js": """const _ = require('lodash');
exports.mean = (xs) => (xs.length ? _.mean(xs) : NaN);
exports.median = (xs) => {
  const s = _.sortBy(xs); const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
exports.histogram = (xs, w) => _.countBy(xs, (x) => Math.floor(x / w) * w);
""",
}


def mocha_tests() -> dict[str, str]:
    t: dict[str, str] = {}
    t["test/cart.test.js"] = "const assert = require('assert');\nconst { Cart } = require('../lib/cart');\n" + \
        "describe('Cart', () => {\n" + "".join(
            f"  it('adds {n} items', () => {{ const c = new Cart(); for (let i = 0; i < {n}; i++) "
            f"c.add('s' + (i % 3), 1, 2); assert.strictEqual(c.count(), {n}); "
            f"assert.strictEqual(c.total(), {2 * n}); }});\n" for n in range(1, 11)) + \
        "  it('rejects zero', () => assert.throws(() => new Cart().add('a', 0, 1)));\n" + \
        "  it('removes', () => assert.strictEqual(new Cart().add('a', 1, 1).remove('a').count(), 0));\n});\n"
    t["test/text.test.js"] = "const assert = require('assert');\nconst text = require('../lib/text');\n" + \
        "describe('text', () => {\n" + "".join(
            f"  it('slugs {w}', () => assert.strictEqual(text.slug('{w} Café'), '{w.lower()}-cafe'));\n"
            for w in ["Hello", "World", "Mocha", "Bench", "Dejavu", "Trace"]) + \
        "  it('titles', () => assert.strictEqual(text.title('HELLO WORLD'), 'Hello World'));\n" + \
        "  it('wraps', () => assert.deepStrictEqual(text.wrap('a b c d e', 2), ['a b', 'c d', 'e']));\n" + \
        "  it('counts', () => assert.strictEqual(text.count('Aab!')['a'], 2));\n});\n"
    t["test/stats.test.js"] = "const assert = require('assert');\nconst s = require('../lib/stats');\n" + \
        "describe('stats', () => {\n" + "".join(
            f"  it('median of 1..{n}', () => assert.strictEqual(s.median(Array.from({{length: {n}}}, "
            f"(_, i) => i + 1)), {(n + 1) / 2}));\n" for n in range(1, 9)) + \
        "  it('mean of empty is NaN', () => assert.ok(Number.isNaN(s.mean([]))));\n" + \
        "  it('histogram', () => assert.deepStrictEqual(s.histogram([1, 2, 11], 10), {0: 2, 10: 1}));\n});\n"
    t["test/async.test.js"] = "const assert = require('assert');\nconst fs = require('fs/promises');\n" + \
        "describe('async', () => {\n" + "".join(
            f"  it('reads package.json {i}', async () => {{ const p = JSON.parse(await fs.readFile("
            f"__dirname + '/../package.json', 'utf8')); assert.strictEqual(p.name, 'mocha-bench'); }});\n"
            for i in range(5)) + "});\n"
    t[".mocharc.json"] = json.dumps({"spec": ["test/**/*.test.js"]}) + "\n"
    return t


def w_mocha(ctx: Ctx) -> Spec:
    d = ctx.work / "mocha"
    npm_project(ctx, d, {"name": "mocha-bench", "version": "1.0.0", "private": True,
                         "dependencies": {"lodash": "^4.17.21"},
                         "devDependencies": {"mocha": "^10.4.0"}},
                dict(MOCHA_LIB, **mocha_tests()))
    return Spec(d, ["npx", "mocha"], env=npm_env(ctx))


PY_PKG = {
    "inventory/__init__.py": "from .store import Store, Item\nfrom .pricing import price_with_tax\n",
    "inventory/store.py": '''from __future__ import annotations

import json
from dataclasses import dataclass, field, asdict
from pathlib import Path


@dataclass
class Item:
    sku: str
    name: str
    qty: int = 0
    tags: list[str] = field(default_factory=list)


class Store:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        if item.sku in self.items:
            self.items[item.sku].qty += item.qty
        else:
            self.items[item.sku] = item

    def take(self, sku: str, qty: int) -> None:
        item = self.items[sku]
        if qty > item.qty:
            raise ValueError(f"only {item.qty} of {sku}")
        item.qty -= qty

    def tagged(self, tag: str) -> list[Item]:
        return sorted((i for i in self.items.values() if tag in i.tags), key=lambda i: i.sku)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps([asdict(i) for i in self.items.values()]))

    @classmethod
    def load(cls, path: Path) -> "Store":
        s = cls()
        for d in json.loads(path.read_text()):
            s.add(Item(**d))
        return s
''',
    "inventory/pricing.py": '''from decimal import Decimal, ROUND_HALF_UP

RATES = {"std": Decimal("0.20"), "reduced": Decimal("0.05"), "zero": Decimal("0")}


def price_with_tax(net: str, band: str = "std") -> Decimal:
    gross = Decimal(net) * (1 + RATES[band])
    return gross.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
''',
    "tests/__init__.py": "",
    "tests/test_store.py": '''import pytest

from inventory import Item, Store


@pytest.fixture
def store():
    s = Store()
    s.add(Item("a1", "apple", 5, ["fruit"]))
    s.add(Item("b2", "bread", 2, ["bakery"]))
    return s


@pytest.mark.parametrize("n", range(1, 9))
def test_add_accumulates(store, n):
    store.add(Item("a1", "apple", n))
    assert store.items["a1"].qty == 5 + n


def test_take(store):
    store.take("a1", 3)
    assert store.items["a1"].qty == 2


def test_take_too_many(store):
    with pytest.raises(ValueError):
        store.take("b2", 3)


@pytest.mark.parametrize("tag,skus", [("fruit", ["a1"]), ("bakery", ["b2"]), ("none", [])])
def test_tagged(store, tag, skus):
    assert [i.sku for i in store.tagged(tag)] == skus


def test_roundtrip(store, tmp_path):
    p = tmp_path / "store.json"
    store.save(p)
    assert Store.load(p).items == store.items
''',
    "tests/test_pricing.py": '''from decimal import Decimal

import pytest

from inventory import price_with_tax


@pytest.mark.parametrize("net,band,gross", [
    ("10", "std", "12.00"), ("10", "reduced", "10.50"), ("10", "zero", "10.00"),
    ("0.99", "std", "1.19"), ("1.05", "std", "1.26"), ("100", "reduced", "105.00"),
    ("3.33", "std", "4.00"), ("19.99", "std", "23.99"), ("0", "std", "0.00"),
    ("7.5", "reduced", "7.88"), ("12.34", "zero", "12.34"), ("250", "std", "300.00"),
])
def test_price(net, band, gross):
    assert price_with_tax(net, band) == Decimal(gross)


def test_unknown_band():
    with pytest.raises(KeyError):
        price_with_tax("1", "luxury")


def test_default_band():
    assert price_with_tax("1") == Decimal("1.20")
''',
    "pyproject.toml": '[project]\nname = "inventory"\nversion = "0.1"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
}


def w_pytest(ctx: Ctx) -> Spec:
    venv = py_tools(ctx)
    d = ctx.work / "pytest"
    if not ctx.done(d):
        ctx.fresh(d)
        for rel, text in PY_PKG.items():
            write(d / rel, text)
        ctx.mark(d)
    return Spec(d, ["pytest", "-q"], env=venv_env(venv))


def w_pip_install(ctx: Ctx) -> Spec:
    tools = py_tools(ctx)
    d = ctx.work / "pip-install"
    wheels = d / "wheels"
    if not ctx.done(d):
        ctx.fresh(d)
        ctx.sh([str(tools / "bin" / "pip"), "download", "-q", "--only-binary", ":all:",
                "-d", str(wheels), "requests", "click"], timeout=1800)
        ctx.mark(d)
    venv = d / "venv"

    def pre() -> None:
        rm(venv)()
        subprocess.run([ctx.python3, "-m", "venv", str(venv)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    env = dict(venv_env(venv), PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return Spec(d, ["pip", "install", "--no-index", "--find-links", "wheels", "requests", "click"],
                env=env, pre=pre)


@shared
def python_tree(ctx: Ctx) -> Path:
    """django/{core,db,http,utils} of the newest Django 4.2 wheel, formatted by black once
    (so `black --check` exits 0)."""
    venv = py_tools(ctx)
    d = ctx.work / "pysrc"
    src = d / "src"
    if not ctx.done(d):
        wheel = django_wheels(ctx)[-1]
        ctx.fresh(d)
        tmp = d / "tmp"
        extract_package(wheel, tmp)
        src.mkdir()
        for sub in ["core", "db", "http", "utils"]:
            shutil.copytree(tmp / "django" / sub, src / "django" / sub)
        shutil.copy(tmp / "django" / "__init__.py", src / "django" / "__init__.py")
        shutil.rmtree(tmp)
        ctx.sh([str(venv / "bin" / "black"), "-q", "."], cwd=src,
               env={"BLACK_CACHE_DIR": str(d / "black-cache-setup")})
        ctx.mark(d)
    return src


def w_ruff(ctx: Ctx) -> Spec:
    src = python_tree(ctx)
    return Spec(src, ["ruff", "check", "--exit-zero", "."], env=venv_env(py_tools(ctx)),
                pre=rm(src / ".ruff_cache"))


def w_black(ctx: Ctx) -> Spec:
    src = python_tree(ctx)
    cache = src.parent / "black-cache"
    env = dict(venv_env(py_tools(ctx)), BLACK_CACHE_DIR=str(cache))
    return Spec(src, ["black", "--check", "."], env=env, pre=rm(cache))


def w_make(ctx: Ctx) -> Spec:
    need_cmd(ctx, "make", "make")
    need_cmd(ctx, "cc", "gcc")
    d = ctx.work / "make"
    if not ctx.done(d):
        ctx.fresh(d)
        n = 24
        write(d / "include" / "mods.h", "".join(f"int mod{i}(int x);\n" for i in range(n)))
        for i in range(n):
            write(d / "src" / f"mod{i:02d}.c", f"""#include <stdio.h>
#include <string.h>
#include "mods.h"

static int table{i}[64];

static int mix{i}(int a, int b) {{
    return (a * {31 + i}) ^ (b >> {1 + i % 5});
}}

int mod{i}(int x) {{
    int acc = {i};
    for (int k = 0; k < 64; k++) {{
        table{i}[k] = mix{i}(x + k, acc);
        acc += table{i}[k] % {97 + i};
    }}
    return acc{f' + mod{i - 1}(x / 2)' if i else ''};
}}
""")
        calls = " + ".join(f"mod{i}(argc)" for i in range(n))
        write(d / "src" / "main.c", f'#include <stdio.h>\n#include "mods.h"\n\nint main(int argc, char **argv) {{\n    (void)argv;\n    printf("%d\\n", {calls});\n    return 0;\n}}\n')
        write(d / "Makefile", """CC ?= cc
CFLAGS ?= -O2 -Wall -Iinclude -MMD -MP
SRCS := $(wildcard src/*.c)
OBJS := $(SRCS:src/%.c=build/%.o)

app: $(OBJS)
\t$(CC) $(CFLAGS) -o $@ $^

build/%.o: src/%.c | build
\t$(CC) $(CFLAGS) -c -o $@ $<

build:
\tmkdir -p build

clean:
\trm -rf build app

-include $(OBJS:.o=.d)
.PHONY: clean
""")
        ctx.mark(d)

    def pre() -> None:
        subprocess.run(["make", "clean"], cwd=d, check=True, stdout=subprocess.DEVNULL)

    return Spec(d, ["make", "-j2"], pre=pre)


CARGO_MAIN = """use std::io::Write;

fn main() {
    let text = "alpha beta gamma delta alpha beta alpha";
    let mut buf = itoa::Buffer::new();
    let count = memchr::memmem::find_iter(text.as_bytes(), b"alpha").count();
    let out = std::io::stdout();
    let mut out = out.lock();
    writeln!(out, "alpha appears {} times", buf.format(count)).unwrap();
    for (i, w) in text.split(' ').enumerate() {
        writeln!(out, "{} {}", buf.format(i), w).unwrap();
    }
}
"""


def w_cargo(ctx: Ctx) -> Spec:
    need_cmd(ctx, "cargo")
    d = ctx.work / "cargo"
    proj = d / "wordcount"
    env = {"CARGO_HOME": str(d / "cargo-home")}
    if not ctx.done(d):
        ctx.fresh(d)
        write(proj / "Cargo.toml", '[package]\nname = "wordcount"\nversion = "0.1.0"\nedition = "2021"\n\n'
              '[dependencies]\nitoa = "1"\nmemchr = "2"\n')
        write(proj / "src" / "main.rs", CARGO_MAIN)
        ctx.sh(["cargo", "generate-lockfile"], cwd=proj, env=env)
        ctx.sh(["cargo", "fetch"], cwd=proj, env=env)
        ctx.mark(d)

    def pre() -> None:
        subprocess.run(["cargo", "clean", "-q"], cwd=proj, env=dict(os.environ, **env), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return Spec(proj, ["cargo", "build", "--offline"], env=env, pre=pre)


GO_MAIN = """package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"
)

func main() {
	ns := uuid.MustParse("6ba7b811-9dad-11d1-80b4-00c04fd430c8")
	for _, name := range strings.Fields("alpha beta gamma") {
		fmt.Fprintln(os.Stdout, name, uuid.NewSHA1(ns, []byte(name)))
	}
}
"""


def w_go(ctx: Ctx) -> Spec:
    need_cmd(ctx, "go")
    d = ctx.work / "go"
    mod = d / "uuidnames"
    env = {"GOPATH": str(d / "gopath"), "GOCACHE": str(d / "gocache"), "GOTOOLCHAIN": "local",
           "GOFLAGS": "-mod=readonly -buildvcs=false"}
    if not ctx.done(d):
        ctx.fresh(d)
        write(mod / "go.mod", "module example.com/uuidnames\n\ngo 1.21\n")
        write(mod / "main.go", GO_MAIN)
        ctx.sh(["go", "get", "github.com/google/uuid@v1.6.0"], cwd=mod, env=env)
        ctx.sh(["go", "mod", "tidy"], cwd=mod, env=dict(env, GOFLAGS="-buildvcs=false"))
        ctx.mark(d)
    # offline: everything the build needs is in the module cache
    return Spec(mod, ["go", "build"], env=dict(env, GOPROXY="off"),
                pre=rm(d / "gocache", mod / "uuidnames"))


def w_sqlite(ctx: Ctx) -> Spec:
    need_cmd(ctx, "sqlite3", "sqlite3")
    d = ctx.work / "sqlite"
    if not ctx.done(d):
        ctx.fresh(d)
        lines = ["CREATE TABLE events(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, payload TEXT, n INTEGER);"]
        for i in range(2000):
            lines.append(f"INSERT INTO events(kind, payload, n) VALUES ('k{i % 7}', 'payload number {i}', {i * 37 % 1000});")
        lines.append("SELECT kind, count(*) FROM events GROUP BY kind;")
        write(d / "inserts.sql", "\n".join(lines) + "\n")
        ctx.mark(d)
    return Spec(d, ["sqlite3", "test.db"], stdin=d / "inserts.sql",
                pre=rm(d / "test.db", d / "test.db-journal"))


def w_rsync(ctx: Ctx) -> Spec:
    need_cmd(ctx, "rsync", "rsync")
    d = ctx.work / "rsync"
    if not ctx.done(d):
        ctx.fresh(d)
        small_tree(d / "src", 2000, 20)
        ctx.mark(d)
    return Spec(d, ["rsync", "-a", "src/", "dst/"], pre=rm(d / "dst"))


def w_tar(ctx: Ctx) -> Spec:
    need_cmd(ctx, "tar", "tar")
    d = ctx.work / "tar"
    if not ctx.done(d):
        ctx.fresh(d)
        small_tree(d / "src", 2000, 20)
        ctx.mark(d)
    return Spec(d, ["tar", "-cf", "out.tar", "src"], pre=rm(d / "out.tar"))


FLASK_APP = '''from flask import Flask, jsonify, render_template

app = Flask(__name__)
ITEMS = {i: {"id": i, "name": f"item {i}", "price": i * 3 % 17} for i in range(1, 51)}


@app.route("/")
def index():
    return render_template("index.html", items=list(ITEMS.values())[:10])


@app.route("/api/items/<int:item_id>")
def item(item_id):
    if item_id not in ITEMS:
        return jsonify(error="not found"), 404
    return jsonify(ITEMS[item_id])
'''

FLASK_TEMPLATE = """<!doctype html>
<html><head><title>Items</title><link rel="stylesheet" href="{{ url_for('static', filename='style.css') }}"></head>
<body><ul>{% for it in items %}<li>{{ it.name }}: {{ it.price }}</li>{% endfor %}</ul></body></html>
"""


def server_requests(n: int) -> list[str]:
    """A mix: pages, API calls, a static file."""
    out = []
    for i in range(n):
        out.append(["/", f"/api/items/{1 + i % 50}", "/static/style.css", f"/api/items/{1 + (i * 7) % 50}"][i % 4])
    return out


def w_flask(ctx: Ctx) -> Spec:
    venv = py_tools(ctx)
    d = ctx.work / "flask"
    if not ctx.done(d):
        ctx.fresh(d)
        write(d / "app.py", FLASK_APP)
        write(d / "templates" / "index.html", FLASK_TEMPLATE)
        write(d / "static" / "style.css", "body { font-family: sans-serif; }\n" * 20)
        ctx.mark(d)
    port = free_port()
    return Spec(d, ["flask", "--app", "app", "run", "--port", str(port)], env=venv_env(venv),
                server=Server(server_requests(200), port))


EXPRESS_SERVER = """const express = require('express');
const path = require('path');

const app = express();
const items = Array.from({ length: 50 }, (_, i) => ({ id: i + 1, name: `item ${i + 1}`, price: (i * 3) % 17 }));

app.use('/static', express.static(path.join(__dirname, 'public')));
app.get('/', (req, res) => res.send(`<ul>${items.slice(0, 10).map((it) => `<li>${it.name}</li>`).join('')}</ul>`));
app.get('/api/items/:id', (req, res) => {
  const it = items[Number(req.params.id) - 1];
  if (!it) return res.status(404).json({ error: 'not found' });
  res.json(it);
});

const port = Number(process.env.PORT || 3000);
const server = app.listen(port, '127.0.0.1', () => console.log(`listening on ${port}`));
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    console.log(`${sig}: closing`);
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  });
}
"""


def w_express(ctx: Ctx) -> Spec:
    d = ctx.work / "express"
    npm_project(ctx, d, {"name": "express-bench", "version": "1.0.0", "private": True,
                         "dependencies": {"express": "^4.21.0"}},
                {"server.js": EXPRESS_SERVER,
                 "public/style.css": "body { font-family: sans-serif; }\n" * 20})
    port = free_port()
    return Spec(d, ["node", "server.js"], env=dict(npm_env(ctx), PORT=str(port)),
                server=Server(server_requests(200), port))


def w_http_server(ctx: Ctx) -> Spec:
    d = ctx.work / "http-server"
    files = d / "files"
    if not ctx.done(d):
        ctx.fresh(d)
        for i in range(100):
            write(files / f"report-{i:03d}.txt", f"report {i}\n" * (10 + i))
        ctx.mark(d)
    port = free_port()
    return Spec(files, ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                server=Server(["/"] * 50, port))


WORKLOADS: dict[str, Callable[[Ctx], Spec]] = {
    "git-status": w_git_status,
    "git-log-p": w_git_log_p,
    "git-grep": w_git_grep,
    "npm-ci": w_npm_ci,
    "npx-tsc": w_npx_tsc,
    "eslint": w_eslint,
    "mocha": w_mocha,
    "pytest": w_pytest,
    "pip-install": w_pip_install,
    "ruff": w_ruff,
    "black": w_black,
    "make-j2": w_make,
    "cargo-build": w_cargo,
    "go-build": w_go,
    "sqlite3": w_sqlite,
    "rsync": w_rsync,
    "tar": w_tar,
    "flask": w_flask,
    "express": w_express,
    "http-server": w_http_server,
}


# --------------------------------------------------------------------------- running


@dataclass
class RunResult:
    status: int | None
    wall_s: float
    note: str = ""       # for servers: requests served, how it stopped


def run_once(spec: Spec, prefix: list[str], out_path: Path, timeout: float) -> RunResult:
    """Run spec.cmd (after `prefix`, e.g. a dejavu command line), stdout and stderr into
    out_path. For a server: wait for its port, make the requests, then SIGINT."""
    if spec.pre:
        spec.pre()
    env = dict(os.environ)
    env.update(spec.env)
    argv = prefix + spec.cmd
    stdin = open(spec.stdin, "rb") if spec.stdin else subprocess.DEVNULL
    with open(out_path, "wb") as out:
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(argv, cwd=spec.cwd, env=env, stdin=stdin, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            return RunResult(None, 0.0, f"could not start: {e}")
        note = ""
        if spec.server:
            note = drive_server(p, spec.server, timeout)
        try:
            status = p.wait(timeout=max(1.0, timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            status = p.wait()
            note = (note + "; " if note else "") + f"killed after the {timeout:.0f}s timeout"
        wall = time.monotonic() - t0
    if status < 0:
        status = 128 - status
    return RunResult(status, wall, note)


def drive_server(p: subprocess.Popen, server: Server, timeout: float) -> str:
    """Wait for the port, GET every request path, then stop the process with SIGINT
    (SIGTERM after 60 s, SIGKILL after 30 more). Returns what happened, in one line."""
    deadline = time.monotonic() + min(timeout, 180)
    while True:
        if p.poll() is not None:
            return f"exited ({p.returncode}) before listening"
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
    ok = failed = 0
    first_error = ""
    for path in server.requests:
        req = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}",
                                     headers={"Connection": "close"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
                ok += r.status == 200
                failed += r.status != 200
        except (urllib.error.URLError, OSError) as e:
            failed += 1
            first_error = first_error or str(e)[:80]
    stopped_by = "SIGINT"
    p.send_signal(signal.SIGINT)
    for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
        try:
            p.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            stopped_by += f", then {sig.name}"
            p.send_signal(sig)
    note = f"{ok}/{len(server.requests)} requests OK, stopped by {stopped_by}"
    if failed:
        note += f" ({failed} failed: {first_error})"
    return note


def exec_chain(dejavu: str, trace: Path) -> list[str]:
    """The executables the first process exec'd, in order (from the trace's exec events)."""
    try:
        p = subprocess.Popen([dejavu, "export", "--format", "jsonl", str(trace)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             errors="replace")
    except OSError:
        return []
    root = None
    chain: list[str] = []
    assert p.stdout
    for line in p.stdout:
        if root is None and line.startswith('{"type":"spawn"'):
            root = json.loads(line).get("pid")
        elif line.startswith('{"type":"exec"'):
            e = json.loads(line)
            if root is None or e.get("pid") == root:
                exe = e.get("exe", "?")
                if not chain or chain[-1] != exe:
                    chain.append(exe)
    p.wait()
    return chain


def is_catch_all(pattern: str) -> bool:
    """`/**/*`, or a `**` after fewer than two literal leading components."""
    if "/**/*" in pattern:
        return True
    if "**" not in pattern:
        return False
    literal = 0
    for comp in pattern.split("**", 1)[0].split("/"):
        if not comp:
            continue
        if any(ch in comp for ch in "*?["):
            break
        literal += 1
    return literal < 2


def callsite_text(f: dict) -> str:
    cs = f.get("callsites") or []
    if not cs:
        return "-"
    c = cs[0]
    fn = c.get("function") or "?"
    if c.get("file"):
        return f"{fn} {c['file']}:{c.get('line', 0)}"
    if c.get("module"):
        return f"{fn} [{c['module']}]"
    return fn


def summarize(name: str, spec: Spec, report: dict, native: RunResult | None, rec: RunResult,
              chain: list[str], which: str) -> dict:
    findings = report.get("findings") or []
    owners = [f.get("owner") for f in findings]
    if not any(o is not None for o in owners):
        own_rank = "-"
    else:
        own_rank = next((str(f.get("rank", i + 1)) for i, f in enumerate(findings)
                         if f.get("owner") == "own"), "none")
    catch_all = sum(1 for f in findings if any(is_catch_all(p) for p in f.get("paths") or []))
    top = []
    for i, f in enumerate(findings[:TOP]):
        top.append({
            "rank": f.get("rank", i + 1),
            "detector": f.get("detector"),
            "program": f.get("program") or f.get("command"),
            "path": (f.get("paths") or ["-"])[0],
            "path_count": f.get("path_count"),
            "redundant_calls": f.get("redundant_calls"),
            "callsite": callsite_text(f),
            "owner": f.get("owner"),
        })
    return {
        "workload": name, "command": spec.display(), "cwd": str(spec.cwd), "which": which,
        "exec_chain": chain,
        "status": rec.status, "wall_s": round(rec.wall_s, 2), "note": rec.note,
        "native_status": native.status if native else None,
        "native_wall_s": round(native.wall_s, 2) if native else None,
        "backend": (report.get("trace") or {}).get("backend"),
        "processes": report.get("processes"), "syscalls": report.get("syscalls"),
        "redundant_calls": report.get("redundant_calls"),
        "finding_count": report.get("finding_count"), "hidden": report.get("hidden"),
        "lost_events": report.get("lost_events"), "truncated": report.get("truncated"),
        "own_rank": own_rank, "catch_all": catch_all, "top": top,
    }


def md_escape(s: object) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render(rows: list[dict], skipped: list[tuple[str, str]], meta: dict) -> str:
    out = [f"# dejavu on real programs ({meta['dejavu_version']}, backend {meta['backend']})", "",
           f"{meta['date']}; dejavu `{meta['dejavu']}`; workdir `{meta['workdir']}`; "
           f"{os.cpu_count()} CPUs. Counts come from each workload's `NAME.json`; "
           "`NAME.txt` is the terminal report.", "",
           "| workload | command | exit | native s | dejavu s | processes | syscalls | redundant "
           "| findings | hidden | lost | own rank | catch-all |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        nat = "-" if r["native_wall_s"] is None else f"{r['native_wall_s']:.2f}"
        out.append(
            f"| {r['workload']} | `{md_escape(r['command'])}` | {r['status']} | {nat} | "
            f"{r['wall_s']:.2f} | {r['processes']} | {r['syscalls']} | {r['redundant_calls']} | "
            f"{r['finding_count']} | {r['hidden']} | {r['lost_events']} | {r['own_rank']} | "
            f"{r['catch_all']} |")
    if skipped:
        out += ["", "Skipped:", ""]
        out += [f"- {n}: {why}" for n, why in skipped]
    out += ["", "## Top findings", "",
            "One line each: rank, detector, process (program), first path or pattern "
            "(distinct paths), redundant calls, first call site, owner.", ""]
    for r in rows:
        out.append(f"### {r['workload']}: `{md_escape(r['command'])}`")
        out.append("")
        out.append(f"- ran: {r['which']}; exec chain of the first process: "
                   + (" → ".join(f"`{e}`" for e in r["exec_chain"][:10]) or "-"))
        if r["note"]:
            out.append(f"- server: {r['note']}")
        if r["native_status"] not in (None, 0):
            out.append(f"- native run exited {r['native_status']}")
        if r["truncated"]:
            out.append(f"- trace truncated: {r['truncated']}")
        for t in r["top"]:
            out.append(
                f"- #{t['rank']} {t['detector']} | `{md_escape(t['program'])[:80]}` | "
                f"`{md_escape(t['path'])}` ({t['path_count']}) | {t['redundant_calls']} | "
                f"{md_escape(t['callsite'])[:140]} | {t['owner'] if t['owner'] is not None else '-'}")
        if not r["top"]:
            out.append("- (no findings)")
        out.append("")
    return "\n".join(out) + "\n"


def which_text(spec: Spec) -> str:
    """What `cmd[0]` resolves to on the workload's PATH, and the file behind it."""
    path = spec.env.get("PATH", os.environ.get("PATH", ""))
    w = shutil.which(spec.cmd[0], path=path)
    if not w:
        return f"{spec.cmd[0]} (not on PATH)"
    real = os.path.realpath(w)
    kind = ""
    try:
        with open(real, "rb") as f:
            head = f.read(128)
        if head.startswith(b"#!"):
            kind = " (script: " + head[2:].split(b"\n")[0].decode(errors="replace").strip() + ")"
    except OSError:
        pass
    return f"`{w}`" + (f" → `{real}`" if real != w else "") + kind


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Workloads: " + ", ".join(WORKLOADS))
    ap.add_argument("--dejavu", required=True, help="the dejavu binary to measure")
    ap.add_argument("--out", required=True, type=Path, help="where traces, reports and summary.md go")
    ap.add_argument("--backend", choices=["auto", "ebpf", "ptrace"],
                    help="passed to `dejavu run --backend` (default: dejavu's own default)")
    ap.add_argument("--only", help="comma-separated workload names")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/dejavu-real"),
                    help="where workloads are set up (default /tmp/dejavu-real)")
    ap.add_argument("--skip-native", action="store_true",
                    help="do not run each workload natively first")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (default 1800)")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    args = ap.parse_args()

    # A shell starts background jobs with SIGINT and SIGQUIT ignored, and ignored signals
    # are inherited: the servers would then ignore the SIGINT that stops them. Handled
    # signals are reset to the default on exec, so handle them here.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if args.list:
        print("\n".join(WORKLOADS))
        return 0
    undone = undo_pyenv_exec()
    if undone:
        log(f"== pyenv exec had changed the environment; undone for the workloads: {', '.join(undone)}")
    names = list(WORKLOADS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in WORKLOADS]
        if unknown:
            ap.error(f"unknown workload(s): {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    dejavu = shutil.which(args.dejavu) or args.dejavu
    dejavu = os.path.abspath(dejavu) if os.path.exists(dejavu) else dejavu
    if not os.access(dejavu, os.X_OK):
        ap.error(f"--dejavu {args.dejavu}: not an executable")
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(args.workdir.resolve(), out)
    version = subprocess.run([dejavu, "--version"], capture_output=True, text=True).stdout.strip()

    rows: list[dict] = []
    skipped: list[tuple[str, str]] = []
    for name in names:
        log(f"== {name}: setup")
        try:
            spec = WORKLOADS[name](ctx)
        except (SetupError, OSError, subprocess.SubprocessError) as e:
            log(f"!! {name}: skipped, setup failed: {e}")
            skipped.append((name, f"setup failed: {e}"))
            continue
        try:
            native = None
            if not args.skip_native:
                log(f"== {name}: native run: {spec.display()}")
                native = run_once(spec, [], out / f"{name}.native.out", args.timeout)
                if native.status != 0:
                    log(f"!! {name}: the native run exited {native.status} {native.note} "
                        f"(see {out / (name + '.native.out')}); recording it anyway")
            for suffix in (".dvt", ".json", ".txt"):
                rm(out / f"{name}{suffix}")()
            prefix = [dejavu, "run", "--keep-trace", str(out / f"{name}.dvt"), "--json",
                      "-o", str(out / f"{name}.json")]
            if args.backend:
                prefix += ["--backend", args.backend]
            prefix.append("--")
            log(f"== {name}: dejavu run -- {spec.display()}")
            rec = run_once(spec, prefix, out / f"{name}.out", args.timeout)
            with open(out / f"{name}.txt", "w") as txt:
                rp = subprocess.run([dejavu, "report", "--color", "never", str(out / f"{name}.dvt")],
                                    stdout=txt, stderr=subprocess.PIPE, text=True)
            if rp.returncode != 0:
                log(f"!! {name}: dejavu report exited {rp.returncode}: {rp.stderr.strip()[:200]}")
            try:
                report = json.loads((out / f"{name}.json").read_text())
            except (OSError, ValueError) as e:
                log(f"!! {name}: no JSON report ({e}); dejavu exited {rec.status} {rec.note}")
                skipped.append((name, f"no JSON report: {e} (exit {rec.status}) {rec.note}"))
                continue
            chain = exec_chain(dejavu, out / f"{name}.dvt")
            row = summarize(name, spec, report, native, rec, chain, which_text(spec))
            rows.append(row)
            log(f"   exit {rec.status}, {rec.wall_s:.1f}s, {row['syscalls']} syscalls, "
                f"{row['finding_count']} findings {rec.note}")
        except (OSError, subprocess.SubprocessError) as e:
            log(f"!! {name}: skipped: {e}")
            skipped.append((name, str(e)))

    meta = {"dejavu": dejavu, "dejavu_version": version, "backend": args.backend or "default",
            "pyenv_exec_undone": undone,
            "workdir": str(ctx.work), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    md = render(rows, skipped, meta)
    (out / "summary.md").write_text(md)
    (out / "summary.json").write_text(json.dumps({"meta": meta, "rows": rows,
                                                  "skipped": skipped}, indent=1) + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
