#!/usr/bin/env bash
# Emulated clusters (braidrun --netns): the namespaces appear and go away
# whatever happens to the ranks or to braidrun; ranks on different emulated
# hosts talk over the emulated network; braid detects a switch and a ring
# from the hop counts, every rank agrees, BRAID_TOPO overrides; the choice
# of candidate moves with the topology, the host count and the ranks per
# host (the hierarchical composite) where the cost model says so; bad
# options and a missing root are refused clearly.
#
# usage: test_netns.sh BRAIDRUN NETNS_RANK
# Needs root (network namespaces): skipped otherwise, saying why.
set -u
BRAIDRUN=$1 RANK=$2
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: braidrun --netns creates network namespaces, which needs root (uid $(id -u))"
  exit 77
fi
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  echo "SKIP: iproute2 (ip, tc) is not installed"
  exit 77
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The link parameters the choices below are computed from (the ucx
# transport's declared defaults, pinned so that a change there shows).
export BRAID_UCX_ALPHA_US=10 BRAID_UCX_GBPS=1.5 BRAID_TIMEOUT=30

# Whatever braidrun PID left behind: namespaces and its lock.
left_behind() {
  ls /run/netns 2>/dev/null | grep "^braid-$1-"
  ls "/run/braid-netns-$1.lock" 2>/dev/null
}

# Waits up to 30 s for braidrun PID to have started its N ranks (its
# signal handlers are in place by then; a background job of a script
# ignores SIGINT until they are).  Its reaper is a child too.
wait_up() {
  for ((i = 0; i < 600; i++)); do
    [ "$(pgrep -c -P "$1")" -gt "$2" ] && return 0
    sleep 0.05
  done
  return 1
}

# Waits up to 10 s for braidrun PID's namespaces to be gone.
wait_gone() {
  for ((i = 0; i < 200; i++)); do
    [ -z "$(left_behind "$1")" ] && return 0
    sleep 0.05
  done
  return 1
}

# run LABEL BRAIDRUN-ARGS... -- RANK-ARGS...: runs netns_rank on a cluster
# and checks exit status 0, nothing left behind, and that every rank printed
# the same topology line and choices.  Output in $out.
run() {
  local label=$1
  shift
  local args=() rargs=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  rargs=("$@")
  "$BRAIDRUN" "${args[@]}" "$RANK" "${rargs[@]}" >"$out" 2>&1 &
  local pid=$!
  wait "$pid"
  local rc=$?
  [ "$rc" -eq 0 ] || { fail "$label: exit status $rc"; sed 's/^/  /' "$out"; }
  [ -z "$(left_behind "$pid")" ] || fail "$label: left behind: $(left_behind "$pid")"
  local n
  n=$(sed -n 's/^\[\([0-9]*\)\] topology: .*/\1/p' "$out" | wc -l)
  local distinct
  distinct=$(sed -n 's/^\[[0-9]*\] \(topology\|choice\)/\1/p' "$out" | sort | uniq -c | awk '{ print $1 }' | sort -u | wc -l)
  [ "$n" -gt 0 ] && [ "$distinct" -eq 1 ] ||
    { fail "$label: ranks disagree or said nothing"; grep -E 'topology|choice' "$out" | sed 's/^/  /'; }
}

topology() { sed -n 's/^\[0\] topology: //p' "$out"; }
choice() { sed -n "s/^\[0\] choice $1: //p" "$out"; }

# 1. A switch of 4 hosts: detected, agreed, data over the network.
run "switch of 4" --netns switch -n 4 -- -c 65536 -c 131072 -t 1048576
case $(topology) in
  "switch of 4 hosts, up to 1 rank per host (detected from IP TTL hop counts"*) ;;
  *) fail "switch of 4: topology '$(topology)'" ;;
esac
[ "$(grep -c 'network: OK' "$out")" -eq 4 ] || { fail "switch of 4: data not over the network"; grep network "$out"; }
sw64=$(choice 65536) sw128=$(choice 131072)

# 2. A ring of 4 hosts, rate-limited: detected, agreed, over the network.
run "ring of 4" --netns ring -n 4 --link-rate 1gbit -- -c 65536 -t 1048576
case $(topology) in
  "ring of 4 hosts, up to 1 rank per host (detected from IP TTL hop counts between hosts [0 0 1 0 | 0 0 0 1 | 1 0 0 0 | 0 1 0 0]"*) ;;
  *) fail "ring of 4: topology '$(topology)'" ;;
esac
[ "$(grep -c 'network: OK' "$out")" -eq 4 ] || { fail "ring of 4: data not over the network"; grep network "$out"; }
ring64=$(choice 65536)

# 3. The model's choice moves with the cabling and with the host count.
#    Behind the switch every step of Rabenseifner's halving and doubling
#    crosses one link; on the ring its far steps cross two, and the ring
#    wins (docs/performance.md, "Where the choice moves").
[ "$sw64" = rabenseifner@ucx ] && [ "$ring64" = ring@ucx ] ||
  fail "64 KiB on 4 hosts: want rabenseifner@ucx on the switch, ring@ucx on the ring; got $sw64, $ring64"
