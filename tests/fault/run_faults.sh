#!/usr/bin/env bash
# Fault injection driver: for every candidate, run fault_coll under braidrun
# KILLS times with a different seed and victim, and check every time that
#   - the fault happened: the victim died (kill: SIGKILL), stopped for good
#     (stop: SIGSTOP), exited with status 0 without braid_finalize (exit),
#     or called the collective with another count (mismatch; --mismatch
#     coll|dtype|op|root: another collective, dtype, op or root, as
#     fault_coll.c says); its time is in the death file,
#   - every survivor (every rank, for mismatch) printed a FAULT line: an
#     error within the limit of the fault, of the fault's status
#     (kill/exit: BRAID_ERR_PEER or BRAID_ERR_TIMEOUT, stop:
#     BRAID_ERR_TIMEOUT, mismatch: BRAID_ERR_MISMATCH), whose message names
#     the victim ("rank V") and the failed call ("call #K"), the same K on
#     every survivor; its send buffer (out of place) still held its input;
#     then the communicator refused further work with BRAID_ERR_STATE and
#     the same message, and braid_finalize returned promptly,
#   - nobody hung (fault_coll's watchdog prints HANG) or finished without an
#     error (NOERROR; with mismatch, SILENT says a result was wrong),
#   - braidrun exited non-zero and named the victim as the rank that failed
#     first.
#
# usage: run_faults.sh BRAIDRUN FAULT_COLL BRAID_INFO [--kills N]
#          [--fault kill|stop|exit|mismatch] [--timeout S] [--margin S]
#          [--seed N] [--cands LIST|all|all:COLL|default] [--victim V]
#          [--mismatch count|coll|dtype|op|root] [--at-once] [--matrix]
#          [--ranks-per-host K]
#
# LIST: COLL:ALGO@TRANSPORT items separated by commas or blanks.  "all":
# every candidate that `braid-info -n 4` lists (tests/cands.sh); "all:COLL":
# those of one collective; "default": the issue's list.  Candidates this
# build lacks are skipped, and said so.  The victim rotates over the ranks
# (the root too) unless --victim fixes it.  --matrix: one row per run, as a
# markdown table (what survivors and braidrun reported), and exit 0: a
# report, not a test.  --at-once: every survivor must report within half
# the timeout, i.e. from what it saw itself, not from the timeout's
# failure inquiry.  --ranks-per-host K: the ranks are emulated hosts of K
# ranks each (BRAID_HOSTNAME), which have the hierarchical candidates
# ("allreduce:hier") too.
set -u

if [ $# -lt 3 ]; then
    sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//' | grep -v '^set -u' >&2
    exit 2
fi
BRAIDRUN=$1 FAULT=$2 INFO=$3
shift 3
KILLS=20 TIMEOUT=10 MARGIN=3 SEED0=1 CANDS=default RANKS=4 FINALIZE_MS=3000
KIND=kill MATRIX=0 VICTIM=-1 MM=count AT_ONCE=0 PER_HOST=
while [ $# -gt 0 ]; do
    case $1 in
    --kills) KILLS=$2 ;;
    --fault) KIND=$2 ;;
    --timeout) TIMEOUT=$2 ;;
    --margin) MARGIN=$2 ;;
    --seed) SEED0=$2 ;;
    --cands) CANDS=$2 ;;
    --victim) VICTIM=$2 ;;
    --mismatch) MM=$2 ;;
    --matrix) MATRIX=1; shift; continue ;;
    --at-once) AT_ONCE=1; shift; continue ;;
    --ranks-per-host) PER_HOST=$2 ;;
    *) echo "run_faults.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
case $KIND in
kill|exit) WANT="BRAID_ERR_PEER|BRAID_ERR_TIMEOUT" ;;
stop) WANT="BRAID_ERR_TIMEOUT" ;;
mismatch) WANT="BRAID_ERR_MISMATCH" ;;
*) echo "run_faults.sh: --fault must be kill, stop, exit or mismatch" >&2; exit 2 ;;
esac

DEFAULT_CANDS="allreduce:oneshot@shm allreduce:twoshot@shm allreduce:ring@shm
allreduce:ring@ucx allreduce:recdbl@ucx allreduce:oneshot@ucx
allgather:direct@shm allgather:ring@ucx broadcast:recdbl@shm"

# A survivor must report within LIMIT of the fault: the timeout for a rank
# that stopped or called something else (plus the failure inquiry's window,
# at most 2 s), at once for one that is gone.  Its watchdog (from the start
# of its loop) is longer, braidrun's grace longer still, so that a hang
# shows as HANG from the watchdog rather than as a SIGTERM; the hard
# timeout only guards against braidrun itself hanging.
LIMIT_MS=$(( (TIMEOUT + 2 + MARGIN) * 1000 ))
[ $AT_ONCE -eq 1 ] && LIMIT_MS=$(( TIMEOUT * 500 ))
WATCHDOG=$(( TIMEOUT + MARGIN + 17 ))
GRACE=$(( WATCHDOG + 5 ))
HARD=$(( GRACE + 60 ))

tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-fault-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

RANKS_PER_HOST=$PER_HOST "$(dirname "$0")/../cands.sh" "$INFO" "$RANKS" \
    >"$tmp/available" 2>&1
if [ ! -s "$tmp/available" ] || grep -qvE '^[a-z_]*:([a-z0-9_]*@|hier$)' "$tmp/available"; then
    echo "run_faults.sh: '$INFO -n $RANKS' listed no candidates:" >&2
    cat "$tmp/available" >&2
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
    [ $MATRIX -eq 0 ] && echo "FAIL $1: ${*:2}"
    failures=$((failures + 1))
    bad_run=1
    why="${why:+$why; }${*:2}"
}

# Field NAME=value of a FAULT line (values have no blanks, but error=).
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# ms as integers for the comparisons (awk: the values are decimals).
ms_gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

[ $MATRIX -eq 1 ] && {
    echo "| fault | candidate | survivors report | name the victim | same call | braidrun names | max latency ms | max finalize ms |"
    echo "|---|---|---|---|---|---|---|---|"
}

seed=$SEED0
for cand in $CANDS; do
    if ! grep -qx "$cand" "$tmp/available"; then
        [ $MATRIX -eq 0 ] && echo "SKIP $cand: not listed by braid-info -n $RANKS in this build"
        skipped=$((skipped + 1))
        continue
    fi
    cand_fail=0 cand_lat=0 cand_surv=0 k=0
    while [ $k -lt "$KILLS" ]; do
        k=$((k + 1))
        seed=$((seed + 1))
        victim=$(( (k - 1) % RANKS )) # every rank in turn, the root too
        [ "$VICTIM" -ge 0 ] && victim=$VICTIM
        run="$cand fault=$KIND$([ "$KIND" = mismatch ] && echo " ($MM)") seed=$seed victim=$victim"
        bad_run=0 why=""
        rm -f "$tmp/death"
        label=()
        [ -n "$PER_HOST" ] && label=(sh -c \
            "BRAID_HOSTNAME=h\$((BRAID_RANK / $PER_HOST)) exec \"\$0\" \"\$@\"")
        timeout -k 5 "$HARD" "$BRAIDRUN" -t "$TIMEOUT" -g "$GRACE" \
            -n "$RANKS" "${label[@]}" "$FAULT" --algo "$cand" --fault "$KIND" \
            --victim "$victim" --seed "$seed" --death-file "$tmp/death" \
            --mismatch "$MM" \
            --watchdog "$WATCHDOG" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ $rc -eq 77 ] && grep -q "SKIP" "$tmp/out"; then
            [ $MATRIX -eq 0 ] && echo "SKIP $cand: $(grep -m1 SKIP "$tmp/out" | sed 's/^\[0\] //')"
            skipped=$((skipped + 1))
            break
        fi
        [ $k -eq 1 ] && tested=$((tested + 1))

        # The fault happened, and braidrun saw it.
        case $KIND in
        kill) seen="braidrun: rank $victim killed by signal 9" ;;
        exit) seen="braidrun: rank $victim exited with status 0 without braid_finalize" ;;
        *) seen="" ;;
        esac
        if [ -s "$tmp/death" ] && { [ -z "$seen" ] || grep -q "$seen" "$tmp/err"; }; then
            faults=$((faults + 1))
        else
            fail "$run" "the victim did not fail as planned ($KIND)"
        fi
        [ $rc -eq 124 ] && fail "$run" "braidrun itself hung (killed after $HARD s)"
        [ $rc -eq 0 ] && fail "$run" "braidrun exited 0"
        named=0
        grep -q "braidrun: rank $victim failed first" "$tmp/err" && named=1
        [ $named -eq 1 ] ||
            fail "$run" "braidrun did not name rank $victim as the failed rank"
        grep -q "HANG" "$tmp/out" && fail "$run" "a rank hung: $(grep -m1 HANG "$tmp/out")"
        grep -q "SILENT" "$tmp/out" && fail "$run" "a wrong result without an error"
        grep -q "NOERROR" "$tmp/out" && fail "$run" "a rank saw no error"

        run_st="" all_named=1 calls="" run_lat=0 run_fin=0
        for ((r = 0; r < RANKS; r++)); do
            [ $r -eq "$victim" ] && [ "$KIND" != mismatch ] && continue
            line=$(grep -m1 "^\[$r\] FAULT rank=$r " "$tmp/out")
            if [ -z "$line" ]; then
                fail "$run" "rank $r printed no FAULT line"
                all_named=0
                continue
            fi
            survivors=$((survivors + 1))
            cand_surv=$((cand_surv + 1))
            st=$(field status "$line")
            lat=$(field latency_ms "$line")
            fin=$(field finalize_ms "$line")
            calls="$calls $(field call "$line")"
            statuses[$st]=$(( ${statuses[$st]:-0} + 1 ))
            case " $run_st " in *" $st "*) ;; *) run_st="$run_st $st" ;; esac
            if ! [[ $st =~ ^($WANT)$ ]]; then
                fail "$run" "rank $r: status $st, expected ${WANT//|/ or }"
            fi
            if ms_gt 0 "$lat"; then
                fail "$run" "rank $r: no fault time ($lat)"
            elif ms_gt "$lat" "$LIMIT_MS"; then
                fail "$run" "rank $r: error $lat ms after the fault (limit $LIMIT_MS ms)"
            fi
            ms_gt "$lat" "$max_lat" && { max_lat=$lat; max_lat_at="$run rank=$r"; }
            ms_gt "$lat" "$cand_lat" && cand_lat=$lat
            ms_gt "$lat" "$run_lat" && run_lat=$lat
            if [ "$(field names_victim "$line")" != 1 ]; then
                fail "$run" "rank $r: the error does not name rank $victim"
                all_named=0
            fi
            [ "$(field state_ok "$line")" = 1 ] ||
                fail "$run" "rank $r: the next call did not refuse with" \
                    "BRAID_ERR_STATE and the first message"
            [ "$(field send_intact "$line")" = 1 ] ||
                fail "$run" "rank $r: the failed call wrote its send buffer"
            ms_gt "$fin" "$max_fin" && { max_fin=$fin; max_fin_at="$run rank=$r"; }
            ms_gt "$fin" "$run_fin" && run_fin=$fin
            ms_gt "$fin" "$FINALIZE_MS" &&
                fail "$run" "rank $r: braid_finalize took $fin ms"
        done
        # Every survivor names the same failed call.
        ncalls=$(tr ' ' '\n' <<<"$calls" | grep -c .)
        ndistinct=$(tr ' ' '\n' <<<"$calls" | grep . | sort -u | wc -l)
        same=0
        if [ "$ncalls" -gt 0 ] && [ "$ndistinct" -eq 1 ] && ! grep -q -- "-1" <<<"$calls"; then
            same=1
        elif [ -n "$PER_HOST" ] && [ "$victim" -eq 0 ]; then
            # Rank 0 runs the inquiry; without it, survivors on different
            # hosts cannot compare notes and each names the call it failed
            # in (docs/architecture.md, "When a call fails").
            same=0
        elif [ "$ncalls" -gt 0 ]; then
            fail "$run" "the survivors name different failed calls:$calls"
        fi
        if [ $MATRIX -eq 1 ]; then
            if grep -q SILENT "$tmp/out"; then
                outcome="no error: wrong results (silent)"
            elif grep -q NOERROR "$tmp/out"; then
                outcome="no error"
            else
                outcome="${run_st# }"
            fi
            label=$KIND
            [ "$KIND" = mismatch ] && label="$MM mismatch"
            printf '| %s | %s | %s | %s | %s | %s | %.0f | %.0f |\n' "$label" \
                "$cand" "$outcome" "$([ $all_named = 1 ] && [ -n "$run_st" ] && echo yes || echo no)" \
                "$([ $same = 1 ] && echo "yes (#${calls##* })" || echo no)" \
                "$([ $named = 1 ] && echo yes || echo no)" "$run_lat" "$run_fin"
        elif [ $bad_run -ne 0 ]; then
            cand_fail=$((cand_fail + 1))
            echo "---- output of $run (braidrun exit $rc):"
            cat "$tmp/out" "$tmp/err" | tail -40
            echo "----"
        fi
    done
    [ $MATRIX -eq 0 ] && [ $k -gt 0 ] && [ -s "$tmp/out" ] && ! grep -q SKIP "$tmp/out" &&
        printf '%-26s %2d %s runs, %3d survivors checked, max latency %7.1f ms, %d bad runs\n' \
            "$cand" "$k" "$KIND" "$cand_surv" "$cand_lat" "$cand_fail"
done

[ $MATRIX -eq 1 ] && exit 0
st_list=""
for s in "${!statuses[@]}"; do st_list="$st_list $s=${statuses[$s]}"; done
echo "fault ($KIND): $tested candidates tested, $skipped skipped; $faults faults injected," \
     "$survivors survivors checked (statuses:${st_list:- none});" \
     "max detection latency ${max_lat} ms (${max_lat_at:-none}, limit $LIMIT_MS ms);" \
     "max finalize ${max_fin} ms; $failures failures"
if [ $failures -eq 0 ] && [ $tested -eq 0 ]; then
    exit 77 # nothing here to test: meson's "skipped"
fi
[ $failures -eq 0 ]
