#!/usr/bin/env bash
# Hierarchical candidates without root: ranks given BRAID_HOSTNAME labels
# are emulated hosts (the same code path as on a real or --netns cluster).
# Checks that
#   - the composites exist where hosts have two or more ranks each, and not
#     with one rank per host, one host, or hosts of different sizes;
#   - the choice moves with the ranks per host where the model says so: an
#     8-byte all-reduce on 4 ranks is hier as 2 hosts of 2 and recdbl@ucx as
#     4 hosts of 1; a 64 MiB reduce_scatter stays flat (ring@ucx) on 2
#     hosts of 2, where reordering and the host step cost more than the
#     network step saves;
#   - BRAID_DEBUG=info says what the composite is made of, and every rank
#     agrees;
#   - BRAID_ALGO=allreduce:hier@shm is refused at init with the reason, and
#     forcing hier where there is none fails the call naming what there is.
#
# usage: test_choice.sh BRAIDRUN BRAID_INFO NETNS_RANK
set -u
BRAIDRUN=$1 INFO=$2 RANK=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The link parameters the choices are computed from (ucx's declared
# multi-host defaults, pinned so that a change there shows here).
export BRAID_UCX_ALPHA_US=10 BRAID_UCX_GBPS=1.5 BRAID_TIMEOUT=30

# table N HOST-EXPR: braid-info's selection table of N ranks whose host is
# h$((HOST-EXPR)) (BRAID_RANK in it), into $out.
table() {
  "$BRAIDRUN" -n "$1" sh -c "BRAID_HOSTNAME=h\$(($2)) exec \"\$0\" --table" \
      "$INFO" >"$out" 2>&1 || { fail "braid-info --table on $1 ranks, host $2: $(tail -3 "$out")"; }
}
# has_hier: whether the composite is among the candidates whose estimates
# the table lists.
has_hier() { grep -qE '^\[0\] +estimate us .* hier( |$)' "$out"; }
# choice COLL BYTES: the candidate of the selection table's row holding
# BYTES (rows "LO-HI CAND (why)", half-open; no HI: no upper bound).
choice() {
  awk -v coll="$1" -v bytes="$2" '
      function b(x,  m) { # "64K" -> 65536 (BRAID_ALGO units)
          m = x ~ /K$/ ? 2^10 : x ~ /M$/ ? 2^20 : x ~ /G$/ ? 2^30 : x ~ /T$/ ? 2^40 : 1
          return (x + 0) * m
      }
      /^\[0\] [a-z_]+$/ { in_coll = $2 == coll; next }
      in_coll && $2 ~ /^[0-9]+[KMGT]?-([0-9]+[KMGT]?)?$/ {
          split($2, r, "-")
          if (bytes + 0 >= b(r[1]) && (r[2] == "" || bytes + 0 < b(r[2]))) {
              print $3; exit
          }
      }' "$out"
}

table 4 BRAID_RANK/2
has_hier || fail "2 hosts of 2: no hierarchical candidate"
[ "$(choice allreduce 8)" = hier ] || fail "2 hosts of 2, allreduce 8 B: $(choice allreduce 8), want hier"
grep -Eq "^\[0\] +1-[0-9]+[KMGT]? +hier +\(cost model; host reduce_scatter [a-z]*@shm [0-9.]* us \+ rail allreduce [a-z]*@ucx [0-9.]* us \+ host allgather [a-z]*@shm" "$out" ||
  fail "2 hosts of 2: the reason does not name the steps: $(grep -m1 ' hier ' "$out")"
[ "$(choice reduce_scatter 67108864)" = ring@ucx ] || fail "2 hosts of 2, reduce_scatter 64 MiB: $(choice reduce_scatter 67108864), want ring@ucx"
for coll in reduce_scatter allgather broadcast; do
  [ "$(choice $coll 8)" = hier ] || fail "2 hosts of 2, $coll 8 B: $(choice $coll 8), want hier"
done

table 4 BRAID_RANK
[ "$(choice allreduce 8)" = recdbl@ucx ] || fail "4 hosts of 1, allreduce 8 B: $(choice allreduce 8), want recdbl@ucx"
has_hier && fail "4 hosts of 1: a hierarchical candidate"

table 4 0
has_hier && fail "one host: a hierarchical candidate"

table 6 'BRAID_RANK < 3 ? 0 : BRAID_RANK < 5 ? 1 : 2'
has_hier && fail "hosts of 3, 2 and 1 ranks: a hierarchical candidate"

# Every rank says the same, and rank 0 explains the composite.
"$BRAIDRUN" -n 4 sh -c 'BRAID_HOSTNAME=h$((BRAID_RANK / 2)) exec "$0" -c 8 -c 4096' \
    "$RANK" >"$out" 2>&1 || fail "netns_rank: $(tail -3 "$out")"
[ "$(grep -c '^\[[0-3]\] choice 8: hier$' "$out")" -eq 4 ] &&
  [ "$(grep -c '^\[[0-3]\] choice 4096: hier$' "$out")" -eq 4 ] ||
  { fail "not every rank chose hier:"; grep choice "$out"; }
BRAID_DEBUG=info "$BRAIDRUN" -n 4 sh -c 'BRAID_HOSTNAME=h$((BRAID_RANK / 2)) exec "$0" -t 4096' \
    "$RANK" >"$out" 2>&1 || fail "netns_rank -t: $(tail -3 "$out")"
grep -q "info hier: 2 hosts of 2 ranks: hierarchical candidates with a host level over shm and 2 rails over ucx" "$out" ||
  fail "BRAID_DEBUG=info does not announce the levels: $(grep -m1 'hier' "$out")"
grep -qE "info select: +allreduce +1-[0-9]+[KMGT]? +hier +\(cost model; host reduce_scatter direct@shm [0-9.]+ us \+ rail allreduce recdbl@ucx [0-9.]+ us \+ host allgather direct@shm [0-9.]+ us" "$out" ||
  fail "BRAID_DEBUG=info does not explain the choice: $(grep -m1 'select: *allreduce' "$out")"

# A transport after hier is refused at init, on every rank, saying why.
BRAID_ALGO=allreduce:hier@shm "$BRAIDRUN" -n 2 "$RANK" -c 8 >"$out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "the composite 'hier' takes no transport" "$out" ||
  fail "BRAID_ALGO=allreduce:hier@shm: exit $rc: $(head -2 "$out")"
# Forced where there is none (one host): the call fails naming what is.
BRAID_ALGO=allreduce:hier "$BRAIDRUN" -n 2 "$RANK" -t 64 >"$out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "BRAID_ALGO forces hier for allreduce of 64 bytes on 2 ranks, but no such candidate can run it on this communicator (available: " "$out" ||
  fail "BRAID_ALGO=allreduce:hier on one host: exit $rc: $(grep -m1 -i 'error\|fail' "$out")"

[ "$failures" -eq 0 ] && echo "hier choice: all checks passed"
exit $((failures > 0))
