#!/bin/sh
# Runs test_numerics under braidrun -n N on every all-reduce,
# reduce-scatter, allgather and broadcast candidate that `braid-info -n N`
# lists in this build; those whose algorithm braid-info says "folds in rank
# order" are also checked against the left fold bit for bit.
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
# "algorithm pipe for allreduce, folds in rank order" -> allreduce:pipe
ordered=$("$3" -n "$5" 2>&1 | sed -n 's/.* algorithm \([a-z0-9_]*\) for \([a-z_]*\), folds in rank order$/\2:\1/p' | sort -u)
[ -n "$ordered" ] || {
    echo "run_numerics.sh: braid-info -n $5 named no algorithm that folds in rank order" >&2; exit 1; }
mine=""
for c in $cands; do
  echo "$ordered" | grep -qx "${c%@*}" && mine="$mine ${c%@*}"
done
echo "rank order:" $mine
run=$1; bin=$2; n=$5
if [ -n "$mine" ]; then set -- --rank-order "$mine"; else set --; fi
if [ -n "${RANKS_PER_HOST:-}" ]; then
  exec "$run" -n "$n" sh -c 'k=$1; c=$2; shift 2
      BRAID_HOSTNAME=h$((BRAID_RANK / k)) exec "$0" --cands "$c" "$@"' \
      "$bin" "$RANKS_PER_HOST" "$cands" "$@"
fi
exec "$run" -n "$n" "$bin" --cands "$cands" "$@"
