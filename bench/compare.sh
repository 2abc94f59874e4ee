#!/usr/bin/env bash
# braid against Open MPI and torch's Gloo, in one session: every braid
# candidate, the automatic choice (without and with braid-tune's table),
# the automatic choice again in a job of its own (braid-bench: one
# communicator, as an application and the peers' benchmarks run),
# MPI_Allreduce/MPI_Reduce_scatter_block/MPI_Allgather and Gloo's
# all_reduce/all_gather, taking turns round after round so that a shared,
# noisy machine hits them alike.  Prints the tables of docs/tuning.md
# ("Reading compare.sh"): bus bandwidth against the peers, the oracle gap
# (the automatic choice against the best forced candidate), and the cost
# model's estimate next to every candidate's measured time; writes every
# measurement and the charts (bench/plot.sh) to OUT.
#
#   bench/compare.sh BUILD_DIR [RANKS...]        (default ranks: 2 4 8)
#
# Environment (defaults in brackets):
#   OUT=DIR            where everything goes [compare-<date>-<time>]
#   ROUNDS=N           rounds [3]; each round runs braid, Open MPI, Gloo
#   SMALL_ROUNDS=N     braid-tune's rounds within each of them up to
#                      SMALL_MAX, where a round of every candidate takes
#                      a second at most and one round times 5-10% off
#                      another [5]
#   SMALL_MAX=SIZE     braid-tune --small-max [16M]
#   AR="MIN MAX F"     all-reduce sizes: MIN, times F, up to MAX [8 256M 4]
#   RSAG="MIN MAX F"   reduce_scatter and allgather sizes [1M 256M 16]
#   ITERS=N            calls per round up to 256 KiB, fewer above [20]
#   TUNE=0|1           make braid-tune's table first, time 'tuned' with it [1]
#   MPI=0|1 GLOO=0|1   time Open MPI, Gloo [1, 1]
#   ALONE=0|1          time the automatic choice alone (series 'alone') [1]
#   PRUNE=F            braid-tune --prune F (0: every candidate everywhere) [0]
#   RACE=N             braid-tune --race N: calls a round of the series
#                      near the fastest and of auto and tuned [16]
#   MEM=braid|host     the buffers: braid: each library's own allocator
#                      (braid_mem_alloc for braid, MPI_Alloc_mem for Open
#                      MPI; torch's tensors for Gloo), as an application
#                      that follows each library's advice; host: malloc
#                      for braid and Open MPI [braid]
#   QUICK=1            a smoke run: 2 ranks, all-reduce 8 B-4 KiB, reduce_scatter
#                      and allgather at 64 KiB, one round of 5 calls, Gloo's
#                      all-reduce only (each torch job takes seconds to start)
# Sizes are the larger buffer (nccl-tests' "size").  The commands, with
# the figures they gave on this machine, are in docs/performance.md.
set -uo pipefail
build=${1:?usage: compare.sh BUILD_DIR [RANKS...]}; shift
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
if [ "${QUICK:-0}" = 1 ]; then
  ranks=${*:-2}
  : "${ROUNDS:=1}" "${AR:=8 4K 16}" "${RSAG:=64K 64K 2}" "${ITERS:=5}"
  : "${SMALL_ROUNDS:=1}"
else
  ranks=${*:-2 4 8}
fi
rounds=${ROUNDS:-3} ar=(${AR:-8 256M 4}) rsag=(${RSAG:-1M 256M 16})
iters=${ITERS:-20} tune=${TUNE:-1} mpi=${MPI:-1} gloo=${GLOO:-1}
alone=${ALONE:-1} small=${SMALL_ROUNDS:-5} small_max=${SMALL_MAX:-16M}
prune=${PRUNE:-0} race=${RACE:-16} mem=${MEM:-braid}
case $mem in
  braid) bmem=braid mmem=mpi ;;
  host) bmem=host mmem=host ;;
  *) echo "compare.sh: MEM='$mem': expected braid or host" >&2; exit 2 ;;
