#!/usr/bin/env bash
# braidrun --grace: when a rank fails, the others get that long to exit on
# their own (and report) before SIGTERM; without it they are terminated at
# once.  Either way braidrun exits with the failed rank's status and names
# it as the rank that failed first.
#
# usage: test_grace.sh BRAIDRUN
set -u
BRAIDRUN=$1
failures=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-grace-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

check() { # description, condition...
    local what=$1
    shift
    if ! "$@"; then
        echo "FAIL: $what"
        echo "---- stderr:"; cat "$tmp/err"; echo "----"
        failures=$((failures + 1))
    fi
}
has() { grep -q -- "$1" "$tmp/err"; }
hasnt() { ! grep -q -- "$1" "$tmp/err"; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

# run ELAPSED_VAR RC_VAR braidrun-args...
run() {
    local t0 t1
    t0=$(date +%s.%N)
    "$BRAIDRUN" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    t1=$(date +%s.%N)
    elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
}

VICTIM='if [ "$BRAID_RANK" = 1 ]; then kill -9 $$; fi; '

# The survivors report within the grace: their exits are theirs.
run -g 5 -n 3 /bin/sh -c "$VICTIM"'sleep 0.5; echo "rank $BRAID_RANK saw it"; exit 3'
check "grace: exit status of the victim (137), got $rc" test $rc -eq 137
check "grace: victim named" has "braidrun: rank 1 killed by signal 9"
check "grace: victim named first" has "braidrun: rank 1 failed first"
check "grace: rank 0 exited on its own" has "braidrun: rank 0 exited with status 3"
check "grace: rank 2 exited on its own" has "braidrun: rank 2 exited with status 3"
check "grace: 3 of 3 failed" has "3 of 3 ranks failed"
check "grace: survivors' output kept" grep -q "\[2\] rank 2 saw it" "$tmp/out"
check "grace: no waiting past the last exit ($elapsed s)" lt "$elapsed" 4

# Survivors that do not exit are terminated when the grace is over.
run -g 1 -n 3 /bin/sh -c "$VICTIM"'exec sleep 20'
check "grace over: exit status 137, got $rc" test $rc -eq 137
check "grace over: said so" has "grace of 1 s over"
check "grace over: after the grace ($elapsed s)" lt 0.9 "$elapsed"
check "grace over: not much later ($elapsed s)" lt "$elapsed" 4
check "grace over: the terminated are not failures" has "1 of 3 ranks failed"

# Default: no grace, the others are terminated at once.
run -n 3 /bin/sh -c "$VICTIM"'sleep 2; exit 3'
check "no grace: exit status 137, got $rc" test $rc -eq 137
check "no grace: survivors terminated, not exited" hasnt "exited with status 3"
check "no grace: prompt ($elapsed s)" lt "$elapsed" 1.8

# Bad values.
"$BRAIDRUN" --grace -1 -n 1 true 2>/dev/null
rc=$?
check "--grace -1 is a usage error (2), got $rc" test $rc -eq 2

if [ $failures -eq 0 ]; then
    echo "braidrun --grace: all checks passed"
fi
[ $failures -eq 0 ]
