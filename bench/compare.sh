#!/usr/bin/env bash
# Side-by-side all-reduce latencies (f32 sum, out of place, median of the
# slowest rank): braid's automatic choice and each candidate, next to Open
# MPI's MPI_Allreduce measured in the same session.  Ratios in one run are
# what to read; this machine is shared and noisy.
#   bench/compare.sh BUILD_DIR [RANKS...]          (default ranks: 2 4 8)
#   SIZES="8 4096 65536 16777216" CANDS="auto oneshot@shm ring@ucx" ITERS=50
#   TIMING=batch: back-to-back batches instead of single aligned calls (both
#   benchmarks measure the same way; see braid-bench --help)
set -uo pipefail
build=${1:?usage: compare.sh BUILD_DIR [RANKS...]}; shift
ranks=${*:-2 4 8}
sizes=${SIZES:-8 4096 65536 16777216}
cands=${CANDS:-auto oneshot@shm twoshot@shm ring@shm oneshot@ucx twoshot@ucx ring@ucx}
iters=${ITERS:-50}
timing=${TIMING:-percall}
bench=$build/bench/braid-bench braidrun=$build/tools/braidrun
mpibench=$build/bench/mpi-allreduce-bench

# One size, one candidate: prints "time algo" from braid-bench's row.
braid_time() {
  local n=$1 size=$2 cand=$3 algo=()
  [ "$cand" = auto ] || algo=(--algo "$cand")
  local it=$iters
  [ "$size" -ge 4194304 ] && it=$(( iters < 10 ? iters : 10 ))
  "$braidrun" -n "$n" "$bench" -b "$size" -e "$size" -n "$it" -w 3 -c 0 \
      -i 0 -t "$timing" "${algo[@]}" 2>/dev/null |
    awk -v s="$size" '$2 == s { print $7, $6; found=1 } END { if (!found) print "-", "-" }'
}

mpi_time() {
  local n=$1 size=$2 it=$iters
  [ "$size" -ge 4194304 ] && it=$(( iters < 10 ? iters : 10 ))
  [ -x "$mpibench" ] || { echo "-"; return; }
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$mpibench" -b "$size" \
      -e "$size" -n "$it" -w 3 -t "$timing" 2>/dev/null |
    awk -v s="$size" '$1 == s { print $3 }'
}

printf '%-6s %-10s %-12s %10s %s\n' ranks size candidate "time(us)" "vs MPI"
for n in $ranks; do
  for size in $sizes; do
    m=$(mpi_time "$n" "$size"); m=${m:--}
    printf '%-6s %-10s %-12s %10s\n' "$n" "$size" "MPI" "$m"
    for cand in $cands; do
      read -r t algo < <(braid_time "$n" "$size" "$cand")
      ratio="-"
      if [ "$t" != "-" ] && [ "$m" != "-" ]; then
        ratio=$(awk -v a="$m" -v b="$t" 'BEGIN { printf "%.2fx", a / b }')
      fi
      label=$cand; [ "$cand" = auto ] && label="auto:$algo"
      printf '%-6s %-10s %-12s %10s %s\n' "$n" "$size" "$label" "$t" "$ratio"
    done
  done
done
