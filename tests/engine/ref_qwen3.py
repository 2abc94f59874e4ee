#!/usr/bin/env python3
"""Independent numpy reference for braid-infer.

Writes its own Qwen3-shaped checkpoints (random weights, its own safetensors
writer: a 2-layer model untied in f32 in one file, and tied in bf16 over two
shards with an index), runs braid-infer on them under braidrun with 1 and 2
ranks (--dump-logits: every prompt position and decode step), computes the
same logits in float64 from the weights it wrote, and compares.

Tolerance: braid-infer computes in f32, this script in f64 from the very same
weight values (bf16 widened exactly), so they differ by f32 rounding only:
about 2^-24 relative per operation, a few hundred operations deep along any
path (7 chained matrix products of length <= 128 with norms, softmax, RoPE),
i.e. some 1e-6 of the logits' scale (measured: ~3e-7).  TOL = 2e-5 * max|logit|.
Greedy ids must equal the reference argmax wherever the top two reference
logits are further apart than TOL.

usage: ref_qwen3.py BRAIDRUN BRAID_INFER    (exit 77 = skipped: no numpy)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed for %s (Debian: python3-numpy)" % sys.executable)
    sys.exit(77)

TOL_REL = 2e-5
CFG = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
           num_key_value_heads=2, head_dim=16, intermediate_size=128,
           vocab_size=300, max_position_embeddings=256, rope_theta=10000.0,
           rms_norm_eps=1e-6, model_type="qwen3", hidden_act="silu")


def bf16_round(a):
    """f32 -> bf16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_value(h):
    return (h.astype(np.uint32) << 16).view(np.float32)


def make_weights(cfg, tied, rng):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nH, nKV, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    def mat(o, i):
        return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)
    def norm(n):
        return (1 + 0.1 * rng.standard_normal(n)).astype(np.float32)
    w = {"model.embed_tokens.weight": mat(V, H), "model.norm.weight": norm(H)}
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = norm(H)
        w[p + "post_attention_layernorm.weight"] = norm(H)
        w[p + "self_attn.q_proj.weight"] = mat(nH * hd, H)
        w[p + "self_attn.k_proj.weight"] = mat(nKV * hd, H)
        w[p + "self_attn.v_proj.weight"] = mat(nKV * hd, H)
        w[p + "self_attn.o_proj.weight"] = mat(H, nH * hd)
        w[p + "self_attn.q_norm.weight"] = norm(hd)
        w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "mlp.gate_proj.weight"] = mat(I, H)
        w[p + "mlp.up_proj.weight"] = mat(I, H)
        w[p + "mlp.down_proj.weight"] = mat(H, I)
    if not tied:
        w["lm_head.weight"] = mat(V, H)
    return w


def write_safetensors(path, tensors, dtype):
    """tensors: name -> f32 array; dtype 'F32' or 'BF16'.  Returns the values
    as stored (f64), for the reference."""
    header, blobs, stored, off = {"__metadata__": {"format": "pt"}}, [], {}, 0
    for name, a in tensors.items():
        if dtype == "BF16":
            h = bf16_round(a)
            blob, stored[name] = h.tobytes(), bf16_value(h).astype(np.float64)
        else:
            blob, stored[name] = a.astype("<f4").tobytes(), a.astype(np.float64)
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return stored


