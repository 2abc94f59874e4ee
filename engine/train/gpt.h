/* braid-train's GPT, in the GPT-2 / llm.c shape: token and position
 * embeddings, pre-norm blocks (LayerNorm, causal self-attention, LayerNorm,
 * GELU MLP, residual connections), a final LayerNorm and an LM head tied to
 * the token embedding.  Tokens are bytes (V = 256) unless a configuration
 * says otherwise.
 *
 * All parameters live in one flat fp32 array, tensor after tensor, and the
 * gradients in a second array laid out the same way.  The order is that of
 * the forward pass,
 *
 *     wte, wpe, block 0 (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
 *     mlp.c_proj: weight then bias each), ..., block L-1, ln_f
 *
 * so the backward pass finishes gradients from the end of the array toward
 * its start: a bucket of gradients is a contiguous range that is final as
 * soon as the pass has gone below its first element.  wte comes last in the
 * backward pass: the LM head adds to its gradient first, the embedding last.
 * Tensor names are nanoGPT's state-dict names (nn.Linear weights are
 * (out, in)), so checkpoints read like a PyTorch GPT's.
 *
 * braid-infer samples from braid-train's checkpoints with this code: the
 * same block forward pass (braid_gpt_block_forward), run over a KV cache
 * and, across ranks, on a tensor-parallel share of each block. */
#ifndef BRAID_TRAIN_GPT_H
#define BRAID_TRAIN_GPT_H

#include <stddef.h>

#include <braid/braid.h>

typedef struct braid_gpt_config {
    int n_layer;    /* L */
    int n_head;     /* NH */
    int n_embd;     /* C */
    int block_size; /* maxT: positions the model knows */
    int vocab_size; /* V */
} braid_gpt_config_t;

/* Presets: "tiny" (tests), "dN" for depth N: N layers, N heads of 64,
 * C = 64 N, block 1024 (d12 is GPT-2 small's size). */
braid_status_t braid_gpt_config_preset(braid_gpt_config_t *cfg,
                                       const char         *name);
/* A JSON object with n_layer, n_head, n_embd, block_size and optionally
 * vocab_size (default 256), e.g. {"n_layer": 4, "n_head": 4, "n_embd":
 * 256, "block_size": 256}.  Unknown keys are an error. */
braid_status_t braid_gpt_config_json(braid_gpt_config_t *cfg,
                                     const char         *path);
braid_status_t braid_gpt_config_check(const braid_gpt_config_t *cfg);
/* From a JSON object, keys[] naming n_layer, n_head, n_embd, block_size
 * and vocab_size there (vocab_size may be absent: 256); errors name
 * `what` and the key. */
struct cJSON;
braid_status_t braid_gpt_config_from(braid_gpt_config_t *cfg,
                                     const struct cJSON *obj,
                                     const char *const   keys[5],
                                     const char         *what);

/* From a Hugging Face GPT-2 config.json (model_type "gpt2": n_layer,
 * n_head, n_embd, n_positions, vocab_size), as braid-train's checkpoints
 * write it.  What the model here does not implement is refused by name:
 * another model_type or activation_function (gelu_new, GPT-2's tanh
 * approximation, and its alias gelu_pytorch_tanh are the one here),
 * layer_norm_epsilon other than 1e-5, n_inner other than 4 n_embd, untied
 * embeddings, unscaled or layer-scaled attention, cross-attention. */
braid_status_t braid_gpt_config_hf(braid_gpt_config_t *cfg,
                                   const struct cJSON *obj, const char *what);

/* One tensor of the flat parameter array. */
typedef struct braid_gpt_tensor {
    char   name[64]; /* nanoGPT state-dict name */
    int    ndim;
    int    shape[2];
    size_t offset; /* first element in the flat array */
    size_t numel;
    int    decay;  /* matrices get AdamW weight decay, vectors do not */
    int    conv1d; /* a block's matrix: stored (in, out) in checkpoints */
} braid_gpt_tensor_t;

