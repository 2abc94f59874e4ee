#!/bin/sh
# braid-infer on checkpoints braid-train writes (GPT-2 layout, byte tokens).
#
#   test_gpt.sh BRAIDRUN BRAID_TRAIN BRAID_INFER TEST_GPT
#
# Trains the tiny preset for 80 steps on a sentence said over and over (a
# second or two: enough to learn it), then:
#   - test_gpt (tests/engine/test_gpt.c) on 1, 2 and 4 ranks: braid-infer's
#     probabilities against braid-train's own forward pass, greedy tokens,
#     determinism, bitwise identical ranks; on 3 ranks the refusal;
#   - the command line: --prompt as bytes, and the rest of the sentence
#     comes back; the same ids on 1 and 2 ranks and run after run, the text
#     printed is the ids' bytes, --json;
#   - GPT2Model's names (no "transformer.") with mask buffers load to the
#     same ids; a copy of wte as lm_head.weight is accepted, another one not;
#   - broken checkpoints are refused naming the tensor: truncated, a dtype
#     mislabelled, a block matrix in nn.Linear's orientation instead of
#     Conv1D's, a tensor renamed; --dtype bf16; a vocabulary that is not
#     bytes without tokenizer.json.
set -u
run=$1 train=$2 infer=$3 test_gpt=$4
tmp=$(mktemp -d /tmp/braid-gpt-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export BRAID_TIMEOUT=${BRAID_TIMEOUT:-120}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ids_of() { sed -n 's/^\[0\] ids: //p' "$1"; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3

data=$tmp/fox.txt
i=0
while [ $i -lt 300 ]; do
    printf 'the quick brown fox jumps over the lazy dog. '
    i=$((i + 1))
done >"$data"
"$run" -n 1 "$train" --preset tiny --data "$data" --steps 80 --lr 5e-3 \
    --quiet --save "$tmp/ck" >"$tmp/train.out" 2>&1 ||
    { cat "$tmp/train.out"; echo "FAIL: braid-train"; exit 1; }

# braid-infer against braid-train's forward pass
for n in 1 2 3 4; do
    "$run" -n $n "$test_gpt" "$tmp/ck" >"$tmp/t$n" 2>&1 || fail "test_gpt on $n ranks: $(cat "$tmp/t$n")"
    grep '^\[0\] gpt2' "$tmp/t$n"
done

# The command line: bytes in, bytes out, the same ids every time.
prompt="the quick brown"
for k in 1 2 3; do
    n=$(( k == 2 ? 2 : 1 ))
    "$run" -n $n "$infer" --model "$tmp/ck" --prompt "$prompt" -g 24 >"$tmp/c$k" 2>&1 ||
        fail "braid-infer on $n ranks: $(cat "$tmp/c$k")"
done
[ "$(ids_of "$tmp/c1" | tr ',' '\n' | wc -l)" -eq 24 ] || fail "24 ids: $(cat "$tmp/c1")"
grep -q '^\[0\] output:  fox jumps over the lazy' "$tmp/c1" || fail "the sentence does not go on: $(cat "$tmp/c1")"
[ "$(ids_of "$tmp/c1")" = "$(ids_of "$tmp/c2")" ] || fail "1 and 2 ranks generate different ids"
[ "$(ids_of "$tmp/c1")" = "$(ids_of "$tmp/c3")" ] || fail "two runs generate different ids"
grep -q '^\[0\] braid-infer: .*2 layers, hidden 64, heads 4/4, vocab 256, f32 weights' "$tmp/c1" ||
    fail "header: $(head -1 "$tmp/c1")"
grep -q '^\[0\] all-reduce decode: 256 B x 115 -> ' "$tmp/c2" || fail "2 ranks: 5 all-reduces a token: $(cat "$tmp/c2")"
"$py" - "$tmp/c1" <<'PY' || fail "the text printed is not the bytes of the ids"
import sys
out = open(sys.argv[1], 'rb').read().decode('utf-8', 'replace')
ids = [int(x) for x in out.split('[0] ids: ')[1].split('\n')[0].split(',')]
text = out.split('[0] output: ')[1].split('\n[0] ids: ')[0].replace('\n[0] ', '\n')
want = bytes(ids).decode('utf-8', 'replace')
sys.exit(0 if text == want else 1)
PY
"$run" -n 2 "$infer" --model "$tmp/ck" --prompt "$prompt" -g 4 --json >"$tmp/json" 2>&1 &&
    grep -q '"dtype":"f32".*"text":"' "$tmp/json" || fail "--json: $(cat "$tmp/json")"

# edit IN OUT OP NAME: a copy of a safetensors file with one thing changed.
edit() {
    "$py" - "$@" <<'PY'
import json, struct, sys
src, dst, op, name = sys.argv[1:5]
raw = open(src, 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
head = json.loads(raw[8:8 + n])
meta = head.pop('__metadata__', None)
data = {k: raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]]
        for k, v in head.items()}
if op == 'dtype':        # mislabelled: f32 bytes called f16
    head[name]['dtype'] = 'F16'
elif op == 'linear':     # a Conv1D matrix stored (out, in)
    head[name]['shape'] = head[name]['shape'][::-1]
elif op == 'rename':
    head[name[:-1] + 'x'] = head.pop(name)
    data[name[:-1] + 'x'] = data.pop(name)
elif op == 'bare':       # GPT2Model's names, and a causal-mask buffer
    head = {k[len('transformer.'):]: v for k, v in head.items()}
    data = {k[len('transformer.'):]: v for k, v in data.items()}
    head['h.0.attn.bias'] = {'dtype': 'F32', 'shape': [1, 1, 2, 2]}
    data['h.0.attn.bias'] = struct.pack('<4f', 1, 0, 1, 1)
elif op in ('head', 'badhead'):  # a stored copy of the tied LM head
    w = bytearray(data[name])
    if op == 'badhead':  # a row each rank of 2 holds
        w[4 * 64 * 100] ^= 1
        w[4 * 64 * 200] ^= 1
    head['lm_head.weight'] = dict(head[name])
    data['lm_head.weight'] = bytes(w)
off, order = 0, list(head)
for k in order:
    head[k]['data_offsets'] = [off, off + len(data[k])]
    off += len(data[k])
if meta is not None:
    head['__metadata__'] = meta
h = json.dumps(head).encode()
h += b' ' * (-len(h) % 8)
open(dst, 'wb').write(struct.pack('<Q', len(h)) + h + b''.join(data[k] for k in order))
PY
}

# ckpt CASE OP NAME: a copy of the checkpoint with an edited model file.
ckpt() {
    mkdir -p "$tmp/$1"
    cp "$tmp/ck/config.json" "$tmp/$1/"
    edit "$tmp/ck/model.safetensors" "$tmp/$1/model.safetensors" "$2" "$3" ||
        fail "editing the checkpoint ($1)"
}

ckpt bare bare -
ckpt head head transformer.wte.weight
for c in bare head; do
    "$run" -n 2 "$infer" --model "$tmp/$c" --prompt "$prompt" -g 24 >"$tmp/o-$c" 2>&1 ||
        fail "$c: $(cat "$tmp/o-$c")"
    [ "$(ids_of "$tmp/o-$c")" = "$(ids_of "$tmp/c1")" ] || fail "$c: other ids"
done

# refuse CASE PATTERN [ARGS]: braid-infer fails on every rank, saying PATTERN.
refuse() {
    c=$1 pat=$2
    shift 2
    if "$run" -n 2 "$infer" --model "$tmp/$c" --prompt "$prompt" -g 4 "$@" >"$tmp/r-$c" 2>&1; then
        fail "$c: accepted"
    elif ! grep -q "^\[1\] braid-infer: rank 1: .*$pat" "$tmp/r-$c" ||
         ! grep -q "^\[0\] braid-infer: rank 0: .*$pat" "$tmp/r-$c"; then
        fail "$c: no message matching \"$pat\" on both ranks: $(cat "$tmp/r-$c")"
    else
        sed -n 's/^\[0\] braid-infer: rank 0: /refused: /p' "$tmp/r-$c"
    fi
}
mkdir -p "$tmp/trunc"
cp "$tmp/ck/config.json" "$tmp/trunc/"
size=$(wc -c <"$tmp/ck/model.safetensors")
head -c $((size - 100)) "$tmp/ck/model.safetensors" >"$tmp/trunc/model.safetensors"
refuse trunc "tensor 'transformer.ln_f.bias'.*truncated"
ckpt dtype dtype transformer.h.1.mlp.c_fc.weight
refuse dtype "transformer.h.1.mlp.c_fc.weight"
ckpt linear linear transformer.h.0.attn.c_attn.weight
refuse linear "tensor 'transformer.h.0.attn.c_attn.weight'.*shape \[192, 64\], expected \[64, 192\]"
ckpt rename rename transformer.h.1.ln_2.bias
refuse rename "transformer.h.1.ln_2.bias"
ckpt badhead badhead transformer.wte.weight
refuse badhead "lm_head.weight row [12]00 differs from transformer.wte.weight"
refuse ck "a GPT-2 runs in f32" --dtype bf16
"$run" -n 3 "$infer" --model "$tmp/ck" --prompt "$prompt" -g 4 >"$tmp/r3" 2>&1 &&
    fail "3 ranks accepted"
grep -q "n_head 4 is not divisible by 3" "$tmp/r3" || fail "3 ranks: $(cat "$tmp/r3")"

# A vocabulary larger than bytes: bytes only when config.json says so.
echo '{"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 32, "vocab_size": 300}' >"$tmp/v300.json"
"$run" -n 1 "$train" --config "$tmp/v300.json" --data "$data" --steps 2 --quiet \
    --save "$tmp/v300" >"$tmp/v300.out" 2>&1 || fail "training v300: $(cat "$tmp/v300.out")"
"$run" -n 1 "$infer" --model "$tmp/v300" --prompt "$prompt" -g 2 >"$tmp/v1" 2>&1 ||
    fail "v300 with \"tokenizer\": \"bytes\": $(cat "$tmp/v1")"
"$py" -c 'import json, sys
j = json.load(open(sys.argv[1])); del j["tokenizer"]
json.dump(j, open(sys.argv[1], "w"))' "$tmp/v300/config.json" || fail "config edit"
mv "$tmp/v300" "$tmp/v300b"
refuse v300b "has no tokenizer.json, and its vocabulary of 300 is not bytes"

[ $fails -eq 0 ] && echo "engine-gpt: ok"
exit $((fails > 0))
