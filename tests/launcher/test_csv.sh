#!/bin/sh
# Output for scripts: braidrun --prefix none passes the ranks' lines as they
# are, so braid-bench --csv on stdout is clean CSV; braid-bench --csv FILE
# writes the CSV into FILE next to the usual table; bad values are refused.
#   test_csv.sh BRAIDRUN BRAID_BENCH
set -u
braidrun=$1 bench=$2
tmp=$(mktemp -d /tmp/braid-csv-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
header="coll,nranks,size,count,type,redop,algo,placement,time_us,algbw_gbps,busbw_gbps,wrong,iqm_us"
fail() { echo "FAIL: $*"; exit 1; }

"$braidrun" -n 2 --prefix none "$bench" -b 8 -e 64 -f 8 -n 2 -w 1 --csv \
  > "$tmp/out" || fail "braidrun --prefix none braid-bench --csv exited $?"
[ "$(head -n1 "$tmp/out")" = "$header" ] ||
  fail "first line is not the CSV header: $(head -n1 "$tmp/out")"
# 2 sizes x 2 placements, 13 fields each, nothing else.
[ "$(wc -l < "$tmp/out")" -eq 5 ] || fail "expected 5 lines:
$(cat "$tmp/out")"
awk -F, 'NR > 1 && (NF != 13 || $2 != 2) { exit 1 }' "$tmp/out" ||
  fail "a row is not 13 fields of a 2-rank run"

"$braidrun" -n 2 "$bench" -b 8 -e 64 -f 8 -n 2 -w 1 --csv "$tmp/rows.csv" \
  > "$tmp/table" || fail "braid-bench --csv FILE exited $?"
[ "$(head -n1 "$tmp/rows.csv")" = "$header" ] || fail "FILE has no header"
[ "$(wc -l < "$tmp/rows.csv")" -eq 5 ] || fail "FILE: expected 5 lines"
grep -q '^\[0\] # Wrong values: 0' "$tmp/table" ||
  fail "the table is not on stdout with --csv FILE"

"$braidrun" -n 2 "$bench" -b 8 -e 8 --csv /nonexistent/dir/x.csv \
  2> "$tmp/err" >/dev/null && fail "an unwritable --csv FILE was accepted"
grep -q "braid-bench: --csv '/nonexistent/dir/x.csv': No such file" \
  "$tmp/err" || fail "no message for an unwritable --csv FILE"
"$braidrun" -n 1 --prefix bogus true 2> "$tmp/err"
[ $? -eq 2 ] || fail "--prefix bogus: expected exit status 2"
grep -q "braidrun: --prefix='bogus': expected 'rank' or 'none'" "$tmp/err" ||
  fail "--prefix bogus: no message"
echo "csv: ok"
