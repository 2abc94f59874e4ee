#!/bin/sh
# Link calibration end to end: measured on first use and cached, read back
# the same on every rank, refreshed by force, a damaged cache measured
# again, figures the user pinned left alone, and every way to get
# BRAID_CALIBRATE wrong refused on every rank.
#   test_calib.sh BRAIDRUN CALIB_RANK
set -u
braidrun=$1 prog=$2
tmp=$(mktemp -d /tmp/braid-calib-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CALIB_DIR="$tmp/cache"
unset BRAID_CALIBRATE
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
run() { # N OUTFILE [args]: prints nothing, returns the exit status
  n=$1 out=$2; shift 2
  "$braidrun" -n "$n" --prefix none "$prog" "$@" >"$out" 2>"$out.err"
}
figs() { grep "^$1 figures:" "$2"; }

# 1. First use measures and writes the cache; every rank agrees (the
#    program checks) -- on the world and on a split of another shape.
run 3 "$tmp/a" --split || fail "first run: $(cat "$tmp/a" "$tmp/a.err")"
grep -q "^world why: link figures: measured at creation" "$tmp/a" ||
  fail "first run did not measure: $(cat "$tmp/a")"
grep -q "^even why: link figures: measured at creation" "$tmp/a" ||
  fail "the split (2 ranks) did not measure its own shape: $(cat "$tmp/a")"
[ "$(ls "$BRAID_CALIB_DIR"/calib-*.txt 2>/dev/null | wc -l)" -eq 2 ] ||
  fail "expected 2 cache files (3 ranks, 2 ranks): $(ls "$BRAID_CALIB_DIR")"
grep -q '^tl shm ' "$BRAID_CALIB_DIR"/calib-*.txt ||
  fail "no shm entry in the cache"
# Each path: latencies, the in-cache bandwidth and size, the out-of-cache
# bandwidth and size (larger); the selector was given the latter.
num='[0-9][0-9.e+-]*'
grep -Eq "^tl shm [^ ]+ sr( $num){6} put( $num){6}" "$BRAID_CALIB_DIR"/calib-*.txt ||
  fail "shm's cache entry lacks the out-of-cache figures: $(cat "$BRAID_CALIB_DIR"/calib-*.txt)"
grep '^world out: shm ' "$tmp/a" | awk '{ exit !($5 > 0 && $7 > 0) }' ||
  fail "the selector has no out-of-cache figures for shm: $(cat "$tmp/a")"
# A message's overhead: the pair latency over the fastest path's, so the
# fastest path has none and none is negative; ucx's (a TCP stack at both
# ends) is above shm's (a copy and a flag).
grep '^world msg: ' "$tmp/a" | awk '{
    zero = 0; bad = 0
    for (i = 3; i <= NF; i += 3) {
      for (j = i + 1; j <= i + 2; j++) { if ($j < 0) bad = 1; if ($j == 0) zero = 1 }
      m[$i] = $(i + 2)
    }
    exit !(!bad && zero && m["ucx"] > m["shm"]) }' ||
  fail "message overheads: $(grep '^world msg: ' "$tmp/a")"

# A put's bandwidth is one rank's copy measured alone; where the host has
# more ranks than cores, the selector gets the cores' share of it
# (cores / ranks), and where every rank has a core, all of it.
world_file=$(grep -l 'ranks=3 ' "$BRAID_CALIB_DIR"/calib-*.txt)
raw=$(awk '$1 == "tl" && $2 == "shm" { for (i = 3; i <= NF; i++) if ($i == "put") { print $(i + 3); exit } }' "$world_file")
ncpu=$(getconf _NPROCESSORS_ONLN)
figs world "$tmp/a" | awk -v raw="$raw" -v ncpu="$ncpu" '{
    i = 3; while ($i ~ /^[a-z]+$/) i++   # shm first: alpha beta put_alpha put_beta
    share = ncpu < 3 ? ncpu / 3 : 1; want = raw * share; got = $(i + 3)
    d = got - want; if (d < 0) d = -d
    exit !(raw > 0 && d <= 1e-4 * want) }' ||
  fail "shm's put bandwidth is not the cores' share ($ncpu cores, 3 ranks) of the measured $raw: $(figs world "$tmp/a")"
