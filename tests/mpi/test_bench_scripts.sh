#!/usr/bin/env bash
# bench/compare.sh and bench/rounds.sh, run small: each must print a braid
# time, an Open MPI time and their ratio for the size asked.
#
# usage: test_bench_scripts.sh SOURCE_ROOT BUILD_DIR
set -u
src=$1 build=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$(SIZES=8 CANDS="auto oneshot@shm" ITERS=5 bash "$src/bench/compare.sh" \
        "$build" 2 2>&1)
echo "$out"
echo "$out" | grep -Eq '^2 +8 +MPI +[0-9]+\.[0-9]+' ||
  fail "compare.sh: no MPI row for 2 ranks, 8 B"
echo "$out" | grep -Eq '^2 +8 +auto:[a-z]+@[a-z]+ +[0-9]+\.[0-9]+ [0-9.]+x' ||
  fail "compare.sh: no auto row with a ratio"
echo "$out" | grep -Eq '^2 +8 +oneshot@shm +[0-9]+\.[0-9]+ [0-9.]+x' ||
  fail "compare.sh: no oneshot@shm row with a ratio"

out=$(ITERS=50 bash "$src/bench/rounds.sh" "$build" 2 8 2 batch 2>&1)
echo "$out"
[ "$(echo "$out" | grep -Ec '^round [12]: braid [0-9.]+ us \([a-z]+@[a-z]+\), Open MPI [0-9.]+ us$')" -eq 2 ] ||
  fail "rounds.sh: want 2 rounds with both times"
echo "$out" | grep -Eq '^2 ranks, 8 B, batch: median braid [0-9.]+ us, Open MPI [0-9.]+ us: [0-9.]+x$' ||
  fail "rounds.sh: no median line"

[ "$failures" -eq 0 ] && echo "bench scripts: ok"
exit $((failures > 0))
