#!/bin/sh
# bench/plot.sh turns a tiny braid-bench CSV, a braid-tune CSV and a peer's
# plot CSV into one PNG per collective and rank count; unknown input is
# refused.
#   test_plot.sh SOURCE_ROOT
set -u
src=$1
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed (Debian: gnuplot-nox)"; exit 77; }
tmp=$(mktemp -d /tmp/braid-plot-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat >"$tmp/bench.csv" <<'CSV'
coll,nranks,size,count,type,redop,algo,placement,time_us,algbw_gbps,busbw_gbps,wrong
allreduce,4,8,2,f32,sum,oneshot@shm,out-of-place,1.80,0.0044,0.0067,0
allreduce,4,8,2,f32,sum,oneshot@shm,in-place,1.70,0.0047,0.0070,0
allreduce,4,65536,16384,f32,sum,twoshot@shm,out-of-place,21.6,3.03,4.55,0
CSV
cat >"$tmp/tune.csv" <<'CSV'
coll,nranks,nnodes,topo,size,bytes,series,cand,time_us,estimate_us,algbw_gbps,busbw_gbps,state
allreduce,4,1,single,8,8,ring@shm,ring@shm,5.7,4.0,0.0014,0.0021,ok
allreduce,4,1,single,65536,65536,ring@shm,ring@shm,40.0,38.0,1.6,2.4,ok
allgather,4,1,single,65536,16384,ring@shm,ring@shm,30.0,28.0,2.2,1.6,ok
allgather,4,1,single,1048576,262144,ring@shm,ring@shm,300.0,280.0,3.5,2.6,ok
CSV
cat >"$tmp/mpi.csv" <<'CSV'
coll,nranks,size,series,time_us
allreduce,4,8,ompi,4.3
allreduce,4,65536,ompi,50.0
CSV
"$src/bench/plot.sh" -o "$tmp/png" -t test auto="$tmp/bench.csv" "$tmp/tune.csv" \
    "$tmp/mpi.csv" >"$tmp/out" 2>&1 || fail "plot.sh exited $?: $(cat "$tmp/out")"
for f in allreduce-n4 allgather-n4; do
  png=$tmp/png/$f.png
  [ -s "$png" ] || { fail "no $png: $(cat "$tmp/out")"; continue; }
  # The PNG signature: \211 P N G \r \n \032 \n
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
    fail "$png is not a PNG"
  [ "$(wc -c <"$png")" -gt 5000 ] || fail "$png is suspiciously small"
done
[ "$(ls "$tmp/png" | wc -l)" -eq 2 ] || fail "expected 2 charts: $(ls "$tmp/png")"

echo "size,time" >"$tmp/odd.csv"
"$src/bench/plot.sh" -o "$tmp/png2" "$tmp/odd.csv" >"$tmp/out" 2>&1 &&
  fail "a CSV of unknown shape was accepted"
grep -q "odd.csv: unknown header" "$tmp/out" || fail "no message: $(cat "$tmp/out")"

[ "$failures" -eq 0 ] && echo "plot: ok"
exit $((failures > 0))
