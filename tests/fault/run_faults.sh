#!/usr/bin/env bash
# Fault injection driver: for every candidate, run fault_coll under braidrun
# KILLS times with a different seed and victim, and check every time that
#   - the victim died (SIGKILL; its death time is in the death file),
#   - every survivor printed a FAULT line: an error within BRAID_TIMEOUT +
#     margin of the death, of status BRAID_ERR_PEER or BRAID_ERR_TIMEOUT,
#     whose message names the victim ("rank V"); its send buffer (out of
#     place) still held its input; then the communicator refused further
#     work with BRAID_ERR_STATE and the same message, and braid_finalize
#     returned promptly,
#   - nobody hung (fault_coll's watchdog prints HANG) or finished without an
#     error (NOERROR),
#   - braidrun exited non-zero and named the victim as the rank that failed
#     first.
#
# usage: run_faults.sh BRAIDRUN FAULT_COLL BRAID_INFO [--kills N]
#          [--timeout S] [--margin S] [--seed N] [--cands LIST|all|default]
#
# LIST: COLL:ALGO@TRANSPORT items separated by commas or blanks.  "all":
# every candidate that `braid-info -n 4` lists; "all:COLL": those of one
# collective; "default": the issue's list.
# Candidates this build lacks are skipped, and said so.
set -u

if [ $# -lt 3 ]; then
    sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^set -u' >&2
    exit 2
fi
BRAIDRUN=$1 FAULT=$2 INFO=$3
shift 3
KILLS=20 TIMEOUT=10 MARGIN=3 SEED0=1 CANDS=default RANKS=4 FINALIZE_MS=3000
while [ $# -gt 0 ]; do
    case $1 in
    --kills) KILLS=$2 ;;
    --timeout) TIMEOUT=$2 ;;
    --margin) MARGIN=$2 ;;
    --seed) SEED0=$2 ;;
    --cands) CANDS=$2 ;;
    *) echo "run_faults.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done

DEFAULT_CANDS="allreduce:oneshot@shm allreduce:twoshot@shm allreduce:ring@shm
allreduce:ring@ucx allreduce:recdbl@ucx allreduce:oneshot@ucx
allgather:direct@shm allgather:ring@ucx broadcast:recdbl@shm"

# A survivor must report within LIMIT of the death.  Its watchdog (from the
# start of its loop) is longer, braidrun's grace longer still, so that a
# hang shows as HANG from the watchdog rather than as a SIGTERM; the hard
# timeout only guards against braidrun itself hanging.
LIMIT_MS=$(( (TIMEOUT + MARGIN) * 1000 ))
WATCHDOG=$(( TIMEOUT + MARGIN + 15 ))
GRACE=$(( WATCHDOG + 5 ))
HARD=$(( GRACE + 60 ))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-fault-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# Every candidate of every collective in the selection table of 4 ranks:
# "[0] allreduce" starts a section, the rows list "algo@tl <estimate>".
"$INFO" -n "$RANKS" >"$tmp/info" 2>&1
awk '/^\[0\] [a-z_]+$/ { coll = $2; next }
     /^\[0\] *$/        { coll = ""; next }
     coll != ""         { for (i = 2; i <= NF; i++)
                              if ($i ~ /^[a-z0-9_]+@[a-z0-9_]+$/)
                                  print coll ":" $i }' "$tmp/info" |
    sort -u >"$tmp/available"
if [ ! -s "$tmp/available" ]; then
    echo "run_faults.sh: '$INFO -n $RANKS' listed no candidates:" >&2
    cat "$tmp/info" >&2
    exit 1
fi
case $CANDS in
all) CANDS=$(cat "$tmp/available") ;;
all:*) CANDS=$(grep "^${CANDS#all:}:" "$tmp/available") ;;
default) CANDS=$DEFAULT_CANDS ;;
esac
CANDS=$(echo "$CANDS" | tr ',' ' ')

faults=0 survivors=0 failures=0 skipped=0 tested=0
max_lat=0 max_lat_at="" max_fin=0 max_fin_at=""
declare -A statuses=()

fail() { # run description, reason...
    echo "FAIL $1: ${*:2}"
    failures=$((failures + 1))
    bad_run=1
}

# Field NAME=value of a FAULT line (values have no blanks, but error=).
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# ms as integers for the comparisons (awk: the values are decimals).
ms_gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

