#!/usr/bin/env bash
# What a message costs inside an emulated host and between two: an
# all-reduce of 2 ranks on one host (over shared memory, and over UCX's TCP
# within the host's namespace) against 2 ranks on 2 hosts behind the switch
# (UCX over the emulated network, unshaped and at RATE).  The inputs of a
# hierarchical algorithm's cost model.  Root.
#
#   bench/netns/hostcost.sh BUILD_DIR [OUT.csv]
#   RATE=1gbit ROUNDS=3 ITERS=20 SIZES="8 65536 1048576 16777216"
# OUT.csv (default stdout): where,rate,candidate,bytes,time_us (median over
# rounds of braid-bench's median of the slowest rank, f32 sum, out of place).
set -uo pipefail
build=${1:?usage: hostcost.sh BUILD_DIR [OUT.csv]}
out=${2:-/dev/stdout}
rate=${RATE:-1gbit} rounds=${ROUNDS:-3} iters=${ITERS:-20}
sizes=${SIZES:-8 65536 1048576 16777216}
braidrun=$build/tools/braidrun bench=$build/bench/braid-bench
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

# where rate candidate braidrun-args...: one run over every size.
one() {
  local where=$1 r=$2 cand=$3
  shift 3
  for s in $sizes; do
    "$braidrun" "$@" "$bench" -b "$s" -e "$s" -n "$iters" -w 3 -i 0 -c 0 \
        --csv --algo "$cand" 2>/dev/null |
      sed -n "s/^\[0\] allreduce,2,\([0-9]*\),[^,]*,f32,sum,[^,]*,out-of-place,\([0-9.]*\),.*/$where $r $cand \1 \2/p"
  done
}

for ((k = 1; k <= rounds; k++)); do
  one same-host - oneshot@shm --netns switch -n 2 --ranks-per-host 2
  one same-host - ring@shm --netns switch -n 2 --ranks-per-host 2
  one same-host - ring@ucx --netns switch -n 2 --ranks-per-host 2
  one two-hosts none ring@ucx --netns switch -n 2
  one two-hosts "$rate" ring@ucx --netns switch -n 2 --link-rate "$rate"
done >"$raw"
{
  echo "where,rate,candidate,bytes,time_us"
  sort -k1,1 -k2,2 -k3,3 -k4,4n -k5,5g "$raw" |
    awk '{ k = $1 "," $2 "," $3 "," $4; v[k, ++c[k]] = $5; if (!(k in o)) { o[k] = 1; keys[++nk] = k } }
         END { for (i = 1; i <= nk; i++) { k = keys[i]; m = c[k];
                 print k "," (m % 2 ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2) } }'
} >"$out"
