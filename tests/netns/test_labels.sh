#!/usr/bin/env bash
# Topology detection without namespaces (no root needed), and braidrun's
# refusals of bad --netns options.  Ranks given
# different BRAID_HOSTNAMEs are different hosts to braid, the hop-count
# probe runs between them over loopback and finds every pair 0 routers
# apart -- a switch -- and every rank says the same.  The same code path
# as on an emulated or real cluster, under the sanitizers too.
#
# usage: test_labels.sh BRAIDRUN NETNS_RANK
set -u
BRAIDRUN=$1 RANK=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failures=0
"$BRAIDRUN" -n 4 sh -c 'BRAID_HOSTNAME=h$((BRAID_RANK / 2)) exec "$0" -c 8' \
    "$RANK" >"$out" 2>&1 || { echo "FAIL: braidrun: $(cat "$out")"; exit 1; }
want="switch of 2 hosts, up to 2 ranks per host (detected from IP TTL hop counts between hosts [0 0 | 0 0]: every pair of hosts 0 routers apart)"
got=$(sed -n 's/^\[[0-9]\] topology: //p' "$out" | sort -u)
[ "$got" = "$want" ] && [ "$(grep -cF "topology: $want" "$out")" -eq 4 ] ||
  { echo "FAIL: want 4 x '$want', got:"; cat "$out"; failures=1; }
# BRAID_TOPO=ring on some ranks only: every rank fails, naming it.
"$BRAIDRUN" -n 2 sh -c 'export BRAID_HOSTNAME=h$BRAID_RANK;
    [ "$BRAID_RANK" = 1 ] && export BRAID_TOPO=ring; exec "$0"' "$RANK" \
    >"$out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && grep -q "BRAID_TOPO differs" "$out" ||
  { echo "FAIL: BRAID_TOPO on one rank only: exit $rc"; cat "$out"; failures=1; }
# braidrun's --netns options, refused before anything is built (no root
# needed for these).
fail() { echo "FAIL: $*"; failures=1; }
expect_refusal() { # WANT-STATUS WANT-TEXT ARGS...
  local want=$1 text=$2
  shift 2
  "$BRAIDRUN" "$@" true >"$out" 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] && grep -qF -- "$text" "$out" || fail "braidrun $*: exit $rc: $(head -2 "$out")"
}
expect_refusal 2 "--netns='mesh': expected 'switch' or 'ring'" --netns mesh -n 2
expect_refusal 2 "--link-rate='1gb': unexpected 'gb' at position 1" --netns switch --link-rate 1gb -n 2
expect_refusal 2 "--link-delay='5ms': unexpected 'ms' at position 1" --netns ring --link-delay 5ms -n 2
expect_refusal 2 "need --netns switch|ring" --ranks-per-host 2 -n 2
"$BRAIDRUN" --netns ring -n 2 --link-rate >"$out" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -qF "option --link-rate needs a value" "$out" || fail "missing value: exit $rc: $(head -1 "$out")"

[ "$failures" -eq 0 ] && echo "labels: $got"
exit "$failures"
