/* braid-infer's GPT-2 path: the checkpoints braid-train writes (Hugging
 * Face's GPT-2 layout: config.json with model_type gpt2, model.safetensors
 * under GPT-2's names, a block's four matrices stored (in, out) as GPT-2's
 * Conv1D keeps them), run on braid-train's own block forward pass
 * (engine/train/gpt.h: braid_gpt_block_forward) over a KV cache.
 *
 * Tensor-parallel like the Qwen3 path (Megatron style), on any rank count
 * that divides n_head:
 *   attn.c_attn   column-parallel: this rank's heads' rows of q, k and v
 *                 and their biases, packed [q; k; v]
 *   attn.c_proj   row-parallel: the matching columns; one all-reduce
 *   mlp.c_fc      column-parallel: 4C / N rows and their biases
 *   mlp.c_proj    row-parallel; one all-reduce
 *                 (the two row-parallel biases: rank 0 adds them, once)
 *   wte           this rank's vocabulary rows: the tied LM head, and the
 *                 embedding (the row's owner writes it, the others zeros,
 *                 one all-reduce, then wpe is added)
 *   wpe, layer norms: whole on every rank
 * braid makes every all-reduce's result bitwise identical on all ranks, so
 * the residual stream, the logits and the sampling stay identical too.
 *
 * Weights are f32 (a checkpoint in bf16 or f16 is widened at load): the
 * layers are braid-train's, CBLAS sgemm even for one token.  The KV cache
 * keeps each position's whole qkv row as the training pass lays it out (q
 * too: 1.5x the bytes of keys and values alone, small for these models). */
#ifndef BRAID_INFER_GPT_H
#define BRAID_INFER_GPT_H

#include <stdint.h>

#include <braid/braid.h>

#include "engine/common/safetensors.h"
#include "engine/infer/config.h"
#include "engine/infer/model.h"
#include "engine/infer/weights.h"
#include "engine/train/gpt.h"

/* One rank's share of a GPT-2 (in braid_infer_weights_t.gpt; the matrices
 * live in that struct's arena). */
typedef struct braid_infer_gpt_weights {
    braid_gpt_dims_t   d;     /* this rank's widths */
    braid_gpt_block_t *block; /* [L]; c_proj biases NULL but on rank 0 */
    float             *wte;   /* [vocab_n, C]: this rank's vocabulary rows */
    float             *wpe;   /* [n_positions, C] */
    float             *lnfw, *lnfb; /* [C] */
} braid_infer_gpt_weights_t;

/* Fills c from a GPT-2 config.json (braid_gpt_config_hf's checks; c->name
 * set by the caller). */
braid_status_t braid_infer_gpt_config(braid_infer_config_t *c,
                                      const struct cJSON *j, const char *path);
/* Bytes of weights one decode step reads on this rank. */
uint64_t braid_infer_gpt_bytes_per_token(const braid_infer_config_t *c,
                                         const braid_infer_split_t  *sp);

/* Loads this rank's share.  Checks first: every tensor of the model present
 * with the shape GPT-2 stores it in and a float dtype, nothing else but a
 * copy of the tied lm_head.weight (which must equal wte) and attention-mask
 * buffers (h.N.attn.bias, h.N.attn.masked_bias).  Names are braid-train's
 * (GPT2LMHeadModel's: transformer.h.0...) or, without "transformer.",
 * GPT2Model's.  Errors name the tensor and what is wrong. */
braid_status_t braid_infer_gpt_load(braid_infer_weights_t      *w,
                                    const braid_infer_config_t *c,
                                    const braid_infer_split_t  *sp,
                                    const braid_eng_st_t       *st);
void           braid_infer_gpt_weights_free(braid_infer_weights_t *w);

/* The KV cache and activations of m (braid_infer_model_init calls it for
 * a GPT-2; braid_infer_model_free releases them). */
braid_status_t braid_infer_gpt_init(braid_infer_model_t *m);
void           braid_infer_gpt_free(braid_infer_model_t *m);

/* Runs tokens[T] at positions m->pos ..; logits[T - first, vocab_n]: this
 * rank's vocabulary rows for tokens first .. T-1. */
braid_status_t braid_infer_gpt_forward(braid_infer_model_t *m,
                                       const int32_t *tokens, int64_t T,
                                       int64_t first, float *logits);

#endif
