#!/bin/sh
# Runs test_numerics under braidrun -n N on every all-reduce,
# reduce-scatter, allgather and broadcast candidate that `braid-info -n N`
# lists in this build.
#
# usage: run_numerics.sh BRAIDRUN TEST_NUMERICS BRAID_INFO CANDS_SH N
# RANKS_PER_HOST=K: the ranks as emulated hosts of K ranks each
# (BRAID_HOSTNAME), with the hierarchical candidates; CANDS_MATCH=RE keeps
# the candidates that match RE (grep -E) only.
set -u
[ $# -eq 5 ] || { echo "usage: run_numerics.sh BRAIDRUN TEST BRAID_INFO CANDS_SH N" >&2; exit 2; }
cands=$("$4" "$3" "$5" | grep -E '^(allreduce|reduce_scatter|allgather|broadcast):' |
        grep -E "${CANDS_MATCH:-.}") || {
    echo "run_numerics.sh: braid-info -n $5 listed no candidates" >&2; exit 1; }
echo "candidates:" $cands
if [ -n "${RANKS_PER_HOST:-}" ]; then
  exec "$1" -n "$5" sh -c 'BRAID_HOSTNAME=h$((BRAID_RANK / $1)) exec "$0" --cands "$2"' \
      "$2" "$RANKS_PER_HOST" "$cands"
fi
exec "$1" -n "$5" "$2" --cands "$cands"
