#!/usr/bin/env bash
# The cost model against the machine: every candidate of every collective
# timed by braid-tune over a size sweep, next to its estimate; prints per
# candidate and size the estimate, the measured time and the error, the
# error per candidate, and every pair of candidates measured more than 20%
# apart (DIFF) that the model ranks the other way round -- the pairs on
# which the dispatcher would pick the slower one.
#
#   bench/model_check.sh BUILD_DIR [RANKS...]      (default ranks: 2 4 8)
#
# Environment (defaults in brackets):
#   COLLS=LIST        collectives [allreduce,reduce_scatter,allgather,broadcast]
#   SIZES="MIN MAX F" sizes [8 64M 4] (the larger buffer, as braid-bench)
#   ROUNDS=N ITERS=N  braid-tune -r and -n [3, 20]
#   OUT=DIR           keep the CSVs there [a temporary folder]
#   DIFF=0.2          the ranking check's threshold
# The link figures are measured afresh first (braid-tune forces the
# calibration).  Exits 1 when some pair is ranked wrongly.
set -uo pipefail
build=${1:?usage: model_check.sh BUILD_DIR [RANKS...]}; shift
ranks=${*:-2 4 8}
here=$(cd "$(dirname "$0")" && pwd)
colls=${COLLS:-allreduce,reduce_scatter,allgather,broadcast}
sizes=(${SIZES:-8 64M 4})
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
files=()
for n in $ranks; do
  f=$out/model-n$n.csv
  "$build/tools/braidrun" -n "$n" "$build/tools/braid-tune" -q -C "$colls" \
      -b "${sizes[0]}" -e "${sizes[1]}" -f "${sizes[2]}" -r "${ROUNDS:-3}" \
      -n "${ITERS:-20}" --csv "$f" || { echo "model_check.sh: braid-tune failed on $n ranks" >&2; exit 2; }
  files+=("$f")
done
echo "# bench/model_check.sh $build $ranks (COLLS=$colls SIZES='${sizes[*]}' ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-20}) on $(hostname), $(date '+%Y-%m-%d %H:%M'), load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$here/tune_report.py" model "${files[@]}"
