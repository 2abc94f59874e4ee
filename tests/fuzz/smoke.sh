#!/usr/bin/env bash
# Runs one fuzz target for a few seconds from its seed corpus (new inputs go
# to a scratch directory, never into the source tree).
# usage: smoke.sh TARGET SEED_DIR SECONDS
set -euo pipefail
target=$1 seeds=$2 secs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc=0
"$target" -max_total_time="$secs" -max_len=4096 -timeout=10 \
  -artifact_prefix="$work/" -print_final_stats=1 "$work" "$seeds" \
  > "$work/log" 2>&1 || rc=$?
tail -n 40 "$work/log"
# Any failure of the fuzzer is a test failure (never meson's 77 = skipped).
[ "$rc" -eq 0 ] || { echo "FAIL: $target exited with $rc"; exit 1; }
grep -q '^stat::number_of_executed_units' "$work/log" ||
  { echo "FAIL: fuzzer printed no final stats"; exit 1; }
