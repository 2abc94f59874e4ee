#!/usr/bin/env bash
# Runs `meson test` in build dir $1 (extra arguments passed on) and ends with
# the line "N passed, N failed[, N skipped]".  Exits non-zero on any failure.
set -u
build=$1; shift
log=$(mktemp)
meson test -C "$build" --print-errorlogs "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
count() { awk -v k="$1" '$1 == k":" { print $2; found=1 } END { if (!found) print 0 }' "$log" | tail -n1; }
ok=$(count Ok); xfail=$(count "Expected"); fail=$(count Fail)
upass=$(count "Unexpected"); tout=$(count Timeout); skip=$(count Skipped)
rm -f "$log"
passed=$((ok))
failed=$((fail + tout))
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "$passed passed, $failed failed, $skip skipped"
exit "$rc"
