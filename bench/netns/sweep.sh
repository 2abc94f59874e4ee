#!/usr/bin/env bash
# All-reduce on emulated clusters (braidrun --netns, root): every braid
# candidate, braid's automatic choice, and Open MPI's MPI_Allreduce (its TCP
# BTL and its UCX PML) started in the same kind of cluster, swept over
# message sizes.  CSV for plotting.
#
#   bench/netns/sweep.sh BUILD_DIR [OUT.csv]
#   TOPOS="switch ring" RANKS="2 4 8" PPNS="1 2" RATE=1gbit (what each host
#   sends; "" for none)  MIN=8 MAX=64M STEP=8  ITERS=5 WARMUP=1
#   TIMING=percall|batch  ROUNDS=1 (each round runs every candidate once, in
#   turn, so that all see the same machine; the median over rounds is kept)
#   CANDS="auto ring@ucx recdbl@ucx oneshot@ucx twoshot@ucx"  MPI="tcp ucx"
#
# OUT.log collects the tools' messages.
# OUT.csv (default stdout): topo,ranks,ppn,candidate,bytes,time_us -- f32
# sum, out of place, median over ITERS of the slowest rank (braid-bench and
# mpi-allreduce-bench measure alike).  candidate is a braid candidate,
# "auto" (braid's choice, which OUT.choices.csv names per size:
# topo,ranks,ppn,bytes,choice), "ompi-tcp" or "ompi-ucx".  A forced
# candidate that cannot run a size (above its cap) has no row.
#
# Open MPI runs from host 0 of a cluster that a braidrun holds open, and
# starts its daemons on the other hosts through bench/netns/nsrsh; it uses
# eth0 only and TCP for every pair (as braid, whose shared-memory transport
# serves one-host communicators only), and yields when idle, as braid does
# when the machine has more ranks than cores.  Configurations of one host
# are skipped.  Sizes above a few MiB at 1gbit take seconds per call.
set -uo pipefail
build=${1:?usage: sweep.sh BUILD_DIR [OUT.csv]}
out=${2:-/dev/stdout}
here=$(cd "$(dirname "$0")" && pwd)
topos=${TOPOS:-switch ring} ranks=${RANKS:-2 4 8} ppns=${PPNS:-1 2}
rate=${RATE-1gbit} min=${MIN:-8} max=${MAX:-64M} step=${STEP:-8}
iters=${ITERS:-5} warmup=${WARMUP:-1} timing=${TIMING:-percall}
rounds=${ROUNDS:-1} mpis=${MPI-tcp ucx}
cands=${CANDS:-auto ring@ucx recdbl@ucx oneshot@ucx twoshot@ucx}
braidrun=$build/tools/braidrun bench=$build/bench/braid-bench
mpibench=$build/bench/mpi-allreduce-bench
[ "$(id -u)" = 0 ] || { echo "sweep.sh: braidrun --netns needs root" >&2; exit 1; }
rateopt=(); [ -n "$rate" ] && rateopt=(--link-rate "$rate")

raw=$(mktemp) choices=${out%.csv}.choices.csv log=${out%.csv}.log
[ "$out" = /dev/stdout ] && choices=/dev/stderr log=/dev/null
: >"$log"
trap 'rm -f "$raw"' EXIT

# braid, one candidate, every size: "bytes time algo" lines.
braid_run() {
  local topo=$1 n=$2 ppn=$3 cand=$4 algo=()
  [ "$cand" = auto ] || algo=(--algo "$cand")
  "$braidrun" --netns "$topo" -n "$n" --ranks-per-host "$ppn" "${rateopt[@]}" \
      "$bench" -b "$min" -e "$max" -f "$step" -n "$iters" -w "$warmup" \
      -i 0 -c 0 -t "$timing" --csv "${algo[@]}" 2>>"$log" |
    sed -n 's/^\[0\] allreduce,[0-9]*,\([0-9]*\),[0-9]*,f32,sum,\([^,]*\),out-of-place,\([0-9.]*\),.*/\1 \3 \2/p'
}

