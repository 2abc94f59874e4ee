#!/usr/bin/env bash
# The emulated-cluster figures of docs/performance.md: 4 hosts of one rank,
# behind a switch and cabled as a ring, every host sending at RATE; every
# candidate, braid's automatic choice and Open MPI, 8 B to 64 MiB; then,
# per topology, the geometric mean over sizes of braid auto / Open MPI.
#
#   bench/netns/figures.sh BUILD_DIR [OUT_DIR=netns-figures]     (root)
#   RATE=1gbit ROUNDS=3 ITERS=5 (see sweep.sh; rounds alternate every
#   candidate, medians are kept).  About 15 minutes at the defaults.
#
# Writes OUT_DIR/sweep.csv (+ sweep.choices.csv) and prints the tables.
set -uo pipefail
build=${1:?usage: figures.sh BUILD_DIR [OUT_DIR]}
dir=${2:-netns-figures}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
export RATE=${RATE-1gbit} ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-5}
echo "# $(date -u +%F) $(uname -n), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg);" \
     "4 hosts x 1 rank, each host sends at ${RATE:-unlimited}, ROUNDS=$ROUNDS ITERS=$ITERS"
TOPOS="switch ring" RANKS=4 PPNS=1 MIN=8 MAX=${MAX:-64M} STEP=4 \
  "$here/sweep.sh" "$build" "$dir/sweep.csv" || exit 1
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# One table per topology: a column per candidate, auto's choice, and the
# ratios; then the geometric means.
awk -F, -v choices="$dir/sweep.choices.csv" '
  BEGIN { while ((getline l < choices) > 0) { split(l, c, ","); pick[c[1], c[4]] = c[5] } }
  NR == 1 { next }
  { t[$1, $4, $5] = $6; if (!(($1, $4) in seen)) { seen[$1, $4] = 1; cands[$1] = cands[$1] " " $4 }
    if (!(($1, $5) in sz)) { sz[$1, $5] = 1; sizes[$1] = sizes[$1] " " $5 } ; topos[$1] = 1 }
  END {
    for (topo in topos) {
      nc = split(cands[topo], cl, " "); ns = split(sizes[topo], sl, " ")
      for (i = 1; i <= ns; i++) for (j = i + 1; j <= ns; j++) if (sl[j] + 0 < sl[i] + 0) { x = sl[i]; sl[i] = sl[j]; sl[j] = x }
      printf "\n## %s, 4 hosts x 1 rank: time (us), median\n%10s", topo, "bytes"
      for (k = 1; k <= nc; k++) printf " %12s", cl[k]
      printf " %-12s %8s %8s\n", "auto chose", "/tcp", "/ucx"
      n = 0; st = 0; su = 0; sb = 0
      for (i = 1; i <= ns; i++) {
        s = sl[i]; printf "%10d", s
        for (k = 1; k <= nc; k++) printf " %12s", ((topo, cl[k], s) in t) ? t[topo, cl[k], s] : "-"
        a = t[topo, "auto", s]; mt = t[topo, "ompi-tcp", s]; mu = t[topo, "ompi-ucx", s]
        rt = (a > 0 && mt > 0) ? a / mt : 0; ru = (a > 0 && mu > 0) ? a / mu : 0
        printf " %-12s %8s %8s\n", pick[topo, s], rt ? sprintf("%.2f", rt) : "-", ru ? sprintf("%.2f", ru) : "-"
        if (rt && ru) { n++; st += log(rt); su += log(ru); best = mt < mu ? mt : mu; sb += log(a / best) }
      }
      if (n) printf "geometric mean over %d sizes of braid auto / Open MPI: TCP BTL %.2f, UCX PML %.2f, the faster of the two %.2f\n", n, exp(st / n), exp(su / n), exp(sb / n)
    }
  }' "$dir/sweep.csv"
