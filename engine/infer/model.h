/* The forward pass of a Qwen3-style decoder, tensor-parallel over a braid
 * communicator (Megatron style).
 *
 * Per layer, on each rank (T tokens, H hidden, this rank's q_dim, kv_dim,
 * inter from braid_infer_split_t):
 *   h = rmsnorm(x)                      [T, H]   replicated
 *   q, k, v = h Wq^T, h Wk^T, h Wv^T    [T, q_dim], [T, kv_dim] x2: own heads
 *   q, k = rope(rmsnorm_hd(q), rmsnorm_hd(k)); cache k, v
 *   a = attention(q, cache)             [T, q_dim]   own heads only
 *   x += allreduce(a Wo^T)              [T, H]   partial sums over heads
 *   h = rmsnorm(x)
 *   x += allreduce((silu(h Wg^T) * h Wu^T) Wd^T)    partial sums over inter
 * Embedding lookup is vocabulary-parallel too (the owner of a token's row
 * writes it, the others zeros, one all-reduce), and the LM head gives each
 * rank the logits of its vocabulary rows.  Every all-reduce sums f32 in
 * place; braid makes the result bitwise identical on every rank, so the
 * replicated parts (norms, residual stream, sampling) stay identical too.
 * A GPT-2 (cfg->arch, gpt.h) runs through the same calls, on its own
 * blocks. */
#ifndef BRAID_INFER_MODEL_H
#define BRAID_INFER_MODEL_H

#include <stdint.h>

#include <braid/braid.h>

#include "engine/common/linalg.h"
#include "engine/common/pool.h"
#include "engine/infer/config.h"
#include "engine/infer/weights.h"

#define BRAID_INFER_MAX_SIZES 16

/* Time inside braid collectives, and the all-reduce sizes used. */
typedef struct {
    double   allreduce_s; /* seconds inside braid_allreduce */
    double   other_s;     /* seconds inside other collectives (allgather) */
    int64_t  allreduces;
    int      n_sizes;
    uint64_t size_bytes[BRAID_INFER_MAX_SIZES];
    int64_t  size_calls[BRAID_INFER_MAX_SIZES];
} braid_infer_stats_t;

typedef struct {
    const braid_infer_config_t  *cfg;
    braid_infer_split_t          sp;
    const braid_infer_weights_t *w;
    braid_comm_t                *comm;  /* the tensor-parallel group */
    braid_eng_pool_t            *pool;  /* threads of this rank (NULL: 1) */
    int64_t                      ctx;   /* KV cache capacity (positions) */
    int64_t                      chunk; /* most tokens per forward call */
    int64_t                      pos;   /* positions in the cache */
    float                       *kcache, *vcache; /* [L, ctx, kv_dim] */
    braid_eng_arena_t            kv;              /* holds them (huge pages) */
    float                       *rope; /* [ctx, hd/2, 2]: cos, sin */
    /* activations for up to `chunk` tokens; scores [chunk, ctx] */
    float *x, *h, *q, *k, *v, *att, *proj, *g, *u, *scores, *scratch;
    struct braid_infer_gpt_state *gpt; /* a GPT-2's cache and activations */
    braid_infer_stats_t           stats;
} braid_infer_model_t;

/* Sets up the activations and a KV cache of ctx positions (at most
 * max_position_embeddings) for calls of up to `chunk` tokens.  comm is
 * borrowed: any braid communicator whose size and rank match sp. */
braid_status_t
braid_infer_model_init(braid_infer_model_t *m, const braid_infer_config_t *cfg,
                       const braid_infer_split_t   *sp,
                       const braid_infer_weights_t *w, braid_comm_t *comm,
                       braid_eng_pool_t *pool, int64_t ctx, int64_t chunk);
void braid_infer_model_free(braid_infer_model_t *m);
/* Empties the KV cache (a new sequence). */
void braid_infer_model_reset(braid_infer_model_t *m);

/* buf[n] summed over the tensor-parallel group in place (nothing on one
 * rank), timed and counted in m->stats. */
braid_status_t braid_infer_allreduce(braid_infer_model_t *m, float *buf,
                                     size_t n);

/* Runs tokens[T] (T <= chunk) at positions pos .. pos+T-1 and appends them
 * to the cache.  logits: this rank's vocabulary slice, [T, vocab_chunk] if
 * all_logits else [1, vocab_chunk] for the last token; entries past
 * vocab_n (the last rank's padding) are -inf. */
braid_status_t braid_infer_forward(braid_infer_model_t *m,
                                   const int32_t *tokens, int64_t T,
                                   int all_logits, float *logits);

/* All ranks' slices of one position's logits, in vocabulary order:
 * full[size * vocab_chunk] (the first cfg->vocab entries are the logits). */
braid_status_t braid_infer_gather_logits(braid_infer_model_t *m,
                                         const float *local, float *full);
/* The greedy token: the largest logit, the lowest id on ties, the same on
 * every rank (one allgather of each rank's best). */
braid_status_t braid_infer_argmax(braid_infer_model_t *m, const float *local,
                                  int32_t *token);

#endif