# Open MPI, one flavour, every size: "bytes time" lines.
mpi_run() {
  local topo=$1 n=$2 ppn=$3 flavour=$4 nhosts=$(((n + ppn - 1) / ppn))
  local hosts opts=()
  [ -x "$mpibench" ] || return
  hosts=$(mktemp)
  for ((h = 0; h < nhosts; h++)); do echo "10.77.0.$((h + 1)) slots=$ppn"; done >"$hosts"
  "$braidrun" --netns "$topo" -n "$n" --ranks-per-host "$ppn" "${rateopt[@]}" \
      sleep 3600 2>>"$log" &
  local holder=$!
  # Up once braidrun has started its placeholder ranks (its reaper is a
  # child too).
  for ((i = 0; i < 1200 && $(pgrep -c -P "$holder" || true) <= n; i++)); do sleep 0.05; done
  if [ "$flavour" = tcp ]; then
    # No vader: Open MPI 4.1's shared-memory BTL crashes (SIGSEGV in
    # mca_btl_vader_poll_handle_frag) between two ranks of an emulated host
    # here; braid's ranks on a multi-host communicator use the network
    # for every pair too.
    opts=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include eth0)
  else
    opts=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
          --mca btl self -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=eth0)
  fi
  ip netns exec "braid-$holder-h0" env NSRSH_OWNER="$holder" \
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      timeout 1800 mpirun --hostfile "$hosts" --mca plm_rsh_agent "$here/nsrsh" \
      -x NSRSH_OWNER -np "$n" --bind-to none --mca mpi_yield_when_idle 1 \
      "${opts[@]}" "$mpibench" -b "$min" -e "$max" -f "$step" -n "$iters" \
      -w "$warmup" -t "$timing" 2>>"$log" | awk '$1 ~ /^[0-9]+$/ { print $1, $3 }'
  kill -INT "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
  rm -f "$hosts"
}

for topo in $topos; do
  for n in $ranks; do
    for ppn in $ppns; do
      if [ "$n" -le "$ppn" ]; then
        echo "sweep.sh: $topo $n ranks, $ppn per host: one host, skipped" >&2
        continue
      fi
      for ((r = 1; r <= rounds; r++)); do
        for cand in $cands; do
          echo "sweep.sh: $topo n=$n ppn=$ppn round $r: $cand" >&2
          braid_run "$topo" "$n" "$ppn" "$cand" |
            while read -r b t a; do echo "$topo $n $ppn $cand $b $t $a"; done >>"$raw"
        done
        for f in $mpis; do
          echo "sweep.sh: $topo n=$n ppn=$ppn round $r: ompi-$f" >&2
          mpi_run "$topo" "$n" "$ppn" "$f" |
            while read -r b t; do echo "$topo $n $ppn ompi-$f $b $t -"; done >>"$raw"
        done
      done
    done
  done
done

# Median over rounds per (topo, ranks, ppn, candidate, bytes); the choice
# auto made in the median's round (they agree unless the model's inputs
# differ, which would be a bug).
{
  echo "topo,ranks,ppn,candidate,bytes,time_us"
  sort -k1,1 -k2,2n -k3,3n -k4,4 -k5,5n -k6,6g "$raw" |
    awk '{ k = $1 "," $2 "," $3 "," $4 "," $5; v[k, ++c[k]] = $6; if (!(k in o)) { o[k] = ++nk; keys[nk] = k } }
         END { for (i = 1; i <= nk; i++) { k = keys[i]; m = c[k];
                 med = m % 2 ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2;
                 print k "," med } }'
} >"$out"
{
  echo "topo,ranks,ppn,bytes,choice"
  awk '$4 == "auto" { print $1 "," $2 "," $3 "," $5 "," $7 }' "$raw" | sort -u -t, -k1,1 -k2,2n -k3,3n -k4,4n
} >"$choices"
