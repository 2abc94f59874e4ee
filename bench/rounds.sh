#!/usr/bin/env bash
# Alternated rounds of braid's automatic choice against Open MPI's
# MPI_Allreduce at one size: R rounds, each one braid-bench run then one
# mpi-allreduce-bench run, so that both see the same machine; prints every
# round and the medians.  For small sizes on an oversubscribed host, where
# one run of either swings by 2x from run to run (Open MPI's 8-byte time on
# 4 ranks here is either ~2.3 or ~4 us).
#   bench/rounds.sh BUILD_DIR RANKS [SIZE=8] [ROUNDS=5] [TIMING=percall]
#   ITERS=3000 (calls per run; -n of both benchmarks)
set -uo pipefail
build=${1:?usage: rounds.sh BUILD_DIR RANKS [SIZE] [ROUNDS] [percall|batch]}
n=${2:?usage: rounds.sh BUILD_DIR RANKS [SIZE] [ROUNDS] [percall|batch]}
size=${3:-8} rounds=${4:-5} timing=${5:-percall} iters=${ITERS:-3000}
bench=$build/bench/braid-bench braidrun=$build/tools/braidrun
mpibench=$build/bench/mpi-allreduce-bench
[ -x "$mpibench" ] || { echo "no $mpibench (Open MPI not found at build time)"; exit 1; }

median() { sort -n | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
bs=() ms=()
for ((r = 1; r <= rounds; r++)); do
  b=$("$braidrun" -n "$n" "$bench" -b "$size" -e "$size" -n "$iters" \
        -w $((iters / 10)) -c 0 -i 0 -t "$timing" 2>/dev/null |
      awk -v s="$size" '$2 == s { print $7, $6 }')
  m=$(mpirun --allow-run-as-root --oversubscribe -np "$n" "$mpibench" \
        -b "$size" -e "$size" -n "$iters" -w $((iters / 10)) -t "$timing" \
        2>/dev/null | awk -v s="$size" '$1 == s { print $3 }')
  echo "round $r: braid ${b% *} us (${b#* }), Open MPI ${m:-?} us"
  bs+=("${b%% *}") ms+=("$m")
done
mb=$(printf '%s\n' "${bs[@]}" | median)
mm=$(printf '%s\n' "${ms[@]}" | median)
awk -v n="$n" -v s="$size" -v t="$timing" -v b="$mb" -v m="$mm" 'BEGIN {
  printf "%d ranks, %d B, %s: median braid %.2f us, Open MPI %.2f us: %.2fx\n",
         n, s, t, b, m, m / b }'
