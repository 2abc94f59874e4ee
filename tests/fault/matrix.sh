#!/usr/bin/env bash
# The fault matrix: every fault (kill, stop, exit without finalize, count or
# collective mismatch) on every candidate `braid-info -n 4` lists, one run
# each, as a markdown table of what the survivors and braidrun reported
# (tests/fault/run_faults.sh --matrix does the work).  A report for the
# closing notes, not a test: several minutes (a stop or a mismatch that
# hangs costs BRAID_TIMEOUT plus the failure inquiry's window).
#
# usage: matrix.sh BUILD_DIR [VICTIM] [TIMEOUT_S]
#   e.g. tests/fault/matrix.sh build 2 2 > matrix.md
set -u
[ $# -ge 1 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
B=$1 VICTIM=${2:-2} TIMEOUT=${3:-2}
here=$(dirname "$0")
echo "fault matrix: 4 ranks, victim rank $VICTIM, BRAID_TIMEOUT=$TIMEOUT s," \
     "$(hostname), $(date -u +%Y-%m-%dT%H:%MZ)"
echo
first=1
for fault in kill stop exit mismatch; do
    "$here/run_faults.sh" "$B/tools/braidrun" "$B/tests/fault/fault_coll" \
        "$B/tools/braid-info" --matrix --fault "$fault" --kills 1 \
        --victim "$VICTIM" --timeout "$TIMEOUT" --seed 7 --cands all |
        if [ $first -eq 1 ]; then cat; else tail -n +3; fi
    first=0
done
