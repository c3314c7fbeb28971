#!/bin/sh
# shim.sh: a version manager's shim in miniature (pyenv's shape): looks for the real
# interpreter along a search path of its own, reading a version file in each directory it
# walks up from, then execs the real program in its own process. Usage: shim.sh PROGRAM
# ARGS... (crates/dejavu/tests/findings.rs: the real program's finding comes first).
d=$PWD
for _ in 1 2 3 4 5 6; do
    for f in .python-version .tool-versions .node-version; do
        [ -e "$d/$f" ] && break 2
    done
    d=$(dirname "$d")
done
for dir in /opt/none/bin /usr/local/none/bin /nonexistent/bin; do
    [ -x "$dir/python3" ] && exec "$dir/python3" "$@"
done
exec "$@"
