#!/usr/bin/env bash
# Chunk and segment sizes from measurements: rebuilds one algorithm plugin
# once per value of one of its compile-time sizes (into a temporary
# directory that BRAID_PLUGIN_PATH puts first), then runs braid-bench for
# every value in turn, ROUNDS rounds, so that every value sees the same
# machine; prints every round and the median time per value.
#
#   bench/chunk_sweep.sh BUILD PLUGIN MACRO "V1 V2 ..." RANKS SIZE ROUNDS CAND [COLL]
#   e.g. bench/chunk_sweep.sh build bw BRAID_BW_PULL_CHUNK \
#            "65536 131072 262144 524288 1048576" 2 67108864 5 pull@shm
#
# PLUGIN is a folder of plugins/algorithms (bw, p2p); MACRO one of its
# #ifndef sizes (bw.h: BRAID_BW_PULL_CHUNK, BRAID_BW_PIPE_CHUNK,
# BRAID_BW_PIPE_DEPTH, BRAID_BW_PULL_MAX_GET, BRAID_BW_BUDGET; p2p: BRAID_P2P_SEG_BYTES (ring),
# BRAID_P2P_RAB_SEG_BYTES (rabenseifner)).  ITERS (default 20, 5 from
# 16 MiB) calls per run.
set -uo pipefail
usage="usage: chunk_sweep.sh BUILD PLUGIN MACRO \"V1 V2 ...\" RANKS SIZE ROUNDS CAND [COLL]"
build=${1:?$usage} plugin=${2:?$usage} macro=${3:?$usage} values=${4:?$usage}
n=${5:?$usage} size=${6:?$usage} rounds=${7:?$usage} cand=${8:?$usage}
coll=${9:-allreduce}
here=$(cd "$(dirname "$0")/.." && pwd)
src="$here/plugins/algorithms/$plugin"
[ -d "$src" ] || { echo "no plugin folder $src" >&2; exit 2; }
iters=${ITERS:-$([ "$size" -ge 16777216 ] && echo 5 || echo 20)}
tmp=$(mktemp -d /tmp/braid-sweep.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

for v in $values; do
  mkdir -p "$tmp/$v"
  # The plugin as meson builds it (public headers only, every .c but the
  # unit tests' mocks), with the one size overridden.
  cc -std=c11 -O2 -g -fPIC -shared -fvisibility=hidden -D_GNU_SOURCE \
     -I"$here/core/include" -D"$macro=((size_t)$v)" "$src"/*.c \
     -o "$tmp/$v/libbraid-$plugin.so" -lm || exit 1
done

declare -A times
for ((r = 1; r <= rounds; r++)); do
  line="round $r:"
  for v in $values; do
    t=$(BRAID_PLUGIN_PATH="$tmp/$v" "$build/tools/braidrun" -n "$n" \
          "$build/bench/braid-bench" -C "$coll" -b "$size" -e "$size" \
          -n "$iters" -w 2 -c 0 -i 0 --algo "$cand" 2>/dev/null |
        awk -v s="$size" '$2 == s { print $7 }')
    times[$v]="${times[$v]:-} ${t:-nan}"
    line="$line $v=${t:-?}us"
  done
  echo "$line"
done
echo "$coll $size B on $n ranks, $cand, $macro: median over $rounds rounds"
for v in $values; do
  printf '  %-10s %12.1f us\n' "$v" "$(printf '%s\n' ${times[$v]} | median)"
done