run "switch of 2" --netns switch -n 2 -- -c 131072
sw2_128=$(choice 131072)
[ "$sw2_128" = recdbl@ucx ] && [ "$sw128" = rabenseifner@ucx ] ||
  fail "128 KiB behind a switch: want recdbl@ucx on 2 hosts, rabenseifner@ucx on 4; got $sw2_128, $sw128"

# 4. Two ranks per host on a ring of 3 (all neighbours: a switch), and
#    BRAID_TOPO overriding a detected ring.
run "3 hosts x 2" --netns ring -n 6 --ranks-per-host 2 -- -c 8
case $(topology) in
  "switch of 3 hosts, up to 2 ranks per host (detected"*) ;;
  *) fail "ring of 3 x 2: topology '$(topology)'" ;;
esac
# Two hosts of 2 behind the switch: the hierarchical composite (a host step
# over shm, a rail step over the network) is chosen for a small and a large
# all-reduce, by every rank, and its rail step crosses the network.
run "2 hosts x 2" --netns switch -n 4 --ranks-per-host 2 -- -c 8 -c 1048576 -t 1048576
[ "$(choice 8)" = hier ] && [ "$(choice 1048576)" = hier ] ||
  fail "2 hosts x 2: want hier at 8 B and 1 MiB; got $(choice 8), $(choice 1048576)"
[ "$(grep -c 'network: OK' "$out")" -eq 4 ] || { fail "2 hosts x 2: data not over the network"; grep network "$out"; }
BRAID_TOPO=switch run "override" --netns ring -n 4 -- -c 8
case $(topology) in
  "switch of 4 hosts, up to 1 rank per host (set by BRAID_TOPO=switch; detected"*"a ring)") ;;
  *) fail "BRAID_TOPO=switch on a ring: topology '$(topology)'" ;;
esac

# 5. A rank that dies: braidrun fails, the namespaces go.
"$BRAIDRUN" --netns switch -n 3 sh -c '[ "$BRAID_RANK" = 1 ] && kill -9 $$; sleep 20' >"$out" 2>&1 &
pid=$!
wait "$pid"
rc=$?
[ "$rc" -ne 0 ] && grep -q "rank 1 killed by signal 9" "$out" || fail "killed rank: exit $rc: $(tail -1 "$out")"
[ -z "$(left_behind "$pid")" ] || fail "killed rank: left behind: $(left_behind "$pid")"

# 6. SIGINT to braidrun: forwarded, and the namespaces go.
"$BRAIDRUN" --netns ring -n 3 sleep 30 >"$out" 2>&1 &
pid=$!
wait_up "$pid" 3 || fail "SIGINT: cluster never came up"
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || fail "SIGINT: exit status $rc, want 130"
[ -z "$(left_behind "$pid")" ] || fail "SIGINT: left behind: $(left_behind "$pid")"

# 7. SIGKILL to braidrun: its reaper removes the namespaces.
"$BRAIDRUN" --netns switch -n 2 sleep 30 >"$out" 2>&1 &
pid=$!
wait_up "$pid" 2 || fail "SIGKILL: cluster never came up"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
wait_gone "$pid" || fail "SIGKILL: left behind: $(left_behind "$pid")"

# 8. Namespaces of a braidrun that died without its reaper are removed by
#    the next one.
stale=4194000
while [ -e "/proc/$stale" ]; do stale=$((stale - 1)); done
ip netns add "braid-$stale-h0" || fail "cannot add a stale namespace"
"$BRAIDRUN" --netns switch -n 1 true >"$out" 2>&1 || fail "stale pass: braidrun failed: $(cat "$out")"
[ -z "$(left_behind "$stale")" ] || { fail "stale namespace kept"; ip netns del "braid-$stale-h0"; }

# 9. Refusals: no root, delay without netem (bad options: test_labels.sh).
if command -v setpriv >/dev/null; then
  setpriv --reuid=65534 --regid=65534 --clear-groups "$BRAIDRUN" --netns switch -n 2 true >"$out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] && grep -q "needs root" "$out" || fail "not root: exit $rc: $(cat "$out")"
else
  echo "note: no setpriv, the check without root is skipped"
fi
probe=braid-netem-probe-$$
ip netns add "$probe"
ip -n "$probe" link set lo up
if tc -n "$probe" qdisc add dev lo root netem delay 10us 2>/dev/null; then
  "$BRAIDRUN" --netns switch -n 2 --link-delay 100 true >"$out" 2>&1 || fail "--link-delay with netem: $(cat "$out")"
else
  "$BRAIDRUN" --netns switch -n 2 --link-delay 100 true >"$out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] && grep -qF "needs the kernel's netem qdisc" "$out" || fail "--link-delay without netem: exit $rc: $(cat "$out")"
fi
ip netns del "$probe"

[ "$failures" -eq 0 ] && echo "netns: all checks passed (64 KiB on 4 hosts: $sw64 on a switch, $ring64 on a ring)"
exit $((failures > 0))