# The get path alike, its out-of-cache point ("out: shm sr X put Y get Z").
raw_get=$(awk '$1 == "tl" && $2 == "shm" { for (i = 3; i <= NF; i++) if ($i == "get") { print $(i + 5); exit } }' "$world_file")
if [ -n "$raw_get" ]; then
  grep '^world out: shm ' "$tmp/a" | awk -v raw="$raw_get" -v ncpu="$ncpu" '{
      share = ncpu < 3 ? ncpu / 3 : 1; want = raw * share; got = $9
      d = got - want; if (d < 0) d = -d
      exit !(raw > 0 && d <= 1e-4 * want) }' ||
    fail "shm's out-of-cache get is not the cores' share of the measured $raw_get: $(grep '^world out:' "$tmp/a")"
  # The same reads of braid_mem_alloc's memory (mget), measured wherever
  # get is: in the caches and beyond them, each the cores' share.
  mget=$(awk '$1 == "tl" && $2 == "shm" { for (i = 3; i <= NF; i++) if ($i == "mget") { print $(i + 3), $(i + 5); exit } }' "$world_file")
  [ -n "$mget" ] || fail "the cache has a get path for shm and no mget: $(cat "$world_file")"
  grep '^world out: shm ' "$tmp/a" | awk -v raw="$mget" -v ncpu="$ncpu" '{
      split(raw, m, " "); share = ncpu < 3 ? ncpu / 3 : 1
      bad = 0
      for (k = 1; k <= 2; k++) {
        want = m[k] * share; got = k == 1 ? $15 : $13
        d = got - want; if (d < 0) d = -d
        if (!(m[k] > 0 && d <= 1e-4 * want)) bad = 1
      }
      exit bad }' ||
    fail "shm's mget figures are not the cores' share of the measured $mget: $(grep '^world out:' "$tmp/a")"
fi

# 2. The second run reads the cache: the same figures, bit for bit.
run 3 "$tmp/b" --split || fail "second run: $(cat "$tmp/b" "$tmp/b.err")"
grep -q "^world why: link figures: from the calibration cache $BRAID_CALIB_DIR/calib-" "$tmp/b" ||
  fail "second run did not read the cache: $(cat "$tmp/b")"
[ "$(figs world "$tmp/a")" = "$(figs world "$tmp/b")" ] ||
  fail "cached figures differ: $(figs world "$tmp/a") / $(figs world "$tmp/b")"
[ "$(figs even "$tmp/a")" = "$(figs even "$tmp/b")" ] ||
  fail "the split's cached figures differ"
[ "$(grep '^world out:' "$tmp/a")" = "$(grep '^world out:' "$tmp/b")" ] ||
  fail "cached out-of-cache figures differ: $(grep out: "$tmp/a" "$tmp/b")"

# 3. force measures again and rewrites the file.
before=$(grep '^measured' "$world_file")
sleep 1
BRAID_CALIBRATE=force run 3 "$tmp/c" || fail "force: $(cat "$tmp/c.err")"
grep -q "^world why: link figures: measured at creation in .* (BRAID_CALIBRATE=force)" "$tmp/c" ||
  fail "force did not measure: $(cat "$tmp/c")"
[ "$before" != "$(grep '^measured' "$world_file")" ] ||
  fail "force did not rewrite $world_file"

# 4. A damaged cache is reported with its line and measured again.
sed -i 's/^reduce_gbps .*/reduce_gbps fast/' "$world_file"
run 3 "$tmp/d" || fail "damaged cache: $(cat "$tmp/d.err")"
grep -q "calib-.*\.txt:5 field 2" "$tmp/d.err" ||
  fail "no warning naming the damaged line: $(cat "$tmp/d.err")"
