#!/usr/bin/env bash
# braidrun fails a job one of whose ranks exits -- with status 0 too --
# while a braid communicator of its is still open (braid_init without
# braid_finalize), naming that rank, as mpirun does; a job whose ranks all
# finalize, or that never used braid, still exits 0.
#
# usage: test_finalize.sh BRAIDRUN EARLY_EXIT
set -u
BRAIDRUN=$1 PROG=$2
failures=0
err=$(mktemp) || exit 2
trap 'rm -f "$err"' EXIT

# expect DESCRIPTION RC_OK(0|1) GREP... -- braidrun args
expect() {
  local what=$1 want_ok=$2
  shift 2
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  timeout 120 "$BRAIDRUN" -t 10 -g 15 "$@" >/dev/null 2>"$err"
  local rc=$?
  local ok=1
  if [ "$want_ok" = 1 ]; then [ $rc -eq 0 ] || ok=0; else [ $rc -ne 0 ] && [ $rc -ne 124 ] || ok=0; fi
  for p in "${pats[@]}"; do grep -q -- "$p" "$err" || ok=0; done
  if [ $ok != 1 ]; then
    echo "FAIL: $what (exit $rc); braidrun's stderr:"
    cat "$err"
    failures=$((failures + 1))
  fi
}

expect "all ranks finalize" 1 -- -n 3 "$PROG" none
grep -q "without braid_finalize" "$err" && { echo "FAIL: finalized ranks blamed"; failures=$((failures + 1)); }
expect "not a braid program" 1 -- -n 2 true
expect "rank 1 exits 0 without braid_finalize" 0 \
  "braidrun: rank 1 exited with status 0 without braid_finalize" \
  "braidrun: rank 1 failed first" -- -n 3 "$PROG" one
expect "no rank finalizes" 0 "exited with status 0 without braid_finalize" \
  "failed first" -- -n 3 "$PROG" all

[ $failures -eq 0 ] && echo "test_finalize: ok"
[ $failures -eq 0 ]