def write_checkpoint(d, cfg, tied, dtype, shards, rng):
    os.makedirs(d)
    c = dict(cfg, tie_word_embeddings=tied,
             torch_dtype="bfloat16" if dtype == "BF16" else "float32")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f)
    w = make_weights(cfg, tied, rng)
    names = list(w)
    if shards == 1:
        return write_safetensors(os.path.join(d, "model.safetensors"), w, dtype)
    stored, wmap = {}, {}
    for k in range(shards):
        part = names[k::shards]
        fname = "model-%05d-of-%05d.safetensors" % (k + 1, shards)
        stored.update(write_safetensors(os.path.join(d, fname),
                                        {n: w[n] for n in part}, dtype))
        wmap.update({n: fname for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wmap}, f)
    return stored


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, theta):
    """x [T, heads, hd], rotate-half layout."""
    hd = x.shape[-1]
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., : hd // 2], x[..., hd // 2:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def forward(w, cfg, tied, tokens):
    """logits [T, V] of every position of tokens (causal), float64."""
    H, nH, nKV, hd = (cfg["hidden_size"], cfg["num_attention_heads"],
                      cfg["num_key_value_heads"], cfg["head_dim"])
    eps, T = cfg["rms_norm_eps"], len(tokens)
    x = w["model.embed_tokens.weight"][tokens]
    pos = np.arange(T)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, nH, hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, nKV, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, nKV, hd)
        q = rope(rmsnorm(q, w[p + "self_attn.q_norm.weight"], eps), pos, cfg["rope_theta"])
        k = rope(rmsnorm(k, w[p + "self_attn.k_norm.weight"], eps), pos, cfg["rope_theta"])
        k = np.repeat(k, nH // nKV, axis=1)   # query head j uses kv head j // group
        v = np.repeat(v, nH // nKV, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        a = np.einsum("hts,shd->thd", s, v).reshape(T, nH * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rmsnorm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return x @ head.T


def main():
    braidrun, infer = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(20240601)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="braid-ref-") as tmp:
        cases = [("untied-f32", False, "F32", 1), ("tied-bf16-sharded", True, "BF16", 2)]
        for name, tied, dtype, shards in cases:
            d = os.path.join(tmp, name)
            w = write_checkpoint(d, CFG, tied, dtype, shards, rng)
            prompt = [int(t) for t in rng.integers(0, CFG["vocab_size"], 9)]
            G = 6
            for ranks in (1, 2):
                dump, js = os.path.join(tmp, "logits.f32"), os.path.join(tmp, "out.json")
                cmd = [braidrun, "-n", str(ranks), infer, "--model", d,
                       "--prompt-ids", ",".join(map(str, prompt)), "-g", str(G),
                       "--ignore-eos", "--chunk", "4", "--dump-logits", dump,
                       "--json=" + js]
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   universal_newlines=True, timeout=120)
                if r.returncode != 0:
                    print("FAIL %s, %d ranks: braid-infer exited %d:\n%s"
                          % (name, ranks, r.returncode, r.stdout))
                    failures += 1
                    continue
                ids = json.load(open(js))["ids"]
                got = np.fromfile(dump, dtype="<f4").astype(np.float64)
                rows = len(prompt) + G - 1
                if got.size != rows * CFG["vocab_size"] or len(ids) != G:
                    print("FAIL %s: %d logits for %d rows, %d ids" % (name, got.size, rows, len(ids)))
                    failures += 1
                    continue
                got = got.reshape(rows, CFG["vocab_size"])
                ref = forward(w, CFG, tied, prompt + ids[:-1])
                scale = np.abs(ref).max()
                diff = np.abs(got - ref).max()
                tol = TOL_REL * scale
                top = np.sort(ref, axis=1)
                gap = top[:, -1] - top[:, -2]
                want = np.argmax(ref[len(prompt) - 1:], axis=1)
                clear = gap[len(prompt) - 1:] > tol
                wrong = [i for i in range(G) if clear[i] and want[i] != ids[i]]
                ok = diff <= tol and not wrong
                failures += not ok
                print("%s %s, %d rank(s): max |logit - reference| %.3g, scale %.3g, "
                      "tolerance %.3g; greedy ids %s%s" %
                      ("ok  " if ok else "FAIL", name, ranks, diff, scale, tol, ids,
                       "" if not wrong else " differ from the reference at %s" % wrong))
    print("engine-numpy-reference: %s" % ("all passed" if not failures else "%d failed" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
