#!/bin/sh
# check-then-act, trap: GNU tar lstat()s each member (AT_SYMLINK_NOFOLLOW), then opens it
# with O_NOFOLLOW and fstat()s the descriptor. The lstat is not a redundant check — whether
# the member is a symlink decides whether tar opens it at all — so nothing must be reported.
# Run in a scratch directory.
set -e
N=${1:-100}
mkdir -p tree
i=0
while [ "$i" -lt "$N" ]; do
    echo "file $i" > "tree/f$i"
    i=$((i + 1))
done
ln -sf f0 tree/link
tar cf tree.tar tree