/* The tensors of one block, in layout order (see braid_gpt_block_slot). */
enum {
    BRAID_GPT_LN1W,
    BRAID_GPT_LN1B,
    BRAID_GPT_QKVW,
    BRAID_GPT_QKVB,
    BRAID_GPT_ATTPROJW,
    BRAID_GPT_ATTPROJB,
    BRAID_GPT_LN2W,
    BRAID_GPT_LN2B,
    BRAID_GPT_FCW,
    BRAID_GPT_FCB,
    BRAID_GPT_FCPROJW,
    BRAID_GPT_FCPROJB,
    BRAID_GPT_BLK_COUNT
};

/* Pointers into a flat array (parameters or gradients) for one block. */
typedef struct braid_gpt_block {
    float *ln1w, *ln1b;         /* (C) */
    float *qkvw, *qkvb;         /* (3C, C), (3C) */
    float *attprojw, *attprojb; /* (C, C), (C) */
    float *ln2w, *ln2b;         /* (C) */
    float *fcw, *fcb;           /* (4C, C), (4C) */
    float *fcprojw, *fcprojb;   /* (C, 4C), (C) */
} braid_gpt_block_t;

/* The member of blk that holds block tensor k (BRAID_GPT_LN1W ...). */
float **braid_gpt_block_slot(braid_gpt_block_t *blk, int k);

/* The widths of a block as one rank holds it.  Training holds whole blocks;
 * braid-infer splits the heads and the MLP over the ranks of a
 * tensor-parallel group (Megatron style) and keeps the residual stream
 * whole on each. */
typedef struct braid_gpt_dims {
    int C;  /* n_embd: the residual stream */
    int NH; /* attention heads held */
    int CA; /* their width NH * (C / n_head): qkv (3CA, C), proj (C, CA) */
    int CF; /* MLP width held: fc (CF, C), its proj (C, CF) */
} braid_gpt_dims_t;

/* One block's activations of a forward call over B sequences of T new
 * positions pos .. pos+T-1 (N = B T rows; pos > 0 only with B = 1). */
typedef struct braid_gpt_block_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* (N,C), (N), (N) */
    float *qkv;       /* (B,S,3CA), S = pos + T: rows before pos are the
                         earlier positions' (a KV cache), the call writes
                         the last T */
    float *atty;      /* (N,CA) */
    float *att;       /* (B,NH,T,S) */
    float *residual2; /* (N,C) */
    float *ln2, *ln2_mean, *ln2_rstd; /* (N,C), (N), (N) */
    float *fch, *fch_gelu;            /* (N,CF) */
    float *residual3; /* (N,C): the block's output; may be its input */
} braid_gpt_block_acts_t;

/* Sums a rank's partial product over the tensor-parallel group, in place. */
typedef braid_status_t (*braid_gpt_reduce_fn)(void *ctx, float *buf, size_t n);

/* One block of the forward pass, the one both engines run:
 *   residual2 = residual + attn_proj(attention(qkv(ln_1(residual))))
 *   residual3 = residual2 + mlp_proj(gelu(fc(ln_2(residual2))))
 * With reduce (tensor parallelism: w holds this rank's rows of qkv and fc
 * and columns of the two projections), each projection's partial sum goes
 * through reduce before the residual is added; the projections' biases
 * must then be set on one rank only (NULL on the others).  NULL reduce:
 * one rank holds the whole block.  Returns reduce's status. */
braid_status_t braid_gpt_block_forward(braid_gpt_block_acts_t  *a,
                                       const braid_gpt_block_t *w,
                                       const float             *residual,
                                       const braid_gpt_dims_t *d, int B, int T,
                                       int pos, braid_gpt_reduce_fn reduce,
                                       void *ctx);

