"""syntax_errors.py: source parsed with ast.parse that has a syntax error, for the owner
test in crates/dejavu/tests/findings.rs: at each SyntaxError CPython opens the name the
code was compiled with (`<unknown>`, ast.parse's default) in the working directory to
show the offending line. Those failed opens are the runtime's, not the program's.

usage: python3 syntax_errors.py N   (N parses of bad source; 1 is the twin)"""
import ast
import sys

n = int(sys.argv[1])
bad = 0
for _ in range(n):
    try:
        ast.parse("x = (")
    except SyntaxError:
        bad += 1
print(f"syntax_errors.py: {bad} of {n} parses failed")
