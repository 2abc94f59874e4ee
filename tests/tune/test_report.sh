#!/usr/bin/env bash
# bench/tune_report.py's oracle gap on made-up braid-tune CSVs: the pick
# column judges each round's choice in its own round.
#
# usage: test_report.sh SOURCE_ROOT
set -u
src=$1
tmp=$(mktemp -d /tmp/braid-report-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Four rounds, a file each, of a 2-rank allgather of 1 MiB: a@shm takes
# 100 us in every round, b@shm 90 us in the first two and 300 in the last
# two; the automatic series ran b where b was fast and a where it was not,
# so its pick was never more than the best (a) in its round.  Judged by
# the candidate it ran most often (a tie: b) against the medians, it would
# read b's median 195 us over a's 100: +95%.
for r in 1 2 3 4; do
  b=90 ran=b@shm t=90
  [ "$r" -gt 2 ] && b=300 ran=a@shm t=100
  {
    echo "coll,nranks,nnodes,topo,size,bytes,series,cand,time_us,estimate_us,algbw_gbps,busbw_gbps,state,rounds_us"
    echo "allgather,2,1,single,1048576,524288,a@shm,a@shm,100,100,0,0,ok,100"
    echo "allgather,2,1,single,1048576,524288,b@shm,b@shm,$b,100,0,0,ok,$b"
    echo "allgather,2,1,single,1048576,524288,auto,$ran,$t,100,0,0,ok,$t"
  } >"$tmp/r$r.csv"
done
out=$(/usr/bin/python3 "$src/bench/tune_report.py" gap "$tmp"/r*.csv 2>&1)
echo "$out"
row=$(echo "$out" | grep -E '^  allgather +2 +1M ')
[ -n "$row" ] || fail "no gap row for the 2-rank allgather of 1 MiB"
# best a@shm 100 us; auto's median 95 us (-5%); pick: rounds 0.9, 0.9, 1, 1
echo "$row" | grep -Eq '^  allgather +2 +1M +a@shm +100\.00 +b@shm +95\.00 +-5% ' ||
  fail "the gap row's best or auto columns: '$row'"
[ "$(echo "$row" | awk '{ print $(NF - 2) }')" = "-5%" ] ||
  fail "pick is '$(echo "$row" | awk '{ print $(NF - 2) }')', not -5% (each round's choice in its own round)"
echo "$out" | grep -Eq '^  auto pick: largest -5%, median -5%; sizes over 10%: 0 of 1$' ||
  fail "no auto pick summary of -5% at one size"
# paired: auto over a in each round, 0.9, 0.9, 1, 1: the median -5%
echo "$out" | grep -Eq '^  auto paired \(.*\): largest -5%; sizes over 10%: 0$' ||
  fail "no auto paired summary of -5% at one size"
[ "$failures" -eq 0 ] && echo "tune_report: ok"
exit $((failures > 0))
