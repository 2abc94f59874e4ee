#!/bin/sh
# Runs test_numerics under braidrun -n N on every all-reduce,
# reduce-scatter, allgather and broadcast candidate that `braid-info -n N`
# lists in this build.
#
# usage: run_numerics.sh BRAIDRUN TEST_NUMERICS BRAID_INFO CANDS_SH N
set -u
[ $# -eq 5 ] || { echo "usage: run_numerics.sh BRAIDRUN TEST BRAID_INFO CANDS_SH N" >&2; exit 2; }
cands=$("$4" "$3" "$5" | grep -E '^(allreduce|reduce_scatter|allgather|broadcast):') || {
    echo "run_numerics.sh: braid-info -n $5 listed no candidates" >&2; exit 1; }
echo "candidates:" $cands
exec "$1" -n "$5" "$2" --cands "$cands"