grep -q "^world why: link figures: measured at creation .*(the cache file could not be used)" "$tmp/d" ||
  fail "a damaged cache was not measured again: $(cat "$tmp/d")"
grep -q '^reduce_gbps [0-9]' "$world_file" || fail "the damaged file was not rewritten"

# 4b. A path in the format before the out-of-cache figures (three numbers)
#     is refused with its line and measured again.
sed -i -E 's/^(tl shm [^ ]+ sr [^ ]+ [^ ]+ [^ ]+) [^ ]+ [^ ]+ [^ ]+ /\1 /' "$world_file"
run 3 "$tmp/d2" || fail "old-format path: $(cat "$tmp/d2.err")"
grep -q "calib-.*\.txt:6 " "$tmp/d2.err" ||
  fail "no warning naming the old-format line: $(cat "$tmp/d2.err")"
grep -q "^world why: link figures: measured at creation .*(the cache file could not be used)" "$tmp/d2" ||
  fail "an old-format cache was not measured again: $(cat "$tmp/d2")"

# 5. Off: the transports' declared figures (what the shm plugin's link() declares).
BRAID_CALIBRATE=0 run 2 "$tmp/e" || fail "BRAID_CALIBRATE=0: $(cat "$tmp/e.err")"
grep -q "^world why: link figures: declared by the transports (BRAID_CALIBRATE=0)" "$tmp/e" ||
  fail "BRAID_CALIBRATE=0: $(cat "$tmp/e")"
figs world "$tmp/e" | grep -q '^world figures: shm ucx[a-z ]* 0.40000000000000002 2 ' ||
  fail "BRAID_CALIBRATE=0 did not keep shm's declared figures: $(figs world "$tmp/e")"
grep '^world msg: ' "$tmp/e" | awk '{ for (i = 3; i <= NF; i += 3) if ($(i + 1) != 0 || $(i + 2) != 0) exit 1 }' ||
  fail "BRAID_CALIBRATE=0 counted a message overhead: $(grep '^world msg: ' "$tmp/e")"

# 6. Figures the user set for a transport are not calibrated.
BRAID_UCX_GBPS=3.5 BRAID_CALIBRATE=force run 2 "$tmp/f" ||
  fail "BRAID_UCX_GBPS: $(cat "$tmp/f.err")"
grep -q "set by the user: ucx" "$tmp/f" || fail "ucx not reported as set by the user: $(cat "$tmp/f")"
figs world "$tmp/f" | awk '{ # shm: fields 5-8, ucx: 9-12 (after "shm ucx [roce]")
    i = 3; while ($i ~ /^[a-z]+$/) i++
    exit !($(i + 5) == 3.5 && $(i + 7) == 1.75) }' ||
  fail "ucx's figures are not the user's (3.5 GB/s, put 1.75): $(figs world "$tmp/f")"

# 7. A malformed value fails init with its position; different values on
#    different ranks fail every rank.
BRAID_CALIBRATE=forse run 2 "$tmp/g" --fail ||
  fail "BRAID_CALIBRATE=forse was accepted: $(cat "$tmp/g")"
[ "$(grep -c "init failed: parse error: .*BRAID_CALIBRATE='forse': unexpected character at position 3" "$tmp/g")" -eq 2 ] ||
  fail "BRAID_CALIBRATE=forse: $(cat "$tmp/g")"
run 3 "$tmp/h" --mismatch --fail ||
  fail "ranks with different BRAID_CALIBRATE were accepted: $(cat "$tmp/h")"
[ "$(grep -c "init failed: mismatch between ranks: .*rank [01]'s BRAID_CALIBRATE differs" "$tmp/h")" -eq 3 ] ||
  fail "a BRAID_CALIBRATE mismatch must fail all 3 ranks: $(cat "$tmp/h")"

[ "$failures" -eq 0 ] && echo "calib: ok"
exit $((failures > 0))
