/* One rank's share of the weights of a Qwen3-style model, loaded from a
 * safetensors checkpoint or generated from a seed, and checkpoints written.
 * (A GPT-2's share lives here too, loaded by gpt.h.)
 *
 * Hugging Face names and shapes ([out, in], row-major; H hidden, hd head_dim):
 *   model.embed_tokens.weight                    [V, H]
 *   model.layers.N.input_layernorm.weight        [H]
 *   model.layers.N.self_attn.q_proj.weight       [nH*hd, H]   column-parallel
 *   model.layers.N.self_attn.k_proj.weight       [nKV*hd, H]  column-parallel
 *   model.layers.N.self_attn.v_proj.weight       [nKV*hd, H]  column-parallel
 *   model.layers.N.self_attn.q_norm.weight       [hd]
 *   model.layers.N.self_attn.k_norm.weight       [hd]
 *   model.layers.N.self_attn.o_proj.weight       [H, nH*hd]   row-parallel
 *   model.layers.N.post_attention_layernorm.weight [H]
 *   model.layers.N.mlp.gate_proj.weight          [I, H]       column-parallel
 *   model.layers.N.mlp.up_proj.weight            [I, H]       column-parallel
 *   model.layers.N.mlp.down_proj.weight          [H, I]       row-parallel
 *   model.norm.weight                            [H]
 *   lm_head.weight                               [V, H]       (untied only)
 * Column-parallel: a rank holds a block of rows (its heads, its slice of
 * I); row-parallel: the matching block of columns; embed/lm_head: a block of
 * vocabulary rows.  Norm weights are whole on every rank. */
#ifndef BRAID_INFER_WEIGHTS_H
#define BRAID_INFER_WEIGHTS_H

#include <stdint.h>

#include "engine/common/linalg.h"
#include "engine/common/safetensors.h"
#include "engine/infer/config.h"

typedef struct {
    braid_eng_mat_t wq, wk, wv; /* [q_dim, H], [kv_dim, H], [kv_dim, H] */
    braid_eng_mat_t wo;         /* [H, q_dim] */
    braid_eng_mat_t wg, wu;     /* [inter, H] (this rank's inter) */
    braid_eng_mat_t wd;         /* [H, inter] */
    float          *ln1, *ln2;  /* [H] input / post-attention RMSNorm */
    float          *qn, *kn;    /* [hd] QK-norm */
} braid_infer_layer_t;

struct braid_infer_gpt_weights;

typedef struct {
    braid_infer_layer_t *layer; /* [L] */
    braid_eng_mat_t      embed; /* [vocab_n, H] this rank's vocab rows */
    braid_eng_mat_t      head;  /* [vocab_n, H]; shares embed's data if tied */
    float               *norm;  /* [H] */
    uint64_t             bytes; /* bytes held by this rank */
    braid_eng_arena_t    arena; /* holds every matrix (huge pages) */
    struct braid_infer_gpt_weights *gpt; /* a GPT-2 (gpt.h) instead */
} braid_infer_weights_t;

/* The type matrices are kept in (for the report). */
braid_dtype_t braid_infer_weights_dtype(const braid_infer_weights_t *w);

/* Loads this rank's share from an open checkpoint.  First checks every
 * tensor of the checkpoint against the config: each expected name present
 * with its exact shape and a float dtype, no name the model does not have
 * (lm_head.weight with tied embeddings must equal embed_tokens).  Matrices
 * are kept as `dtype` (BRAID_DTYPE_COUNT: as in the file), norms as f32. */
braid_status_t braid_infer_weights_load(braid_infer_weights_t      *w,
                                        const braid_infer_config_t *cfg,
                                        const braid_infer_split_t  *sp,
                                        const braid_eng_st_t       *st,
                                        braid_dtype_t               dtype);

/* Generates this rank's share of the weights of a seeded random model:
 * element i of tensor `name` is a function of (seed, name, i) only, so
 * every rank count builds the same model.  Matrices ~ U(+-sqrt(3 / in))
 * (unit variance out of unit variance in), norms 1 + U(+-0.1) so that a
 * norm applied to the wrong tensor changes the result. */
braid_status_t braid_infer_weights_generate(braid_infer_weights_t      *w,
                                            const braid_infer_config_t *cfg,
                                            const braid_infer_split_t  *sp,
                                            uint64_t                    seed,
                                            braid_dtype_t               dtype);

/* Writes the generated model (whole, not a shard) as a Hugging Face
 * checkpoint in dir: config.json and model.safetensors, or with shards > 1
 * model-0000k-of-0000n.safetensors plus model.safetensors.index.json.
 * Loading it gives the same weights as generating with the same seed and
 * dtype. */
braid_status_t braid_infer_save_generated(const char                 *dir,
                                          const braid_infer_config_t *cfg,
                                          uint64_t seed, braid_dtype_t dtype,
                                          int shards);

void braid_infer_weights_free(braid_infer_weights_t      *w,
                              const braid_infer_config_t *cfg);

#endif
