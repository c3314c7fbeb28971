"""lazy_imports.py: a program that imports N modules of one package lazily, in main().

Each import from the package makes CPython's import system stat the package's directory
again (importlib's FileFinder checks its mtime at each look-up), through posix.stat, which
the Python agent does not wrap: the stacks hold only the interpreter's C frames. Those
look-ups are the runtime's, not a line of this program's (crates/dejavu/tests/findings.rs).

usage: python3 lazy_imports.py N
"""
import importlib
import os
import sys
import tempfile


def main() -> int:
    n = int(sys.argv[1])
    sys.dont_write_bytecode = True
    root = tempfile.mkdtemp(prefix="lazy-imports-")
    pkg = os.path.join(root, "lazypkg")
    os.mkdir(pkg)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write("")
    for i in range(n):
        with open(os.path.join(pkg, f"m{i}.py"), "w") as f:
            f.write(f"VALUE = {i}\n")
    sys.path.insert(0, root)
    total = 0
    for i in range(n):
        total += importlib.import_module(f"lazypkg.m{i}").VALUE
    print(f"lazy_imports.py: {n} modules, sum {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
