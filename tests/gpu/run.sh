#!/usr/bin/env bash
# The GPU checks of braid, in one go, on a machine with an NVIDIA GPU:
#   1. configure and build with -Dcuda=enabled (build-gpu/),
#   2. the CUDA reduction kernels against the CPU kernels,
#   3. the NCCL plugin's tests (probe, stub-library error paths),
#   4. every collective, dtype and op on device memory through the plain
#      API, on 1, 2 and 4 ranks (and one rank per GPU where there are
#      several), a split communicator included,
#   5. the stream-ordered API (braid/cuda.h),
#   6. a rank killed mid-collective (plain and stream-ordered): every
#      survivor must report the lost peer within BRAID_TIMEOUT,
#   7. braid-bench -M cuda from 8 B to 256 MiB, and NCCL's own all-reduce
#      measured the same way (tests/gpu/nccl_bench.c), side by side.
# Ranks that share one GPU run through tests/gpu/per_rank.sh (each claims a
# host of its own, so NCCL connects them over sockets: correctness, not
# speed).  Logs go to $LOG_DIR (default: $OUT if set, else
# build-gpu/gpu-logs).  Prints PASS/FAIL per step and exits non-zero if any
# step failed.  Should finish in well under 5 minutes.
#
# usage: tests/gpu/run.sh   (from anywhere inside the repository)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
LOG_DIR=${LOG_DIR:-${OUT:-$BUILD/gpu-logs}}
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-30}
KILL_TIMEOUT=15
START=$SECONDS
FAILED=()
mkdir -p "$LOG_DIR"

say() { printf '[%4ds] %s\n' $((SECONDS - START)) "$*"; }

# step NAME LIMIT_S COMMAND...: runs it (a program or a function of this
# script) with a time limit, its output in $LOG_DIR/NAME.log (the last
# lines shown on failure).
step() {
    local name=$1 limit=$2 rc=0
    shift 2
    say "$name ..."
    timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" \
        >"$LOG_DIR/$name.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        say "PASS $name"
    else
        say "FAIL $name (exit $rc; last lines of $LOG_DIR/$name.log:)"
        tail -n 25 "$LOG_DIR/$name.log" | sed 's/^/    /'
        FAILED+=("$name")
    fi
    return 0
}

say "machine: $(nproc) cores; $(command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader |
    paste -sd';' || echo 'nvidia-smi not found')"
NGPU=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
[ "$NGPU" -ge 1 ] || NGPU=1

# 1. build
if [ ! -f "$BUILD/build.ninja" ]; then
    step configure 120 meson setup "$BUILD" "$ROOT" -Dcuda=enabled
else
    step configure 120 meson configure "$BUILD" -Dcuda=enabled
fi
step build 240 ninja -C "$BUILD"
if [ ${#FAILED[@]} -ne 0 ]; then
    say "cannot build: stopping"
    exit 1
fi
export RUN=$BUILD/tools/braidrun GPU=$BUILD/tests/gpu BUILD NGPU KILL_TIMEOUT
export PER_RANK=$ROOT/tests/gpu/per_rank.sh
info=$("$BUILD/tools/braid-info")
grep -E '^(plugin +version|nccl) ' <<<"$info" | sed 's/^/    /'
if ! grep -qE '^nccl +[^ ]+ +available' <<<"$info"; then
    say "the nccl plugin is not available here (see its reason above): the"
    say "GPU checks need a CUDA device, its driver and NCCL; stopping"
    exit 1
fi

# job N PROGRAM ARGS...: N ranks under braidrun (options in RUN_OPTS), one
# per GPU while there are enough, else sharing through per_rank.sh.
job() {
    local n=$1
    shift
    # shellcheck disable=SC2086 # RUN_OPTS holds several words on purpose
    if [ "$n" -le "$NGPU" ]; then
        "$RUN" -n "$n" ${RUN_OPTS:-} "$@"
    else
        "$RUN" -n "$n" ${RUN_OPTS:-} "$PER_RANK" "$@"
    fi
}
export -f job

# 2-3. single-process tests: kernels, stubs, probe
step kernels-and-units 120 meson test -C "$BUILD" --no-rebuild --print-errorlogs \
    cuda-kernels nccl-probe nccl-backend devptr-stub route

# 4. collectives on device memory
for n in 1 2 4; do
    step "colls-n$n" 240 job "$n" "$GPU/test_nccl_colls"
done
if [ "$NGPU" -ge 2 ] && [ "$NGPU" -ne 2 ] && [ "$NGPU" -ne 4 ]; then
    step "colls-n$NGPU-one-per-gpu" 240 job "$NGPU" "$GPU/test_nccl_colls" --quick
fi

# 5. stream-ordered API
for n in 1 2 4; do
    step "stream-n$n" 120 job "$n" "$GPU/test_nccl_stream"
done

# 6. a killed rank: 2 survivors of 3 must each print OK
kill_check() {
    local out rc=0
    out=$(BRAID_TIMEOUT=$KILL_TIMEOUT RUN_OPTS="--grace 60" \
          job 3 "$GPU/test_nccl_kill" "$@" 2>&1) || rc=$?
    echo "$out"
    echo "braidrun exit status: $rc (the killed rank's)"
    [ "$(grep -c ': OK: ' <<<"$out")" -eq 2 ] && ! grep -q ': BAD: ' <<<"$out"
}
export -f kill_check
step kill-plain 120 kill_check
step kill-stream 120 kill_check --stream

# 7. braid-bench on device memory next to NCCL's own numbers
bench() {
    echo "## braid-bench -M cuda (plain API: the call returns with the result)"
    job 2 "$BUILD/bench/braid-bench" -M cuda -b 8 -e 256M -f 4 -n 10 -w 3 -i 0
    echo
    echo "## NCCL directly (ncclAllReduce + cudaStreamSynchronize)"
    job 2 "$GPU/nccl_bench" -b 8 -e 256M -f 4 -n 10 -w 3
}
export -f bench
step bench 240 bench
sed 's/^\[0\] //' "$LOG_DIR/bench.log" | grep -v '^\[1\]' | sed 's/^/    /'

say "done in $((SECONDS - START)) s; logs in $LOG_DIR"
if [ ${#FAILED[@]} -ne 0 ]; then
    say "FAILED: ${FAILED[*]}"
    exit 1
fi
say "all GPU checks passed"
