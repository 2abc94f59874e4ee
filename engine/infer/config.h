/* The shape of a Qwen3-style decoder, from a Hugging Face config.json or a
 * built-in preset, and how tensor parallelism splits it.
 *
 * Model (per layer, pre-norm):  x += o_proj(attn(rope(qk_norm(q, k)), v))
 *                               x += down(silu(gate(x)) * up(x))
 * with RMSNorm before each, grouped-query attention (heads / kv_heads
 * query heads share a key/value head), RoPE in the rotate-half layout, and
 * an RMSNorm over head_dim on every query and key head (QK-norm). */
#ifndef BRAID_INFER_CONFIG_H
#define BRAID_INFER_CONFIG_H

#include <stdint.h>

#include <braid/braid.h>

#define BRAID_INFER_MAX_EOS 8

/* The model families braid-infer runs: Qwen3-style decoders (this header,
 * model.c), and GPT-2 as braid-train trains it (gpt.h: engine/train's
 * model code). */
typedef enum {
    BRAID_INFER_QWEN3,
    BRAID_INFER_GPT2,
} braid_infer_arch_t;

typedef struct {
    char               name[64]; /* preset name, or the config.json path */
    braid_infer_arch_t arch;     /* model_type qwen3 (or absent), gpt2 */
    int64_t            hidden;   /* hidden_size H */
    int64_t            layers;   /* num_hidden_layers L */
    int64_t            heads;    /* num_attention_heads nH */
    int64_t            kv_heads; /* num_key_value_heads nKV (divides nH) */
    int64_t            head_dim; /* head_dim hd (even) */
    int64_t            inter;    /* intermediate_size I */
    int64_t            vocab;    /* vocab_size V */
    int64_t            max_pos;  /* max_position_embeddings */
    double             rope_theta;
    double             rms_eps;
    int                tied; /* tie_word_embeddings: lm_head = embed_tokens */
    int                n_eos;
    int32_t       eos[BRAID_INFER_MAX_EOS]; /* eos_token_id (int or list) */
    braid_dtype_t dtype; /* torch_dtype: f32, bf16, f16 (presets' weights) */
    int           byte_tokens; /* "tokenizer": "bytes" (braid-train's) */
} braid_infer_config_t;

/* Reads and checks a Hugging Face config.json (model_type qwen3 or absent;
 * anything the model here does not implement -- rope_scaling, attention
 * bias, sliding windows, another activation -- is refused by name), or a
 * GPT-2 one (model_type gpt2, as braid-train writes it: gpt.h).  A GPT-2
 * fills the fields as a decoder with kv_heads = heads, head_dim = n_embd /
 * n_head, inter = 4 n_embd, max_pos = n_positions, tied embeddings and
 * rms_eps = its LayerNorm epsilon. */
braid_status_t braid_infer_config_load(braid_infer_config_t *cfg,
                                       const char           *path);
/* Adds the eos_token_id(s) of another JSON file (generation_config.json
 * lists the chat model's end-of-turn token there). */
braid_status_t braid_infer_config_add_eos(braid_infer_config_t *cfg,
                                          const char           *path);
/* A built-in shape: "tiny" (tests: 2 layers, hidden 64) or "qwen3-0.6b". */
braid_status_t braid_infer_config_preset(braid_infer_config_t *cfg,
                                         const char           *name);
/* Writes cfg as a config.json that braid_infer_config_load and Hugging
 * Face's Qwen3Config both read. */
braid_status_t braid_infer_config_save(const braid_infer_config_t *cfg,
                                       const char                 *path);

/* What one rank of `size` holds: query heads, kv heads and intermediate
 * columns divided evenly (an error says which does not divide, and which
 * rank counts would work); the vocabulary in chunks of ceil(V / size) rows,
 * the last one shorter. */
typedef struct {
    int     rank, size;
    int64_t heads, kv_heads; /* nH / size, nKV / size */
    int64_t q_dim, kv_dim;   /* heads * hd, kv_heads * hd */
    int64_t inter;           /* I / size */
    int64_t vocab_chunk;     /* ceil(V / size): every rank's logits length */
    int64_t vocab0, vocab_n; /* this rank's rows [vocab0, vocab0 + vocab_n) */
} braid_infer_split_t;

braid_status_t braid_infer_split(braid_infer_split_t        *sp,
                                 const braid_infer_config_t *cfg, int rank,
                                 int size);

/* Bytes of weights one decode step reads on this rank (every matrix once,
 * one embedding row, the norms) if matrices are stored as `dtype`. */
uint64_t braid_infer_bytes_per_token(const braid_infer_config_t *cfg,
                                     const braid_infer_split_t  *sp,
                                     braid_dtype_t               dtype);

#endif