esac
out=${OUT:-compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
braidrun=$build/tools/braidrun tunebin=$build/tools/braid-tune
benchbin=$build/bench/braid-bench
floorbin=$build/bench/braid-ring-floor
mpibench=$build/bench/mpi-allreduce-bench
log=$out/log.txt
: >"$log"
: >"$out/placement.txt"

say() { echo "compare.sh: $*" >&2; echo "$*" >>"$log"; }
run() { say "+ $*"; "$@" >>"$log" 2>&1; local rc=$?; [ $rc -eq 0 ] || say "exit status $rc: $*"; return $rc; }

[ -x "$tunebin" ] || { echo "compare.sh: no $tunebin (build first)" >&2; exit 1; }
if [ "$alone" = 1 ] && [ ! -x "$benchbin" ]; then
  say "no $benchbin: the automatic choice is not timed alone"; alone=0
fi
if [ "$mpi" = 1 ] && [ ! -x "$mpibench" ]; then
  say "no $mpibench (Open MPI not found at build time): Open MPI skipped"; mpi=0
fi
if [ "$gloo" = 1 ] && ! /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
  say "no torch for /usr/bin/python3: Gloo skipped"; gloo=0
fi

# braid-tune over one set of sizes: -C COLLS MIN MAX F R (rounds; times
# SMALL_ROUNDS up to SMALL_MAX), then its own options.
braid_tune() {
  local n=$1 colls=$2 lo=$3 hi=$4 f=$5 r=$6; shift 6
  local sr=$((r * small > 32 ? 32 : r * small))
  run "$braidrun" -n "$n" "$tunebin" -q -C "$colls" -b "$lo" -e "$hi" -f "$f" \
      -n "$iters" --prune "$prune" --race "$race" -r "$r" --small-rounds "$sr" --small-max "$small_max" \
      --memory "$bmem" "$@"
}

# Where the hypervisor has the first two CPUs at this moment: braid-ring-
# floor's shared/alone on an 8 MiB block, near 1 where they share a cache,
# well above it where a line between them costs more than memory (which
# copy path wins follows it: docs/performance.md, "The slow mode is where
# the two vCPUs sit").  Noted before each series, in the report's header.
probe() {
  local what=$1 x
  [ -x "$floorbin" ] && [ "$(nproc)" -ge 2 ] || return 0
  x=$("$floorbin" -s 8 -r 5 2>/dev/null |
      awk '$1 == "alone" { a = $2 } $1 == "shared" { s = $2 }
           END { if (a > 0) printf "%.1f", s / a }')
  [ -n "$x" ] && echo "$what $x" >>"$out/placement.txt"
  return 0
}

# MIN MAX F of a collective's sweep.
sizes_of() { if [ "$1" = allreduce ]; then echo "${ar[@]}"; else echo "${rsag[@]}"; fi; }

# The sizes of a sweep MIN MAX F in bytes, as the benchmarks make them
# (braid-bench --sizes: MIN, times F while below MAX, then MAX).
sweep_sizes() { "$benchbin" --sizes -b "$1" -e "$2" -f "$3"; }

# Append CSV file $2's rows to $1 (its header too when $1 is new).
add_rows() {
  [ -s "$2" ] || return 0
  if [ -s "$1" ]; then tail -n +2 "$2" >>"$1"; else cat "$2" >"$1"; fi
}

# The automatic choice alone (braid-bench) and Open MPI, size by size in
# turn (which goes first alternating), so that both are timed seconds
# apart: the vCPUs' placement changes within a minute and moves a
# mid-size call 2-6x for everyone (performance.md), and a sweep each
# would set one placement against another.  Every size is a job of its
# own for both; small sizes warm up longer, as a sweep's earlier sizes
# warmed its later ones.
alone_and_mpi() {
  local n=$1 r=$2 c s i=0 w who order tmp=$out/.one.csv
  for c in allreduce reduce_scatter allgather; do
    for s in $(sweep_sizes $(sizes_of $c)); do
      w=2
      [ "$s" -le $((256 << 10)) ] && w=20
      order="alone mpi"
      ((i++ % 2)) && order="mpi alone"
      for who in $order; do
        rm -f "$tmp"
        if [ "$who" = alone ] && [ "$alone" = 1 ]; then
          run "$braidrun" -n "$n" "$benchbin" -C $c -b "$s" -e "$s" \
            -n "$iters" -w "$w" -c 0 -i 0 -M "$bmem" --csv "$tmp" &&
            add_rows "$out/alone-n$n-r$r-$c.csv" "$tmp"
        elif [ "$who" = mpi ] && [ "$mpi" = 1 ]; then
          run mpirun --allow-run-as-root --oversubscribe -np "$n" "$mpibench" \
            -C $c -b "$s" -e "$s" -n "$iters" -w "$w" -a 1 -M "$mmem" -o "$tmp" &&
            add_rows "$out/mpi-n$n-r$r-$c.csv" "$tmp"
        fi
      done
    done
  done
  rm -f "$tmp"
}

for n in $ranks; do
  table=$out/tune-n$n.txt
  tf=()
  if [ "$tune" = 1 ]; then
    # The table comes from its own run: judging it on the measurements it
    # was made from would only measure their noise.
    rm -f "$table"
    braid_tune "$n" allreduce "${ar[@]}" "$rounds" -o "$table" &&
      braid_tune "$n" reduce_scatter,allgather "${rsag[@]}" "$rounds" \
        -o "$table" --merge && tf=(--tune-file "$table")
  fi
  for ((r = 1; r <= rounds; r++)); do
    probe "n$n r$r braid"
    braid_tune "$n" allreduce "${ar[@]}" 1 "${tf[@]}" \
      --csv "$out/braid-n$n-r$r-ar.csv"
    braid_tune "$n" reduce_scatter,allgather "${rsag[@]}" 1 "${tf[@]}" \
      --csv "$out/braid-n$n-r$r-rsag.csv"
    # braid-tune keeps a communicator per candidate alive side by side,
    # and a call runs slower in that company (docs/performance.md); the
    # peers run alone, so braid's automatic choice is also timed alone,
    # the same way (calls, warm-up, slowest rank's median).
    if [ "$alone" = 1 ] || [ "$mpi" = 1 ]; then
      probe "n$n r$r alone/ompi"
      alone_and_mpi "$n" "$r"
    fi
    if [ "$gloo" = 1 ]; then
      gcolls="allreduce allgather" # Gloo has no reduce_scatter
      [ "${QUICK:-0}" = 1 ] && gcolls=allreduce
      probe "n$n r$r gloo"
      for c in $gcolls; do
        s=($(sizes_of $c))
        run timeout 3600 /usr/bin/python3 "$here/../tools/braid-torchrun" \
          --nproc_per_node "$n" "$here/torch_allreduce.py" --backends gloo \
          --coll $c -b "${s[0]}" -e "${s[1]}" -f "${s[2]}" -n "$iters" -r 1 \
          --csv "$out/gloo-n$n-r$r-$c.csv"
      done
    fi
  done
done

csvs=()
for f in "$out"/braid-*.csv "$out"/mpi-*.csv "$out"/gloo-*.csv; do
  [ -s "$f" ] && csvs+=("$f")
done
# braid-bench's CSV names the candidate that ran; plot.sh and tune_report.py
# take LABEL=FILE for the series name.
for f in "$out"/alone-*.csv; do
  [ -s "$f" ] && csvs+=("alone=$f")
done
[ ${#csvs[@]} -gt 0 ] || { echo "compare.sh: nothing was measured (see $log)" >&2; exit 1; }
{
  echo "# bench/compare.sh $build $ranks (ROUNDS=$rounds SMALL_ROUNDS=$small SMALL_MAX=$small_max AR='${ar[*]}' RSAG='${rsag[*]}' ITERS=$iters TUNE=$tune PRUNE=$prune RACE=$race ALONE=$alone MEM=$mem) on $(hostname), $(date '+%Y-%m-%d %H:%M')"
  echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ -s "$out/placement.txt" ] &&
    echo "# CPU placement before each series (braid-ring-floor -s 8 shared/alone; ~1: a shared cache, >= 3: none): $(paste -sd, "$out/placement.txt" | sed 's/,/, /g')"
  /usr/bin/python3 "$here/tune_report.py" compare "${csvs[@]}"
} | tee "$out/report.txt"
"$here/plot.sh" -o "$out/png" "${csvs[@]}" >/dev/null &&
  echo "# charts: $out/png" | tee -a "$out/report.txt"
echo "# everything: $out"
