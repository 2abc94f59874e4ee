#!/usr/bin/python3
"""An independent check of braid-train's model and checkpoints: Hugging
Face GPT-2's forward pass, written out in PyTorch (float64), on a
braid-train checkpoint, gives the validation loss braid-train printed.

    gpt2_reference.py CKPT_DIR DATA VAL_FRAC VAL_BATCHES BATCH SEQ LOSS

The checkpoint is read with nothing but the safetensors format's
definition (8-byte header length, JSON header, raw little-endian data), the
block matrices used as GPT-2's Conv1D uses them (x @ W + b, W stored
(in, out)).  The validation windows are rebuilt the way data.c spreads
them.  Exits 0 when the losses agree within 1e-4 relative (braid-train
computes in float32; measured agreement is about 1e-6), 1 otherwise, 77
(skipped) without torch."""
import json
import math
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"skipped: {e} (Debian's python3-torch and python3-numpy)")
    sys.exit(77)


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        b, e = t["data_offsets"]
        a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype="<f4")
        out[name] = torch.from_numpy(a.reshape(t["shape"]).astype(np.float64))
    return out


def gpt2_logits(w, cfg, idx):
    """HF GPT-2 (GPT2LMHeadModel) forward pass, eval mode."""
    B, T = idx.shape
    C, NH, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hs = C // NH
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2)
                   for t in qkv.split(C, 2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"],
                   approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"],
                     w["transformer.ln_f.bias"], eps)
    return x @ w["transformer.wte.weight"].T  # the tied LM head


def main():
    ckpt, data, val_frac, val_batches, batch, seq, expected = sys.argv[1:8]
    val_batches, batch, seq = int(val_batches), int(batch), int(seq)
    with open(ckpt + "/config.json") as f:
        cfg = json.load(f)
    assert cfg["model_type"] == "gpt2" and cfg["tie_word_embeddings"]
    w = load_safetensors(ckpt + "/model.safetensors")
    with open(data, "rb") as f:
        corpus = f.read()
    # data.c: the last (size_t)(n * val_frac) bytes, val_frac parsed as a
    # float; windows spread evenly: start span * j / (total - 1)
    nval = int(len(corpus) * float(np.float32(float(val_frac))))
    ntrain = len(corpus) - nval
    total, span = val_batches * batch, nval - seq - 1
    starts = [ntrain + int(float(span) * j / (total - 1)) for j in range(total)]
    win = torch.tensor([list(corpus[s:s + seq + 1]) for s in starts])
    logits = gpt2_logits(w, cfg, win[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                           win[:, 1:].reshape(-1)).item()
    rel = abs(loss - float(expected)) / loss
    print(f"GPT-2 in PyTorch: validation loss {loss:.6f}; braid-train "
          f"{float(expected):.6f}; relative difference {rel:.2g}")
    sys.exit(0 if rel <= 1e-4 else 1)


main()
