#!/usr/bin/env bash
# What link calibration costs: BRAID_CALIBRATE=0 (declared figures), 1
# (read from the cache) and force (measure), taking turns round after
# round.  Per rank count and mode, the median of
#   job    the wall time of a braidrun job that creates a communicator and
#          makes one 8 B call (process start included: compare the modes)
#   8B     the 8 B all-reduce (braid-bench, 200 calls) and the candidates
#          the automatic choice ran (calibrated figures may move it)
#
#   bench/calib_cost.sh BUILD_DIR [RANKS...]      (default ranks: 2 4 8)
#
# Environment: ROUNDS=N [7]; the cache goes to a temporary folder.
set -uo pipefail
build=${1:?usage: calib_cost.sh BUILD_DIR [RANKS...]}; shift
ranks=${*:-2 4 8}
rounds=${ROUNDS:-7}
export BRAID_CALIB_DIR=$(mktemp -d)
trap 'rm -rf "$BRAID_CALIB_DIR"' EXIT
bench=("$build/tools/braidrun" -n) log=$BRAID_CALIB_DIR/log
for n in $ranks; do
  # A cache for mode 1 to read.
  BRAID_CALIBRATE=force "${bench[@]}" "$n" "$build/bench/braid-bench" \
    -b 8 -e 8 -n 1 -w 0 -c 0 >/dev/null 2>&1
  for ((r = 1; r <= rounds; r++)); do
    for m in 0 1 force; do
      t0=$(date +%s.%N)
      BRAID_CALIBRATE=$m "${bench[@]}" "$n" "$build/bench/braid-bench" \
        -b 8 -e 8 -n 1 -w 0 -c 0 >/dev/null 2>&1
      t1=$(date +%s.%N)
      echo "job $n $m $(echo "$t1 - $t0" | bc)" >>"$log"
      BRAID_CALIBRATE=$m "${bench[@]}" "$n" "$build/bench/braid-bench" \
        -b 8 -e 8 -n 200 -w 50 -c 0 -i 0 2>&1 |
        awk -v n="$n" -v m="$m" '$2 == 8 && $3 == 2 {print "8B", n, m, $7, $6}' >>"$log"
    done
  done
done
echo "# bench/calib_cost.sh $build $ranks (ROUNDS=$rounds) on $(hostname), $(date '+%Y-%m-%d %H:%M'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$log" <<'EOF'
import collections, statistics, sys
job, lat, cand = (collections.defaultdict(list) for _ in range(3))
for f in (l.split() for l in open(sys.argv[1])):
    k = (int(f[1]), f[2])
    if f[0] == "job":
        job[k].append(float(f[3]))
    else:
        lat[k].append(float(f[3]))
        cand[k].append(f[4])
print(f"{'ranks':>5} {'mode':>6} {'job s':>8} {'8B us':>8}  ran")
for k in sorted(job):
    c = ", ".join(f"{a} x{b}" for a, b in collections.Counter(cand[k]).items())
    l = f"{statistics.median(lat[k]):8.2f}" if lat[k] else f"{'-':>8}"
    print(f"{k[0]:>5} {k[1]:>6} {statistics.median(job[k]):8.3f} {l}  {c}")
EOF