seed=$SEED0
for cand in $CANDS; do
    if ! grep -qx "$cand" "$tmp/available"; then
        echo "SKIP $cand: not listed by braid-info -n $RANKS in this build"
        skipped=$((skipped + 1))
        continue
    fi
    cand_fail=0 cand_lat=0 cand_surv=0 k=0
    while [ $k -lt "$KILLS" ]; do
        k=$((k + 1))
        seed=$((seed + 1))
        victim=$(( (k - 1) % RANKS )) # every rank in turn, the root too
        run="$cand seed=$seed victim=$victim"
        bad_run=0
        rm -f "$tmp/death"
        timeout -k 5 "$HARD" "$BRAIDRUN" -t "$TIMEOUT" -g "$GRACE" \
            -n "$RANKS" "$FAULT" --algo "$cand" --victim "$victim" \
            --seed "$seed" --death-file "$tmp/death" \
            --watchdog "$WATCHDOG" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ $rc -eq 77 ] && grep -q "SKIP" "$tmp/out"; then
            echo "SKIP $cand: $(grep -m1 SKIP "$tmp/out" | sed 's/^\[0\] //')"
            skipped=$((skipped + 1))
            break
        fi
        [ $k -eq 1 ] && tested=$((tested + 1))

        # The victim died, and braidrun said so and failed.
        if [ -s "$tmp/death" ] &&
            grep -q "braidrun: rank $victim killed by signal 9" "$tmp/err"; then
            faults=$((faults + 1))
        else
            fail "$run" "the victim did not die by SIGKILL"
        fi
        [ $rc -eq 124 ] && fail "$run" "braidrun itself hung (killed after $HARD s)"
        [ $rc -eq 0 ] && fail "$run" "braidrun exited 0"
        grep -q "braidrun: rank $victim failed first" "$tmp/err" ||
            fail "$run" "braidrun did not name rank $victim as the failed rank"
        grep -q "HANG" "$tmp/out" && fail "$run" "a survivor hung: $(grep -m1 HANG "$tmp/out")"
        grep -q "NOERROR" "$tmp/out" && fail "$run" "a survivor saw no error"

        for ((r = 0; r < RANKS; r++)); do
            [ $r -eq "$victim" ] && continue
            line=$(grep -m1 "^\[$r\] FAULT rank=$r " "$tmp/out")
            if [ -z "$line" ]; then
                fail "$run" "rank $r printed no FAULT line"
                continue
            fi
            survivors=$((survivors + 1))
            cand_surv=$((cand_surv + 1))
            st=$(field status "$line")
            lat=$(field latency_ms "$line")
            fin=$(field finalize_ms "$line")
            statuses[$st]=$(( ${statuses[$st]:-0} + 1 ))
            case $st in
            BRAID_ERR_PEER|BRAID_ERR_TIMEOUT) ;;
            *) fail "$run" "rank $r: status $st, expected BRAID_ERR_PEER or BRAID_ERR_TIMEOUT" ;;
            esac
            if ms_gt 0 "$lat"; then
                fail "$run" "rank $r: no death time ($lat)"
            elif ms_gt "$lat" "$LIMIT_MS"; then
                fail "$run" "rank $r: error $lat ms after the death (limit $LIMIT_MS ms)"
            fi
            ms_gt "$lat" "$max_lat" && { max_lat=$lat; max_lat_at="$run rank=$r"; }
            ms_gt "$lat" "$cand_lat" && cand_lat=$lat
            [ "$(field names_victim "$line")" = 1 ] ||
                fail "$run" "rank $r: the error does not name rank $victim"
            [ "$(field state_ok "$line")" = 1 ] ||
                fail "$run" "rank $r: the next call did not refuse with" \
                    "BRAID_ERR_STATE and the first message"
            [ "$(field send_intact "$line")" = 1 ] ||
                fail "$run" "rank $r: the failed call wrote its send buffer"
            ms_gt "$fin" "$max_fin" && { max_fin=$fin; max_fin_at="$run rank=$r"; }
            ms_gt "$fin" "$FINALIZE_MS" &&
                fail "$run" "rank $r: braid_finalize took $fin ms"
        done
        if [ $bad_run -ne 0 ]; then
            cand_fail=$((cand_fail + 1))
            echo "---- output of $run (braidrun exit $rc):"
            cat "$tmp/out" "$tmp/err" | tail -40
            echo "----"
        fi
    done
    [ $k -gt 0 ] && [ -s "$tmp/out" ] && ! grep -q SKIP "$tmp/out" &&
        printf '%-26s %2d kills, %3d survivors checked, max latency %7.1f ms, %d bad runs\n' \
            "$cand" "$k" "$cand_surv" "$cand_lat" "$cand_fail"
done

st_list=""
for s in "${!statuses[@]}"; do st_list="$st_list $s=${statuses[$s]}"; done
echo "fault: $tested candidates tested, $skipped skipped; $faults faults injected," \
     "$survivors survivors checked (statuses:${st_list:- none});" \
     "max detection latency ${max_lat} ms (${max_lat_at:-none}, limit $LIMIT_MS ms);" \
     "max finalize ${max_fin} ms; $failures failures"
if [ $failures -eq 0 ] && [ $tested -eq 0 ]; then
    exit 77 # nothing here to test: meson's "skipped"
fi
[ $failures -eq 0 ]
