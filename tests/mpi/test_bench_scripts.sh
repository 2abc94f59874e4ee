#!/usr/bin/env bash
# bench/compare.sh and bench/rounds.sh, run small: each must print braid's
# and Open MPI's figures for the sizes asked.
#
# usage: test_bench_scripts.sh SOURCE_ROOT BUILD_DIR
set -u
src=$1 build=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# compare.sh's smoke run: every table, with a braid, an Open MPI and (with
# torch) a Gloo figure, and the charts.
tmp=$(mktemp -d /tmp/braid-compare-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CALIB_DIR="$tmp/cache"
out=$(QUICK=1 OUT="$tmp/out" bash "$src/bench/compare.sh" "$build" 2>&1)
echo "$out"
num='[0-9]+\.[0-9]+'
echo "$out" | grep -Eq "^  allreduce +2 +8 +$num +$num +$num +$num +$num +" ||
  fail "compare.sh: no bus-bandwidth row with auto, alone, tuned, best and Open MPI for 2 ranks, 8 B"
if /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  echo "$out" | grep -Eq "^  allreduce +2 +4K +$num +$num +$num +$num +$num +$num +$num"x ||
    fail "compare.sh: no Gloo figure and ratio at 4 KiB"
fi
echo "$out" | grep -Eq "^  allreduce +2 +8 +[a-z]+@[a-z]+ +$num +[a-z]+@[a-z]+ +$num +[-+][0-9]+% ?.? +[a-z]+@[a-z]+ +$num +[-+][0-9]+% ?.? +[a-z]+@[a-z]+ +$num +[-+][0-9]+%" ||
  fail "compare.sh: no oracle-gap row with auto, tuned and model at 8 B"
echo "$out" | grep -Eq "^  model: largest gap [-+][0-9]+%; sizes over 10%: [0-9]+" ||
  fail "compare.sh: no summary of the model series (BRAID_ONLINE=off)"
echo "$out" | grep -Eq "^  auto paired \(the median over rounds of its time over the best's in the same round\): largest [-+][0-9]+%; sizes over 10%: [0-9]+" ||
  fail "compare.sh: no paired summary of the automatic choice"
echo "$out" | grep -Eq "^  reduce_scatter +2 +64K +" ||
  fail "compare.sh: no reduce_scatter row"
echo "$out" | grep -Eq "^  allreduce +2 +oneshot@shm +[0-9]+% +[-+][0-9]+% +4$" ||
  fail "compare.sh: no model error for oneshot@shm over its 4 sizes"
echo "$out" | grep -q "^### Ranking: pairs measured more than 20% apart" ||
  fail "compare.sh: no ranking check"
[ -s "$tmp/out/png/allreduce-n2.png" ] || fail "compare.sh: no chart"
[ -s "$tmp/out/alone-n2-r1-allreduce.csv" ] ||
  fail "compare.sh: the automatic choice was not timed alone"
# Alone and Open MPI take turns size by size, a job each: one row per size
# of the smoke run's all-reduce (8, 128, 2048, 4096 B) under one header.
for f in alone mpi; do
  sizes=$(awk -F, 'NR > 1 { printf "%s ", $3 }' "$tmp/out/$f-n2-r1-allreduce.csv" 2>/dev/null)
  [ "$sizes" = "8 128 2048 4096 " ] ||
    fail "compare.sh: $f's all-reduce rows are for sizes '$sizes', not 8 128 2048 4096"
done
[ -s "$tmp/out/tune-n2.txt" ] || fail "compare.sh: no tuning table"

out=$(ITERS=50 bash "$src/bench/rounds.sh" "$build" 2 8 2 batch 2>&1)
echo "$out"
[ "$(echo "$out" | grep -Ec '^round [12]: braid [0-9.]+ us \([a-z]+@[a-z]+\), Open MPI [0-9.]+ us$')" -eq 2 ] ||
  fail "rounds.sh: want 2 rounds with both times"
echo "$out" | grep -Eq '^2 ranks, 8 B, batch: median braid [0-9.]+ us, Open MPI [0-9.]+ us: [0-9.]+x$' ||
  fail "rounds.sh: no median line"

[ "$failures" -eq 0 ] && echo "bench scripts: ok"
exit $((failures > 0))
