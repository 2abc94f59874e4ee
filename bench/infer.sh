#!/usr/bin/env bash
# braid-infer on the qwen3-0.6b preset (bf16): prefill and decode tok/s at 1
# and 2 ranks, with every all-reduce candidate forced in turn
# (BRAID_ALGO=allreduce:<candidate>) and with the dispatcher's own choice;
# the share of decode time inside all-reduce; resident memory per rank; and
# decode next to its bandwidth bound (a one-thread streaming read, measured
# here by braid-stream-read, over the bytes of weights each token reads).
#
#   bench/infer.sh [BUILD_DIR=build] [ROUNDS=5]
#   PROMPT=128 GEN=64 THREADS=1 (per rank)  CKPT=dir (default: a temporary
#   checkpoint written once with --save, so every run loads real files)
#   PRESET=qwen3-0.6b (tiny: a smoke test)  STREAM_SIZE=1G
#   CANDIDATES="ring@shm oneshot@shm" (default: every allreduce candidate
#   braid-info -n 2 lists)  KEEP=1 keeps the checkpoint  OUT=file.md
#
# Rounds alternate every configuration (1 rank, 2 ranks auto, 2 ranks with
# each candidate), so that all see the same machine; the table gives medians
# over rounds.  The bound uses a streaming read over huge pages, as the
# weights are mapped (4 KiB pages are printed too).  Run it on a quiet
# machine: a busy core stalls the other rank inside the all-reduce and
# inflates its share.
set -uo pipefail
build=${1:-build} rounds=${2:-5}
prompt=${PROMPT:-128} gen=${GEN:-64} threads=${THREADS:-1}
preset=${PRESET:-qwen3-0.6b} stream_size=${STREAM_SIZE:-1G}
infer=$build/engine/braid-infer braidrun=$build/tools/braidrun
info=$build/tools/braid-info stream=$build/bench/braid-stream-read
for x in "$infer" "$braidrun" "$info" "$stream"; do
  [ -x "$x" ] || { echo "bench/infer.sh: $x not built (make build)"; exit 1; }
done
py=python3
command -v "$py" >/dev/null || { echo "bench/infer.sh: needs python3 (json)"; exit 1; }

tmp=$(mktemp -d /tmp/braid-infer-bench-XXXXXX)
ckpt=${CKPT:-$tmp/$preset}
cleanup() { if [ -z "${KEEP:-}" ]; then rm -rf "$tmp"; else echo "kept $tmp"; fi; }
trap cleanup EXIT
if [ ! -f "$ckpt/config.json" ]; then
  echo "writing the $preset preset (bf16) to $ckpt"
  "$infer" --preset "$preset" --dtype bf16 --save "$ckpt" >/dev/null || exit 1
fi

# The all-reduce candidates of 2 ranks on this host, from braid-info's
# selection table (names change as plugins do: never hard-coded).
if [ -n "${CANDIDATES:-}" ]; then
  cands=$CANDIDATES
else
  cands=$("$info" -n 2 2>/dev/null | sed 's/^\[[0-9]*\] //' |
    awk '/^allreduce$/ { on = 1; next } on && /^[a-z_]+$/ { on = 0 }
         on && /^ *estimate us/ { for (i = 3; i <= NF; i++) print $i }' |
    sort -u | tr '\n' ' ')
fi
[ -n "$cands" ] || { echo "bench/infer.sh: no allreduce candidates from braid-info"; exit 1; }
echo "candidates: $cands"

configs=("1 auto" "2 auto")
for c in $cands; do configs+=("2 $c"); done
common=(--model "$ckpt" -p "$prompt" -g "$gen" --ignore-eos --threads "$threads")

