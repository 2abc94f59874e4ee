#!/bin/sh
# Prints every candidate of the selection table that `braid-info -n N`
# shows, one "coll:algo@transport" (or "coll:hier") a line, sorted: the
# candidates found at run time, for the tests that must cover each (fault
# injection, numerics).
#
# usage: cands.sh BRAID_INFO N [COLL]
# RANKS_PER_HOST=K: the N ranks as emulated hosts of K ranks each
# (BRAID_HOSTNAME), which have the hierarchical candidates too.
set -u
[ $# -ge 2 ] || { echo "usage: cands.sh BRAID_INFO N [COLL]" >&2; exit 2; }
if [ -n "${RANKS_PER_HOST:-}" ]; then
  out=$("$(dirname "$1")/braidrun" -n "$2" sh -c \
        'BRAID_HOSTNAME=h$((BRAID_RANK / $1)) exec "$0" --table' \
        "$1" "$RANKS_PER_HOST" 2>&1) || { echo "$out" >&2; exit 1; }
else
  out=$("$1" -n "$2" 2>&1) || { echo "$out" >&2; exit 1; }
fi
# "[0] allreduce" starts a section; its rows list "algo@tl <estimate>"
# after the reason in parentheses (which may name a composite's steps).
echo "$out" | awk -v want="${3:-}" '
    /^\[0\] [a-z_]+$/ { coll = $2; next }
    /^\[0\] *$/        { coll = ""; next }
    coll != "" && (want == "" || want == coll) {
        sub(/\(.*\)/, "")
        for (i = 2; i <= NF; i++)
            if ($i ~ /^[a-z0-9_]+@[a-z0-9_]+$/ || $i == "hier")
                print coll ":" $i }' | sort -u
