#!/bin/sh
# braid-train's scaling figures: tokens/s on 1 and 2 ranks (one OpenBLAS
# thread each), speedup and scaling efficiency with the gradient
# all-reduce overlapped with the backward pass and with --no-overlap, the
# all-reduce candidate braid picks per bucket size, and the share of the
# step spent waiting for it.
#
#   bench/train.sh [BUILD]                 (default build/)
#
# Environment (defaults in brackets):
#   PRESET [d12]  MICRO [4] sequences per rank and step  SEQ [256] tokens
#   STEPS [5] per trial (the first is not timed)  ROUNDS [3]
#   RANKS [1,2]   BUCKET_MB [4]   DATA [README.md and docs/ of this repo]
#
# One braidrun session runs every trial (braid-train --scaling): each rank
# count, with and without overlap, in alternating rounds; the table shows
# the medians.  Weak scaling, as the published figure it compares with
# (8741 tok/s on one box, 68079 on eight: 97.4%): every rank trains MICRO x
# SEQ tokens per step, so N ranks do N times the work of one.  The load of
# the machine (uptime) is printed before and after: on a shared host,
# rerun it on a quiet one before quoting figures.  d12 takes about 9 s a
# step per rank on one core of the 2-core development host.
set -eu

build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
PRESET=${PRESET:-d12} MICRO=${MICRO:-4} SEQ=${SEQ:-256} STEPS=${STEPS:-5}
ROUNDS=${ROUNDS:-3} RANKS=${RANKS:-1,2} BUCKET_MB=${BUCKET_MB:-4}
nmax=$(echo "$RANKS" | tr ',' '\n' | sort -n | tail -n1)

# a small real corpus: this repository's prose, one directory
if [ -z "${DATA:-}" ]; then
    DATA=$(mktemp -d "${TMPDIR:-/tmp}/braid-train-bench.XXXXXX")
    trap 'rm -rf "$DATA"' EXIT
    cp "$root/README.md" "$root"/docs/*.md "$DATA"/
fi

echo "host $(hostname), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "load before: $(cat /proc/loadavg)"
echo "command: braidrun -n $nmax braid-train --preset $PRESET --seq $SEQ" \
     "--micro $MICRO --steps $STEPS --scaling $RANKS --compare-overlap" \
     "--rounds $ROUNDS --bucket-mb $BUCKET_MB --threads 1 --val-frac 0"
# BRAID_TIMEOUT: a rank outside a trial waits one step at a time
BRAID_TIMEOUT=${BRAID_TIMEOUT:-600} \
"$build/tools/braidrun" -n "$nmax" "$build/engine/train/braid-train" \
    --data "$DATA" --preset "$PRESET" --seq "$SEQ" --micro "$MICRO" \
    --steps "$STEPS" --scaling "$RANKS" --compare-overlap --rounds "$ROUNDS" \
    --bucket-mb "$BUCKET_MB" --threads 1 --val-frac 0
echo "load after: $(cat /proc/loadavg)"
