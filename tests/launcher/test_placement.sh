#!/usr/bin/env bash
# The core learns which CPU each rank is pinned to (braidrun pins rank r to
# CPU r mod ncpu by default; --bind none leaves them free), and says so at
# BRAID_DEBUG=info.  The lowhop algorithms and the core's wait use it to
# tell which ranks take turns on one CPU, so a wrong list would make ranks
# spin while the rank they wait for cannot run.
#
# usage: test_placement.sh BRAIDRUN BRAID_BENCH
set -u
BRAIDRUN=$1 BENCH=$2
failures=0
ncpu=$(nproc)
n=$((ncpu + 1))

# line RANKS BRAIDRUN-ARGS...: rank 0's "pinned to CPUs [...]" list
cpus() {
  local ranks=$1
  shift
  BRAID_DEBUG=info "$BRAIDRUN" "$@" -n "$ranks" "$BENCH" -b 8 -e 8 -n 1 \
      -w 0 -c 0 2>&1 | sed -n 's/.*pinned to CPUs \[\([^]]*\)\].*/\1/p' |
    head -1
}

want=""
allowed=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //')
# The CPUs this shell may use, in order (braidrun counts the same way).
list=()
for part in ${allowed//,/ }; do
  if [[ $part == *-* ]]; then
    for ((c = ${part%-*}; c <= ${part#*-}; c++)); do list+=("$c"); done
  else
    list+=("$part")
  fi
done
if [ "${#list[@]}" -eq 0 ]; then # no taskset: assume CPUs 0..ncpu-1
  for ((c = 0; c < ncpu; c++)); do list+=("$c"); done
fi
for ((r = 0; r < n; r++)); do
  want+="${want:+ }${list[r % ${#list[@]}]}"
done

got=$(cpus "$n")
if [ "$got" != "$want" ]; then
  echo "FAIL: pinned ranks: want CPUs [$want], got [$got]"
  failures=$((failures + 1))
fi
want_free=$(for ((r = 0; r < n; r++)); do printf '%s-1' "${r:+ }"; done)
want_free=${want_free# }
got=$(cpus "$n" --bind none)
if [ "$got" != "$want_free" ] && [ "$ncpu" -gt 1 ]; then
  echo "FAIL: unpinned ranks: want [$want_free], got [$got]"
  failures=$((failures + 1))
fi
[ "$failures" -eq 0 ] && echo "placement: pinned [$want], unpinned [$want_free]"
exit $((failures > 0))
