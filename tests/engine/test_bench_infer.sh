#!/bin/sh
# bench/infer.sh, run small (tiny preset, one round, two candidates): the
# table must have the 1-rank row, the dispatcher's row and one per forced
# candidate, each with figures.
# usage: test_bench_infer.sh SOURCE_ROOT BUILD_DIR
set -u
out=$(PRESET=tiny PROMPT=8 GEN=4 STREAM_SIZE=64M CANDIDATES="oneshot@shm ring@ucx" \
      bash "$1/bench/infer.sh" "$2" 1 2>&1)
echo "$out"
fails=0
row() { echo "$out" | grep -Eq "$1" || { echo "FAIL: no row matching $1"; fails=$((fails + 1)); }; }
row '^\| 1 \| dispatcher \| - \| [0-9.]+ \| [0-9.]+ \|'
row '^\| 2 \| dispatcher \| [a-z]+@[a-z]+ 256 B \| [0-9.]+ \| [0-9.]+ \([0-9.]+x\) \|'
row '^\| 2 \| forced \| oneshot@shm 256 B \|'
row '^\| 2 \| forced \| ring@ucx 256 B \|'
row '^one-thread streaming read: median [0-9.]+ GB/s'
[ $fails -eq 0 ]
