#!/bin/sh
# Prints every candidate of the selection table that `braid-info -n N`
# shows, one "coll:algo@transport" a line, sorted: the candidates found at
# run time, for the tests that must cover each (fault injection, numerics).
#
# usage: cands.sh BRAID_INFO N [COLL]
set -u
[ $# -ge 2 ] || { echo "usage: cands.sh BRAID_INFO N [COLL]" >&2; exit 2; }
out=$("$1" -n "$2" 2>&1) || { echo "$out" >&2; exit 1; }
# "[0] allreduce" starts a section; its rows list "algo@tl <estimate>".
echo "$out" | awk -v want="${3:-}" '
    /^\[0\] [a-z_]+$/ { coll = $2; next }
    /^\[0\] *$/        { coll = ""; next }
    coll != "" && (want == "" || want == coll) {
        for (i = 2; i <= NF; i++)
            if ($i ~ /^[a-z0-9_]+@[a-z0-9_]+$/)
                print coll ":" $i }' | sort -u
