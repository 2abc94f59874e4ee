#!/usr/bin/env bash
# braidrun switches glibc's per-thread rseq off for its ranks when there are
# more ranks than CPUs it may use (every hand-off between ranks pays for the
# rseq update otherwise), appends to a GLIBC_TUNABLES of the user's, keeps a
# user's own rseq setting, and leaves everything alone when each rank has a
# CPU.
#
# usage: test_tunables.sh BRAIDRUN
set -u
BRAIDRUN=$1
failures=0
ncpu=$(nproc)
over=$((ncpu + 1))

# expect DESCRIPTION WANT RANKS [ENV...]: every rank must print WANT.
expect() {
  local what=$1 want=$2 n=$3 out
  shift 3
  out=$(env "$@" "$BRAIDRUN" -n "$n" /bin/sh -c \
        'echo "tunables=[$GLIBC_TUNABLES]"' 2>&1)
  local got ok
  got=$(printf '%s\n' "$out" | grep -c -F -- "tunables=[$want]")
  ok=$([ "$got" -eq "$n" ] && echo 1 || echo 0)
  if [ "$ok" != 1 ]; then
    echo "FAIL: $what: want [$want] on $n ranks, got:"
    printf '%s\n' "$out"
    failures=$((failures + 1))
  fi
}

expect "oversubscribed ($over ranks on $ncpu CPUs)" \
  "glibc.pthread.rseq=0" "$over" -u GLIBC_TUNABLES
expect "oversubscribed, appended to the user's tunables" \
  "glibc.malloc.check=0:glibc.pthread.rseq=0" "$over" \
  GLIBC_TUNABLES=glibc.malloc.check=0
expect "oversubscribed, the user's rseq setting kept" \
  "glibc.pthread.rseq=1" "$over" GLIBC_TUNABLES=glibc.pthread.rseq=1
expect "one rank per CPU ($ncpu ranks)" "" "$ncpu" -u GLIBC_TUNABLES

[ "$failures" -eq 0 ] && echo "braidrun tunables: 4 cases passed"
exit $((failures > 0))
