#!/bin/sh
# braid-tune on a tiny sweep: it writes a table the core reads, braid-info
# shows which rows decide and the dispatcher follows them; --merge keeps
# other shapes' rows; the CSV carries every candidate's estimate; a
# damaged table is refused with its line.
#   test_tune.sh BRAIDRUN BRAID_TUNE BRAID_INFO
set -u
braidrun=$1 tune=$2 info=$3
tmp=$(mktemp -d /tmp/braid-tune-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export BRAID_CALIB_DIR="$tmp/cache"
unset BRAID_ALGO BRAID_TUNE_FILE
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
table=$tmp/braid.tune

# 1. Two sizes of all-reduce and allgather, one round (three: they are
#    small), on 2 ranks.
"$braidrun" -n 2 "$tune" -C allreduce,allgather -b 8 -e 4K -f 512 -n 3 -w 1 \
    -r 1 --small-rounds 3 -o "$table" --csv "$tmp/all.csv" >"$tmp/out" 2>&1 ||
  fail "braid-tune exited $?: $(cat "$tmp/out")"
rows=$(grep -c '^allreduce 2 1 single ' "$table")
[ "$rows" -eq 2 ] || fail "expected 2 allreduce rows for 2 ranks: $(cat "$table")"
grep -q '^allgather 2 1 single 0 ' "$table" || fail "no allgather row"
grep -Eq '^allreduce 2 1 single 0 [0-9]+ [a-z]+@[a-z]+ at 8 ([a-z]+@[a-z]+=[0-9.]+ ?)+$' "$table" ||
  fail "the first row has no winner and measured times: $(cat "$table")"
grep -q ' inf [a-z]*@[a-z]* at 4096 ' "$table" || fail "the last row does not reach inf"
grep -q '^\[0\] # allreduce, 2 ranks' "$tmp/out" || fail "no table on stdout: $(cat "$tmp/out")"

# 2. The CSV: every candidate and the automatic choice, with estimates.
head -n1 "$tmp/all.csv" | grep -q '^coll,nranks,nnodes,topo,size,bytes,series,cand,time_us,estimate_us,' ||
  fail "CSV header: $(head -n1 "$tmp/all.csv")"
grep -q '^allreduce,2,1,single,8,8,oneshot@shm,oneshot@shm,[0-9.]*,[0-9.]*,' "$tmp/all.csv" ||
  fail "no oneshot@shm row with time and estimate"
grep -q '^allreduce,2,1,single,8,8,auto,[a-z]*@[a-z]*,[0-9.]*,[0-9.]*,' "$tmp/all.csv" ||
  fail "no auto row naming what it ran"
# --small-rounds 3: every row up to 256 KiB has three rounds, its time
# their median.
bad=$(awk -F, 'NR > 1 && $13 == "ok" {
    n = split($14, v, ";"); for (i = 1; i < n; i++) for (j = i + 1; j <= n; j++)
      if (v[j] + 0 < v[i] + 0) { x = v[i]; v[i] = v[j]; v[j] = x }
    if (n != 3 || v[2] != $9) print }' "$tmp/all.csv")
[ -z "$bad" ] && grep -q ',ok,' "$tmp/all.csv" ||
  fail "rows without three rounds whose median is the time: $bad"
grep -q 'median over 1 rounds (3 up to 256 KiB)' "$tmp/out" ||
  fail "the table's header does not say the rounds: $(grep median "$tmp/out")"
# On 2 ranks every all-reduce candidate gives the rank-order bits (ring
# and recdbl too), so each row names the fastest of all, no margin asked.
bad=$(awk -F, 'NR == FNR {
    if (FNR > 1 && $1 == "allreduce" && $7 ~ /@/ && $13 == "ok" &&
        (!($6 in m) || $9 + 0 < m[$6])) m[$6] = $9 + 0
    if (FNR > 1 && $1 == "allreduce" && $7 ~ /@/) t[$6, $7] = $9 + 0
    next }
  { split($0, f, " ") }
  f[1] == "allreduce" && f[8] == "at" && t[f[9], f[7]] > m[f[9]] + 0.002 {
    print f[9] ": " f[7] " " t[f[9], f[7]] " us, the fastest " m[f[9]] }' \
  "$tmp/all.csv" "$table")
[ -z "$bad" ] || fail "2-rank all-reduce rows that do not name the fastest: $bad"

# 2b. The race (--race, 16 by default): after -n 3 calls a round, the
#     automatic series and the candidates within 1.25x of the fastest take
#     turns up to 16 calls; a UCX candidate, tens of times slower than the
#     shm ones at 8 B and 4 KiB, stays at 3.
bad=$(awk -F, 'NR > 1 && $13 == "ok" && ($15 != 3 && $15 != 16 ||
    $7 == "auto" && $15 != 16 || $7 ~ /@ucx$/ && $15 != 3) {
    print $5 " " $7 ": " $15 " calls" }' "$tmp/all.csv")
[ -z "$bad" ] && grep -q ',auto,.*,16$' "$tmp/all.csv" && grep -q '@ucx,.*,3$' "$tmp/all.csv" ||
  fail "calls a round against --race 16: $bad $(cut -d, -f5,7,15 "$tmp/all.csv")"

# 3. The core reads the table: braid-info shows the rows for this
#    communicator, and its choices follow them, naming the line.
winner=$(awk '$1 == "allreduce" && $5 == 0 { print $7 }' "$table")
line=$(grep -n '^allreduce 2 1 single 0 ' "$table" | cut -d: -f1)
BRAID_TUNE_FILE=$table "$info" -n 2 >"$tmp/info" 2>&1 || fail "braid-info: $(cat "$tmp/info")"
grep -q "tuning file $table: 4 rows, 4 for this communicator:" "$tmp/info" ||
  fail "braid-info does not list the table's rows: $(cat "$tmp/info")"
grep -q "line $line *allreduce *\[0, [0-9]*) B  $winner  (measured [0-9.]* us at 8 B)" "$tmp/info" ||
  fail "braid-info does not show row $line ($winner): $(grep line "$tmp/info")"
# The selection table's row holding 8 B (half-open "from-to", from <= 8).
grep -Eq "^\[0\] +[0-8]-[0-9]+ +$winner +\(tuning file line $line \(measured [0-9.]+ us at 8 B; cost model: [a-z]+@[a-z]+\)\)" "$tmp/info" ||
  fail "the 8 B all-reduce is not decided by line $line: $(grep 'tuning file line' "$tmp/info")"

# 4. --merge keeps other shapes' rows and replaces this shape's.
cp "$table" "$tmp/before"
echo "allreduce 16 2 switch 0 inf ring@ucx" >>"$table"
"$braidrun" -n 2 "$tune" -q -C allreduce -b 8 -e 8 -n 3 -w 1 -r 1 -o "$table" \
    --merge >"$tmp/out" 2>&1 || fail "braid-tune --merge exited $?: $(cat "$tmp/out")"
grep -q '^allreduce 16 2 switch 0 inf ring@ucx$' "$table" || fail "--merge lost the 16-rank row"
grep -q '^allgather 2 1 single ' "$table" || fail "--merge lost the allgather rows (not tuned now)"
[ "$(grep -c '^allreduce 2 1 single ' "$table")" -eq 1 ] ||
  fail "--merge did not replace this shape's allreduce rows: $(cat "$table")"

# 5. Beyond the cache (2 ranks' buffers of 64 MiB: 256 MiB, four times a
#    last-level cache of up to 64 MiB) the series take turns call by call:
#    every series is checked and timed, and the progress line says so.
#    --small-rounds does not reach this size: two rounds, as -r says.
"$braidrun" -n 2 "$tune" -C allreduce -b 64M -e 64M -n 3 -w 1 -r 2 -c 1 \
    --small-rounds 6 \
    --cands pipe@shm,pull@shm --csv "$tmp/big.csv" >"$tmp/big" 2>&1 ||
  fail "braid-tune at 64 MiB exited $?: $(cat "$tmp/big")"
llc=$(cat /sys/devices/system/cpu/cpu0/cache/index*/size 2>/dev/null |
      awk '/K$/ { v = $0 * 1024 } /M$/ { v = $0 * 1048576 } v > m { m = v } END { print m + 0 }')
if grep -q 'allreduce 67108864 B: best .* us (series call by call)' "$tmp/big"; then
  for s in pipe@shm pull@shm auto model; do
    grep -Eq "^allreduce,2,[^,]*,[^,]*,67108864,[0-9]+,$s,[a-z]+@[a-z]+,[0-9.]+," "$tmp/big.csv" ||
      fail "call by call: no time for $s: $(cat "$tmp/big.csv")"
  done
  awk -F, 'NR > 1 && $13 == "ok" && split($14, v, ";") != 2 { exit 1 }' "$tmp/big.csv" ||
    fail "64 MiB rows without exactly 2 rounds: $(cat "$tmp/big.csv")"
elif [ "$llc" -gt $((64 << 20)) ]; then
  echo "skip: call by call: this host's last-level cache ($llc B) is above 64 MiB"
else
  fail "64 MiB on 2 ranks was not timed call by call (last-level cache $llc B): $(cat "$tmp/big")"
fi

# 5b. --small-max moves the edge of --small-rounds: 256 KiB and 1 MiB get
#     three rounds under --small-max 1M, 4 MiB the one -r says; the table's
#     header says where the edge is; a malformed size is refused.  Above
#     the edge and within the cache's reach (2 ranks' buffers of 4 MiB) the
#     series take turns of two calls, and the progress line says so; up to
#     it too (every size short of call by call).
"$braidrun" -n 2 "$tune" -C allreduce -b 256K -e 4M -f 4 -n 3 -w 1 -r 1 \
    --small-rounds 3 --small-max 1M --cands oneshot@shm,pipe@shm \
    --csv "$tmp/edge.csv" >"$tmp/edge" 2>&1 ||
  fail "braid-tune --small-max 1M exited $?: $(cat "$tmp/edge")"
bad=$(awk -F, 'NR > 1 && $13 == "ok" {
    n = split($14, v, ";")
    if (n != ($5 <= 1048576 ? 3 : 1)) print $5 " " $7 ": " n " rounds" }' "$tmp/edge.csv")
[ -z "$bad" ] && grep -q ',4194304,4194304,pipe@shm,.*,ok,' "$tmp/edge.csv" ||
  fail "rounds against --small-max 1M: $bad"
grep -q 'median over 1 rounds (3 up to 1 MiB)' "$tmp/edge" ||
  fail "the header does not say the edge: $(grep median "$tmp/edge")"
grep -q 'allreduce 4194304 B: best .* us (series in turns of two calls)$' "$tmp/edge" ||
  fail "4 MiB above --small-max 1M was not timed in turns: $(grep ' B: best' "$tmp/edge")"
for s in 262144 1048576; do
  grep -q "allreduce $s B: best .* us (series in turns of two calls)\$" "$tmp/edge" ||
    fail "$s B under --small-max 1M was not timed in turns: $(grep ' B: best' "$tmp/edge")"
done
if "$tune" --small-max 4Q >"$tmp/edge" 2>&1; then
  fail "--small-max 4Q was accepted"
fi
grep -q "small-max='4Q': unexpected 'Q' at position 1" "$tmp/edge" ||
  fail "--small-max 4Q: $(cat "$tmp/edge")"

# 6. A reduction's pick that does not fold in rank order (ring, recdbl:
#    obeyed without a trial) is written only where it was faster in every
#    round by more than the trial's margin (5%); elsewhere the fastest
#    rank-order candidate is.  Checked against the CSV's rounds, whichever
#    way this run's times fell.  On 3 ranks: on 2, ring and recdbl give the
#    rank-order bits and go on trial like the others.
"$braidrun" -n 3 "$tune" -C allreduce -b 4K -e 64K -f 4 -n 5 -w 1 -r 3 \
    --cands ring@shm,recdbl@shm,oneshot@shm,twoshot@shm \
    -o "$tmp/order.tune" --csv "$tmp/order.csv" >"$tmp/order" 2>&1 ||
  fail "braid-tune -r 3 exited $?: $(cat "$tmp/order")"
head -n1 "$tmp/order.csv" | grep -q ',state,rounds_us,calls$' ||
  fail "CSV header without rounds_us and calls: $(head -n1 "$tmp/order.csv")"
checked=$(awk -F, '
  # Times print to 1 ns: closer than E is a tie either way may break.
  # x faster than y by the margin M in every round, within a tie (by more
  # than one: lead E)
  function wins_all(x, y, lead,   n, i, rx, ry) {
    n = split(r[b, x], rx, ";"); split(r[b, y], ry, ";")
    if (n != 3) return 0
    for (i = 1; i <= n; i++) if (rx[i] * (1 + M) > ry[i] + E - lead) return 0
    return 1
  }
  BEGIN { E = 0.002; M = 0.05; RO = "^(oneshot|twoshot)@" }
  NR == FNR {
    if (FNR == 1 || $7 !~ /@/ || $13 != "ok") next
    t[$6, $7] = $9 + 0; r[$6, $7] = $14; c[$6] = c[$6] " " $7; next
  }
  $1 == "allreduce" && $8 == "at" {
    b = $9; pick = $7; m = ""; a = ""; n = split(c[b], cs, " ")
    for (k = 1; k <= n; k++) {
      x = cs[k]
      if (m == "" || t[b, x] < m) m = t[b, x]
      if (x ~ RO && (a == "" || t[b, x] < a)) a = t[b, x]
    }
    if (pick ~ RO) {
      # the fastest rank-order one, unless another won every round
      if (t[b, pick] > a + E) { print "at " b ": " pick " is not the fastest rank-order candidate"; exit 1 }
      for (k = 1; k <= n; k++)
        if (cs[k] !~ RO && t[b, cs[k]] < m + E && t[b, cs[k]] < a - E &&
            wins_all(cs[k], pick, 2 * E)) {
          print "at " b ": " cs[k] " won every round by 5% (" r[b, cs[k]] ") but " pick " was picked (" r[b, pick] ")"; exit 1 }
    } else {
      # the fastest, and faster in every round than a fastest rank-order one
      ok = 0
      for (k = 1; k <= n; k++)
        if (cs[k] ~ RO && t[b, cs[k]] <= a + E && wins_all(pick, cs[k], 0)) ok = 1
      if (t[b, pick] > m + E || !ok) { print "at " b ": " pick " (" r[b, pick] ") was picked without winning every round by 5%"; exit 1 }
    }
    seen++
  }
  END { print seen + 0 }' "$tmp/order.csv" FS=' ' "$tmp/order.tune")
[ "$checked" = 3 ] ||
  fail "rank-order picks: $checked: $(cat "$tmp/order.tune") $(cat "$tmp/order.csv")"

# 7. A damaged table stops every rank at init with its line.
sed 's/^allgather 2 1 single 0 /allgather 2 1 single x /' "$tmp/before" >"$tmp/bad.tune"
bad_line=$(grep -n '^allgather' "$tmp/bad.tune" | head -n1 | cut -d: -f1)
BRAID_TUNE_FILE=$tmp/bad.tune "$braidrun" -n 2 "$info" --table >"$tmp/bad" 2>&1 &&
  fail "a damaged table was accepted"
grep -q "bad.tune:$bad_line: expected a size" "$tmp/bad" ||
  fail "no message naming line $bad_line: $(cat "$tmp/bad")"

[ "$failures" -eq 0 ] && echo "tune: ok"
exit $((failures > 0))
