#!/usr/bin/env bash
# The fault matrix: every fault on every candidate `braid-info -n 4` lists
# at run time, one run each, as one markdown table of what the survivors
# and braidrun reported (tests/fault/run_faults.sh --matrix does the work).
# Faults: kill, stop, exit without finalize, and calls that differ from the
# others' in count (barrier: collective), dtype, op (reductions), root
# (broadcast) or collective (fault_coll.c --mismatch).  A report for the
# closing notes, not a test: several minutes (a stop, or a mismatch caught
# at the timeout, costs BRAID_TIMEOUT plus the failure inquiry's window).
#
# usage: matrix.sh BUILD_DIR [VICTIM] [TIMEOUT_S]
#   e.g. tests/fault/matrix.sh build 2 2 > matrix.md
#   FAULTS="kill mismatch:dtype" picks faults (default: all of them).
set -u
[ $# -ge 1 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
B=$1 VICTIM=${2:-2} TIMEOUT=${3:-2}
FAULTS=${FAULTS:-kill stop exit mismatch:count mismatch:dtype mismatch:op
mismatch:root mismatch:coll}
here=$(dirname "$0")
echo "fault matrix: 4 ranks, victim rank $VICTIM, BRAID_TIMEOUT=$TIMEOUT s," \
     "$(hostname), $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
first=1
for spec in $FAULTS; do
    fault=${spec%%:*} mm=count
    [ "$fault" != "$spec" ] && mm=${spec#*:}
    "$here/run_faults.sh" "$B/tools/braidrun" "$B/tests/fault/fault_coll" \
        "$B/tools/braid-info" --matrix --fault "$fault" --mismatch "$mm" \
        --kills 1 --victim "$VICTIM" --timeout "$TIMEOUT" --seed 7 \
        --cands all |
        if [ $first -eq 1 ]; then cat; else tail -n +3; fi
    first=0
done
