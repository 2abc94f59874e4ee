#!/usr/bin/env bash
# Runs `meson test` in build dir $1 (extra arguments passed on) and ends with
# the line "N passed, N failed[, N skipped]".  Exits non-zero on any failure.
#
# One failure is the checker's, not the test's: at exit, GCC 12's
# LeakSanitizer (Debian 12) now and then reads a garbage dynamic-TLS range
# of a dlopen'd library and its tracer dies with "Tracer caught signal 11"
# (LSAN_OPTIONS=use_tls=0 avoids it but reports every buffer held only
# through a thread-local pointer as a leak).  A test that failed with that
# line and no other sanitizer report runs once more, by name, and counts by
# its second result; the rerun is printed.
set -u
build=$1; shift
log=$(mktemp)
meson test -C "$build" --print-errorlogs "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
count() { awk -v k="$1" '$1 == k":" { print $2; found=1 } END { if (!found) print 0 }' "$log" | tail -n1; }
ok=$(count Ok); xfail=$(count "Expected"); fail=$(count Fail)
upass=$(count "Unexpected"); tout=$(count Timeout); skip=$(count Skipped)
rm -f "$log"

# Names of failed tests whose output holds the tracer crash and nothing else
# a sanitizer says.
tracer_crashes() {
  python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("result") != "FAIL":
        continue
    out = (t.get("stdout") or "") + (t.get("stderr") or "")
    if "Tracer caught signal" not in out:
        continue
    if any(s in out for s in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                              "runtime error:", "WARNING: ThreadSanitizer")):
        continue
    print(t["name"].split(" / ")[-1])
PY
}
if [ "$rc" -ne 0 ] && [ -f "$build/meson-logs/testlog.json" ]; then
  again=$(tracer_crashes)
  if [ -n "$again" ] && [ "$(echo "$again" | wc -l)" -eq "$fail" ]; then
    echo "meson-test: LeakSanitizer's tracer crashed in: $(echo $again); running them once more"
    rlog=$(mktemp)
    # shellcheck disable=SC2086
    meson test -C "$build" --no-rebuild --print-errorlogs $again 2>&1 | tee "$rlog"
    rrc=${PIPESTATUS[0]}
    rok=$(awk '$1 == "Ok:" { print $2 }' "$rlog" | tail -n1)
    rm -f "$rlog"
    ok=$((ok + ${rok:-0})); fail=$((fail - ${rok:-0}))
    [ "$rrc" -eq 0 ] && [ "$tout" -eq 0 ] && rc=0
  fi
fi
passed=$((ok))
failed=$((fail + tout))
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "$passed passed, $failed failed, $skip skipped"
exit "$rc"
