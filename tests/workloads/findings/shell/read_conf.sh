# read_conf.sh: a shell script that reads its configuration file for every item (dirty),
# or once before the loop (clean), with `cat` (a process per item). dejavu
# has no agent for shell scripts: the rows are the script's own, named by it, with no
# line, not at bash's C functions (crates/dejavu/tests/findings.rs,
# a_shell_scripts_process_per_item_is_its_own_and_names_no_shell_function).
#
# usage: bash read_conf.sh CONF N dirty|clean
conf=$1 n=$2 mode=$3
load() { limit=$(cat "$conf"); limit=${limit#*=}; }
[ "$mode" = clean ] && load
total=0
i=0
while [ "$i" -lt "$n" ]; do
    [ "$mode" = clean ] || load
    total=$((total + limit + i))
    i=$((i + 1))
done
echo "$total"
