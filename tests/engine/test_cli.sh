#!/bin/sh
# braid-infer end to end: the issue's command, --json, --save/--model, end
# of sequence, --prompt through a tokenizer.json, threads, sampling, and the
# refusals (usage errors exit 2, an uneven tensor-parallel split fails on
# every rank).
# usage: test_cli.sh BRAIDRUN BRAID_INFER
set -u
run=$1 infer=$2
tmp=$(mktemp -d /tmp/braid-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ids_of() { sed -n 's/^\[0\] ids: //p' "$1"; }

# The issue's command: 2 ranks, 16 greedy tokens, figures and candidates.
"$run" -n 2 "$infer" --preset tiny --prompt-ids 1,2,3 -g 16 >"$tmp/two" 2>&1 ||
    fail "tiny on 2 ranks: $(cat "$tmp/two")"
[ "$(ids_of "$tmp/two" | tr ',' '\n' | wc -l)" -eq 16 ] || fail "16 ids: $(cat "$tmp/two")"
grep -q '^\[0\] decode: 15 tokens in .* tok/s, .* ms/token (all-reduce .*%, 5 per token; other collectives .*%)' "$tmp/two" ||
    fail "decode line: $(cat "$tmp/two")"
grep -q '^\[0\] all-reduce decode: 256 B x 75 -> [a-z]' "$tmp/two" || fail "candidate line"
grep -q '^\[0\] memory: rank 0 RSS .* rank 1 RSS' "$tmp/two" || fail "memory line"
"$run" -n 1 "$infer" --preset tiny --prompt-ids 1,2,3 -g 16 >"$tmp/one" 2>&1 || fail "1 rank"
[ "$(ids_of "$tmp/one")" = "$(ids_of "$tmp/two")" ] || fail "1 and 2 ranks generate different ids"

# Threads per rank change who computes what, not the result's tokens.
"$run" -n 1 -b none "$infer" --preset tiny --prompt-ids 1,2,3 -g 16 --threads 3 >"$tmp/t3" 2>&1 || fail "3 threads"
grep -q '1 rank x 3 threads' "$tmp/t3" || fail "--threads 3 not taken: $(head -1 "$tmp/t3")"
[ "$(ids_of "$tmp/t3")" = "$(ids_of "$tmp/one")" ] || fail "3 threads generate other ids than 1"

# --json: one object with the figures.
"$run" -n 2 "$infer" --preset tiny --prompt-ids 5,6 -g 4 --json >"$tmp/json" 2>&1 || fail "--json"
for key in '"ranks":2' '"decode_tok_s":' '"allreduce_share_decode":' '"rss_bytes":\[' \
           '"candidate":"' '"ids":\[' '"bytes_per_token":'; do
    grep -q "^\[0\] {.*$key" "$tmp/json" || fail "--json lacks $key: $(cat "$tmp/json")"
done
"$run" -n 1 "$infer" --preset tiny --prompt-ids 5,6 -g 4 --json="$tmp/out.json" >/dev/null 2>&1 &&
    grep -q '"generated_tokens":4' "$tmp/out.json" || fail "--json=FILE"

# A saved preset (sharded) loads back to the same model: same ids.
"$infer" --preset tiny --save "$tmp/ckpt" --shards 2 --dtype bf16 >/dev/null || fail "--save"
[ -f "$tmp/ckpt/model.safetensors.index.json" ] || fail "no index written"
"$run" -n 2 "$infer" --model "$tmp/ckpt" --prompt-ids 1,2,3 -g 8 >"$tmp/m" 2>&1 || fail "--model: $(cat "$tmp/m")"
"$run" -n 2 "$infer" --preset tiny --dtype bf16 --prompt-ids 1,2,3 -g 8 >"$tmp/p" 2>&1 || fail "--preset bf16"
[ -n "$(ids_of "$tmp/m")" ] && [ "$(ids_of "$tmp/m")" = "$(ids_of "$tmp/p")" ] ||
    fail "saved checkpoint generates other ids than the preset"

# End of sequence: generation_config.json's eos_token_id stops generation
# at the first token here (greedy starts with the one the preset run gave).
"$infer" --preset tiny --save "$tmp/eos" >/dev/null || fail "--save tiny"
first=$(ids_of "$tmp/one" | cut -d, -f1)
echo "{\"eos_token_id\": [299, $first]}" >"$tmp/eos/generation_config.json"
"$run" -n 2 "$infer" --model "$tmp/eos" --prompt-ids 1,2,3 -g 16 >"$tmp/e1" 2>&1 || fail "eos run"
[ "$(ids_of "$tmp/e1")" = "$first" ] || fail "did not stop at eos $first: $(ids_of "$tmp/e1")"
"$run" -n 2 "$infer" --model "$tmp/eos" --prompt-ids 1,2,3 -g 16 --ignore-eos >"$tmp/e2" 2>&1 || fail "--ignore-eos run"
[ "$(ids_of "$tmp/e2")" = "$(ids_of "$tmp/one")" ] || fail "--ignore-eos: $(ids_of "$tmp/e2")"

# --prompt through a tokenizer.json: byte-level vocabulary (ids 0-255) and
# two merges ("h e" -> 256, "l l" -> 257).
python3 - "$tmp/ckpt/tokenizer.json" <<'PY' || fail "writing tokenizer.json"
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
tok = dict(zip(bs, map(chr, cs)))
vocab = {tok[b]: b for b in range(256)}
vocab["he"], vocab["ll"] = 256, 257
json.dump({"model": {"type": "BPE", "vocab": vocab, "merges": ["h e", "l l"]},
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "decoder": {"type": "ByteLevel"},
           "added_tokens": [{"id": 299, "content": "<|end|>", "special": True}]},
          open(sys.argv[1], "w"))
PY
"$run" -n 2 "$infer" --model "$tmp/ckpt" --prompt "hello" -g 6 --json="$tmp/t.json" >/dev/null 2>&1 ||
    fail "--prompt"
"$run" -n 2 "$infer" --model "$tmp/ckpt" --prompt-ids 256,257,111 -g 6 --json="$tmp/i.json" >/dev/null 2>&1 ||
    fail "--prompt-ids with a tokenizer"
grep -q '"prompt_tokens":3,' "$tmp/t.json" || fail "'hello' is not 3 tokens: $(cat "$tmp/t.json")"
a=$(grep -o '"ids":\[[0-9,]*\]' "$tmp/t.json"); b=$(grep -o '"ids":\[[0-9,]*\]' "$tmp/i.json")
[ -n "$a" ] && [ "$a" = "$b" ] || fail "--prompt 'hello' and --prompt-ids 256,257,111 differ: $a / $b"
grep -q '"text":"' "$tmp/t.json" || fail "no text in --json with a tokenizer"
"$run" -n 1 "$infer" --model "$tmp/ckpt" --prompt "hello" -g 3 >"$tmp/txt" 2>&1 &&
    grep -q '^\[0\] output: ' "$tmp/txt" || fail "text output line: $(cat "$tmp/txt")"

# Sampling: the same seed gives the same ids on 1 and 2 ranks.
"$run" -n 1 "$infer" --preset tiny --prompt-ids 7 -g 12 --temperature 0.9 --top-p 0.95 --seed 3 >"$tmp/s1" 2>&1 || fail "sampling 1"
"$run" -n 2 "$infer" --preset tiny --prompt-ids 7 -g 12 --temperature 0.9 --top-p 0.95 --seed 3 >"$tmp/s2" 2>&1 || fail "sampling 2"
[ -n "$(ids_of "$tmp/s1")" ] && [ "$(ids_of "$tmp/s1")" = "$(ids_of "$tmp/s2")" ] || fail "sampled ids differ between 1 and 2 ranks"
"$run" -n 1 "$infer" --preset tiny --prompt-ids 7 -g 12 >"$tmp/g" 2>&1
[ "$(ids_of "$tmp/s1")" != "$(ids_of "$tmp/g")" ] || fail "sampling at temperature 0.9 gave the greedy ids"

# Usage errors: exit status 2 and a message naming the problem.
expect_usage() {
    want=$1; shift
    "$infer" "$@" >"$tmp/err" 2>&1; rc=$?
    [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/err" || fail "'$*': exit $rc, wanted 2 and '$want': $(head -2 "$tmp/err")"
}
expect_usage "unknown or incomplete option '--bogus'" --preset tiny --prompt-ids 1 --bogus
expect_usage "--gen: '12x': unexpected 'x'" --preset tiny --prompt-ids 1 -g 12x
expect_usage "--dtype: 'f64' is not f32, bf16 or f16" --preset tiny --prompt-ids 1 --dtype f64
expect_usage "give one of --model DIR and --preset NAME" --prompt-ids 1
expect_usage "give one of --prompt, --prompt-ids and --prompt-len" --preset tiny
expect_usage "--top-p: 0 is out of range" --preset tiny --prompt-ids 1 --top-p 0

# Run-time refusals: exit 1 with the reason, on every rank.
"$run" -n 3 "$infer" --preset tiny --prompt-ids 1 >"$tmp/three" 2>&1 && fail "3 ranks accepted"
[ "$(grep -c 'num_key_value_heads 2 is not divisible by 3 (rank counts that work: 1, 2)' "$tmp/three")" -eq 3 ] ||
    fail "uneven split not refused on every rank: $(cat "$tmp/three")"
"$infer" --preset tiny --prompt "hi" >"$tmp/e" 2>&1 && fail "--prompt without tokenizer accepted"
grep -q "needs a tokenizer" "$tmp/e" || fail "--prompt without tokenizer: $(cat "$tmp/e")"
"$infer" --preset tiny --prompt-ids 1,300 >"$tmp/e" 2>&1 && fail "id 300 accepted"
grep -q "id 300 at character 3 is out of range \[0, 299\]" "$tmp/e" || fail "id range: $(cat "$tmp/e")"
"$infer" --preset tiny --prompt-ids 1 --ctx 2 -g 5 >"$tmp/e" 2>&1 && fail "--ctx too small accepted"
grep -q -- "--ctx 2 holds fewer positions than the prompt (1) and the generated tokens (5) need" "$tmp/e" ||
    fail "--ctx: $(cat "$tmp/e")"
"$infer" --model "$tmp/nowhere" --prompt-ids 1 >"$tmp/e" 2>&1 && fail "missing model accepted"
grep -q "nowhere/config.json" "$tmp/e" || fail "missing model: $(cat "$tmp/e")"

[ $fails -eq 0 ] && echo "engine-cli: all passed" || echo "engine-cli: $fails failed"
[ $fails -eq 0 ]
