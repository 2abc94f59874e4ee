#!/usr/bin/env bash
# Alternated rounds of two braid builds at one size (an old build against a
# new one): R rounds, each one braid-bench run of A and one of B (in turn
# first), so that both see the same machine; prints every round, the
# medians, B/A and the median of the rounds' own B/A.
#   bench/ab.sh BUILD_A BUILD_B RANKS [SIZE=8] [ROUNDS=5] [TIMING=percall]
#   ITERS=3000 (calls per run)
#   STAT=median (braid-bench's time_us) or iqm (its iqm_us, the mean of the
#     middle half: resolves below the clock's step, which on some VMs is as
#     long as a small call)
#   COLL=allreduce (braid-bench -C), ALGO= a forced candidate (--algo;
#     empty: the automatic choice)
#   BENCH=PATH: one braid-bench for both builds, each run against its own
#     build's libbraid (LD_LIBRARY_PATH); for an old build whose braid-bench
#     predates iqm_us.  braid-bench uses the public API only.
set -uo pipefail
usage="usage: ab.sh BUILD_A BUILD_B RANKS [SIZE] [ROUNDS] [percall|batch]"
a=${1:?$usage} b=${2:?$usage} n=${3:?$usage}
size=${4:-8} rounds=${5:-5} timing=${6:-percall} iters=${ITERS:-3000}
stat=${STAT:-median} bench=${BENCH:-}
coll=${COLL:-allreduce} algo=()
[ -n "${ALGO:-}" ] && algo=(--algo "$ALGO")
case $stat in median) col=9 ;; iqm) col=13 ;; *) echo "ab.sh: STAT='$stat': median or iqm" >&2; exit 2 ;; esac

median() { sort -n | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
one() { # BUILD: "time algo" of one run
  local prog="$1/bench/braid-bench" env=()
  [ -n "$bench" ] && prog=$bench env=(env "LD_LIBRARY_PATH=$1/core")
  "${env[@]}" "$1/tools/braidrun" -n "$n" "$prog" -C "$coll" "${algo[@]}" \
    -b "$size" -e "$size" \
    -n "$iters" -w $((iters / 10)) -c 0 -i 0 -t "$timing" --csv 2>/dev/null |
    awk -F, -v s="$size" -v c="$col" '$3 == s && $8 == "out-of-place" { print $c, $7 }'
}
as=() bs=()
for ((r = 1; r <= rounds; r++)); do
  # Who goes first alternates, so that neither build always runs in the
  # other's wake.
  if ((r % 2)); then x=$(one "$a") y=$(one "$b"); else y=$(one "$b") x=$(one "$a"); fi
  echo "round $r: A ${x% *} us (${x#* }), B ${y% *} us (${y#* })"
  as+=("${x%% *}") bs+=("${y%% *}")
done
ma=$(printf '%s\n' "${as[@]}" | median)
mb=$(printf '%s\n' "${bs[@]}" | median)
# The median of the rounds' own B/A as well: each round's pair saw the
# same moment of the machine, so a drift over the session cancels there.
mr=$(for ((i = 0; i < ${#as[@]}; i++)); do
  awk -v a="${as[i]}" -v b="${bs[i]}" 'BEGIN { if (a > 0) printf "%.4f\n", b / a }'
done | median)
awk -v n="$n" -v s="$size" -v t="$timing" -v st="$stat" -v a="$ma" -v b="$mb" -v r="$mr" 'BEGIN {
  printf "%d ranks, %d B, %s: %s: median A %.4f us, B %.4f us: B/A %.3f, median of the rounds\047 B/A %.3f\n",
         n, s, t, st, a, b, b / a, r }'