for ((r = 1; r <= rounds; r++)); do
  taskset -c 0 "$stream" -s "$stream_size" -r 5 | sed "s/^/round $r: /" | tee -a "$tmp/stream.txt"
  taskset -c 0 "$stream" -s "$stream_size" -r 5 -p 4k | sed "s/^/round $r: /" | tee -a "$tmp/stream4k.txt"
  for cfg in "${configs[@]}"; do
    set -- $cfg
    n=$1 cand=$2 out="$tmp/run-$r-$n-${cand//@/_}.json"
    if [ "$cand" = auto ]; then env=(); else env=(BRAID_ALGO="allreduce:$cand"); fi
    if env "${env[@]}" "$braidrun" -n "$n" "$infer" "${common[@]}" --json="$out" \
         >"$tmp/log" 2>&1; then
      echo "round $r: $n rank(s) $cand: $("$py" -c 'import json,sys; j=json.load(open(sys.argv[1])); print("prefill %.1f tok/s, decode %.2f tok/s, all-reduce %.1f%%" % (j["prefill_tok_s"], j["decode_tok_s"], 100*j["allreduce_share_decode"]))' "$out")"
    else
      echo "round $r: $n rank(s) $cand: failed: $(tail -2 "$tmp/log" | tr '\n' ' ')"
    fi
  done
done

"$py" - "$tmp" "$rounds" "$prompt" "$gen" "$threads" "$cands" "$preset" <<'PY' | tee "${OUT:-/dev/null}"
import glob, json, os, re, statistics, sys
tmp, rounds, prompt, gen, threads, cands, preset = sys.argv[1:8]
def stream(name):
    return [float(m.group(1)) for m in
            (re.search(r"median ([0-9.]+) GB/s", l) for l in open(os.path.join(tmp, name)))
            if m]
bw, bw4k = stream("stream.txt"), stream("stream4k.txt")
bw_med = statistics.median(bw)
def runs(n, cand):
    out = []
    for f in glob.glob(os.path.join(tmp, "run-*-%s-%s.json" % (n, cand.replace("@", "_")))):
        out.append(json.load(open(f)))
    return out
med = lambda xs: statistics.median(xs) if xs else float("nan")
rows = [("1", "auto")] + [("2", "auto")] + [("2", c) for c in cands.split()]
print("%s preset, bf16, prompt %s, %s generated, %s thread(s) per rank, "
      "median of %s rounds" % (preset, prompt, gen, threads, rounds))
print("one-thread streaming read: median %.2f GB/s (%s), huge pages as the "
      "weights; with 4 KiB pages %.2f GB/s (%s)" %
      (bw_med, ", ".join("%.1f" % b for b in bw), statistics.median(bw4k),
       ", ".join("%.1f" % b for b in bw4k)))
print()
print("| ranks | all-reduce | served by | prefill tok/s | decode tok/s | ms/token | "
      "all-reduce share of decode | RSS per rank (MiB) | bytes/token/rank (MB) | "
      "bound tok/s | decode / bound |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
base = None
for n, cand in rows:
    js = runs(n, cand)
    if not js:
        print("| %s | %s | (no run succeeded) |||||||||" % (n, cand))
        continue
    dec = med([j["decode_tok_s"] for j in js])
    bpt = js[0]["bytes_per_token"]
    bound = bw_med * 1e9 / bpt
    served = sorted({"%s %d B" % (a["candidate"], a["bytes"]) for j in js
                     for a in j["allreduce"] if a["phase"] == "decode"})
    if n == "1":
        base = dec
    print("| %s | %s | %s | %.1f | %.2f%s | %.1f | %.1f%% | %.0f | %.0f | %.2f | %.0f%% |" % (
        n, "forced" if cand != "auto" else "dispatcher",
        ", ".join(served) if served else "-",
        med([j["prefill_tok_s"] for j in js]), dec,
        " (%.2fx)" % (dec / base) if base and n != "1" else "",
        med([j["ms_per_token"] for j in js]),
        100 * med([j["allreduce_share_decode"] for j in js]),
        med([max(j["rss_bytes"]) for j in js]) / 2**20,
        bpt / 1e6, bound, 100 * dec / bound))
PY