/* Activations of one forward pass, kept for the backward pass. */
typedef struct braid_gpt_acts {
    float *encoded;   /* (B,T,C) */
    float *ln1;       /* (L,B,T,C) */
    float *ln1_mean;  /* (L,B,T) */
    float *ln1_rstd;  /* (L,B,T) */
    float *qkv;       /* (L,B,T,3C) */
    float *atty;      /* (L,B,T,C) */
    float *att;       /* (L,B,NH,T,T) */
    float *residual2; /* (L,B,T,C) */
    float *ln2;       /* (L,B,T,C) */
    float *ln2_mean;  /* (L,B,T) */
    float *ln2_rstd;  /* (L,B,T) */
    float *fch;       /* (L,B,T,4C) */
    float *fch_gelu;  /* (L,B,T,4C) */
    float *residual3; /* (L,B,T,C) */
    float *lnf;       /* (B,T,C) */
    float *lnf_mean;  /* (B,T) */
    float *lnf_rstd;  /* (B,T) */
    float *probs;     /* (B,T,V): logits, then probabilities, then dlogits */
    float *losses;    /* (B,T) */
} braid_gpt_acts_t;

/* Gradient scratch of the backward pass: one block's worth, reused. */
typedef struct braid_gpt_scratch {
    float *dresidual; /* (B,T,C) the residual stream's gradient */
    float *dln;       /* (B,T,C) */
    float *datty;     /* (B,T,C) */
    float *dqkv;      /* (B,T,3C) */
    float *dfch;      /* (B,T,4C) */
    float *datt;      /* (T,T) */
} braid_gpt_scratch_t;

typedef struct braid_gpt {
    braid_gpt_config_t  cfg;
    int                 ntensors;
    braid_gpt_tensor_t *tensors;
    size_t              nparams;
    float              *params; /* (nparams) */
    float              *grads;  /* (nparams) */
    int                 B, T;   /* the batch the activations are sized for */
    braid_gpt_acts_t    acts;
    braid_gpt_scratch_t scratch;
    float              *act_mem, *scratch_mem;
    int                *inputs;  /* (B,T) of the last forward pass */
    int                *targets; /* (B,T) */
} braid_gpt_t;

/* Called by the backward pass whenever more gradients are final: every
 * gradient at a flat offset >= offset is.  Offsets only decrease. */
typedef void (*braid_gpt_ready_fn)(void *ctx, size_t offset);

/* The tensors of a model of this configuration, in layout order:
 * t[braid_gpt_ntensors(cfg)] filled; returns the parameter count. */
int    braid_gpt_ntensors(const braid_gpt_config_t *cfg);
size_t braid_gpt_layout(braid_gpt_tensor_t *t, const braid_gpt_config_t *cfg);

/* Parameters of a model of this configuration (without building it):
 * V C + maxT C + L (12 C^2 + 13 C) + 2 C. */
size_t braid_gpt_nparams(const braid_gpt_config_t *cfg);

/* A model for micro-batches of B sequences of T <= block_size tokens.
 * Parameters are left uninitialised (braid_gpt_init_weights, or a
 * checkpoint); gradients are zero. */
braid_status_t braid_gpt_create(braid_gpt_t             **model,
                                const braid_gpt_config_t *cfg, int B, int T);
void           braid_gpt_free(braid_gpt_t *model);

/* GPT-2's initialisation from a seed: weights N(0, 0.02), the projections
 * into the residual stream N(0, 0.02/sqrt(2L)), biases 0, norms 1. */
void braid_gpt_init_weights(braid_gpt_t *model, unsigned long long seed);

/* Forward pass over inputs (B,T) (byte tokens < V).  With targets (B,T),
 * returns the mean cross-entropy loss; without, returns 0 and leaves the
 * probabilities of the next token in acts.probs. */
float braid_gpt_forward(braid_gpt_t *model, const int *inputs,
                        const int *targets);

void braid_gpt_zero_grad(braid_gpt_t *model);

/* Backward pass of the last forward pass (which had targets), adding into
 * grads the gradient of dloss * (sum of the token losses): dloss =
 * 1/(B*T) is the gradient of the mean loss, 1/(B*T*k) that of a mean over k
 * micro-batches.  ready (may be NULL) hears about final gradients. */
void braid_gpt_backward(braid_gpt_t *model, float dloss,
                        braid_gpt_ready_fn ready, void *ctx);

/* Pointers to block l's tensors in a flat array laid out like params. */
void braid_gpt_block(braid_gpt_block_t *blk, const braid_gpt_t *model,
                     float *base, int l);

#endif
