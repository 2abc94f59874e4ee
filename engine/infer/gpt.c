/* braid-infer's GPT-2 path: config, loading a rank's share, the forward
 * pass over the KV cache (see gpt.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/linalg.h"
#include "engine/infer/gpt.h"
#include "engine/train/nn.h"

/* ---------------------------------------------------------------- config */

braid_status_t braid_infer_gpt_config(braid_infer_config_t *c, const cJSON *j,
                                      const char *path)
{
    braid_gpt_config_t g;
    const char        *tok = NULL;
    braid_status_t     s   = braid_gpt_config_hf(&g, j, path);
    if (s == BRAID_OK)
        s = braid_eng_json_str(&tok, j, "tokenizer", 0, path);
    if (s != BRAID_OK)
        return s;
    c->arch   = BRAID_INFER_GPT2;
    c->hidden = g.n_embd, c->layers = g.n_layer;
    c->heads = c->kv_heads = g.n_head;
    c->head_dim = g.n_embd / g.n_head, c->inter = 4 * (int64_t)g.n_embd;
    c->vocab = g.vocab_size, c->max_pos = g.block_size;
    c->rms_eps = 1e-5; /* LayerNorm's, the one braid_gpt_config_hf allows */
    c->tied = 1, c->dtype = BRAID_F32;
    c->byte_tokens = tok != NULL && strcmp(tok, "bytes") == 0;
    return BRAID_OK;
}

uint64_t braid_infer_gpt_bytes_per_token(const braid_infer_config_t *c,
                                         const braid_infer_split_t  *sp)
{
    uint64_t C = (uint64_t)c->hidden, CA = (uint64_t)sp->q_dim;
    uint64_t CF = (uint64_t)sp->inter;
    uint64_t layer =
        3 * CA * (C + 1) + C * (CA + 1) + CF * (C + 1) + C * (CF + 1) + 4 * C;
    /* the LM head's rows, one wte and one wpe row, ln_f */
    uint64_t rest = (uint64_t)sp->vocab_n * C + 2 * C + 2 * C;
    return ((uint64_t)c->layers * layer + rest) * sizeof(float);
}

/* ---------------------------------------------------------------- loading */

/* What a rank holds of one tensor, in the (out, in) orientation of memory:
 * n pieces (0 to 3: q, k and v of c_attn), piece p the rows [r0[p], +nr)
 * and columns [c0, +nc), stacked in order.  A vector is one column. */
typedef struct {
    int     n;
    int64_t r0[3], nr, c0, nc;
} share_t;

static share_t share_of(const braid_gpt_tensor_t *tn, int i, int L,
                        const braid_infer_split_t *sp)
{
    const braid_gpt_tensor_t *t = &tn[i];
    share_t                   h = {
                          .n = 1, .nr = t->shape[0], .nc = t->ndim == 2 ? t->shape[1] : 1};
    int64_t C = tn[0].shape[1], CA = sp->q_dim, CF = sp->inter;
    int     slot = i >= 2 && i < 2 + L * BRAID_GPT_BLK_COUNT
                       ? (i - 2) % BRAID_GPT_BLK_COUNT
                       : -1;
    if (i == 0) /* wte: this rank's vocabulary rows */
        h.r0[0] = sp->vocab0, h.nr = sp->vocab_n;
    switch (slot) {
    case BRAID_GPT_QKVW:
    case BRAID_GPT_QKVB: /* column-parallel, q k v */
        h.n = 3, h.nr = CA;
        for (int p = 0; p < 3; p++)
            h.r0[p] = p * C + sp->rank * CA;
        break;
    case BRAID_GPT_FCW:
    case BRAID_GPT_FCB: h.r0[0] = sp->rank * CF, h.nr = CF; break;
    case BRAID_GPT_ATTPROJW: /* row-parallel */
        h.c0 = sp->rank * CA, h.nc = CA;
        break;
    case BRAID_GPT_FCPROJW: h.c0 = sp->rank * CF, h.nc = CF; break;
    case BRAID_GPT_ATTPROJB:
    case BRAID_GPT_FCPROJB: /* added once */ h.n = sp->rank == 0; break;
    default: break;
    }
    return h;
}

/* Where tensor i of the layout goes. */
static float **dest_of(braid_infer_gpt_weights_t *g, int i, int L)
{
    int end = 2 + L * BRAID_GPT_BLK_COUNT;
    if (i < 2)
        return i == 0 ? &g->wte : &g->wpe;
    if (i >= end)
        return i == end ? &g->lnfw : &g->lnfb;
    return braid_gpt_block_slot(&g->block[(i - 2) / BRAID_GPT_BLK_COUNT],
                                (i - 2) % BRAID_GPT_BLK_COUNT);
}

/* A GPT2Model checkpoint names tensors without GPT2LMHeadModel's
 * "transformer." (wte.weight, h.0.attn.c_attn.weight, ...). */
static const char *file_name(const char *name, int bare)
{
    return bare ? name + strlen("transformer.") : name;
}

/* The causal-mask buffers old GPT-2 state dicts carry (not parameters). */
static int mask_buffer(const char *name, int bare)
{
    int         n = -1, end = 0;
    char        kind[16];
    const char *fmt =
        bare ? "h.%d.attn.%15[a-z_]%n" : "transformer.h.%d.attn.%15[a-z_]%n";
    return sscanf(name, fmt, &n, kind, &end) == 2 && name[end] == '\0' &&
           (strcmp(kind, "bias") == 0 || strcmp(kind, "masked_bias") == 0);
}

/* Every tensor of the model is in the file with the shape GPT-2 stores, and
 * the file holds nothing else but lm_head.weight and mask buffers. */
static braid_status_t check_tensors(const braid_gpt_tensor_t *tn, int n,
                                    const braid_infer_config_t *c,
                                    const braid_eng_st_t *st, int bare)
{
    braid_status_t s = BRAID_OK;
    for (int i = 0; i < n && s == BRAID_OK; i++) {
        const braid_eng_st_tensor_t *t;
        int                          cv = tn[i].conv1d; /* stored (in, out) */
        int64_t shape[2]                = {tn[i].shape[cv], tn[i].shape[!cv]};
        s = braid_eng_st_expect(&t, st, file_name(tn[i].name, bare),
                                tn[i].ndim, shape);
    }
    for (size_t k = 0; k < braid_eng_st_count(st) && s == BRAID_OK; k++) {
        const braid_eng_st_tensor_t *t = braid_eng_st_at(st, k);
        int known = strcmp(t->name, "lm_head.weight") == 0 ||
                    mask_buffer(t->name, bare);
        for (int i = 0; i < n && !known; i++)
            known = strcmp(t->name, file_name(tn[i].name, bare)) == 0;
        if (!known)
            s = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                               "tensor '%s' (%s) is not part of a GPT-2 with "
                               "this config (%lld layers)",
                               t->name, braid_eng_st_file_name(st, t->file),
                               (long long)c->layers);
    }
    return s;
}

/* dst[nr, nc] = rows [r0, +nr) x columns [c0, +nc) of tensor t in memory's
 * (out, in) orientation; a Conv1D matrix is stored (in, out): its block is
 * read transposed through scratch and turned. */
static braid_status_t read_block(float *dst, float *scratch,
                                 const braid_eng_st_t        *st,
                                 const braid_eng_st_tensor_t *t,
                                 const braid_gpt_tensor_t *g, int64_t r0,
                                 int64_t nr, int64_t c0, int64_t nc)
{
    if (g->ndim == 1) /* a vector's [1, len] view */
        return braid_eng_st_read(dst, BRAID_F32, st, t, 0, 1, r0, nr);
    if (!g->conv1d)
        return braid_eng_st_read(dst, BRAID_F32, st, t, r0, nr, c0, nc);
    braid_status_t s =
        braid_eng_st_read(scratch, BRAID_F32, st, t, c0, nc, r0, nr);
    if (s == BRAID_OK)
        braid_eng_transpose(dst, scratch, nc, nr);
    return s;
}

/* A tied checkpoint that still carries lm_head.weight carries wte: this
 * rank's rows are compared. */
static braid_status_t check_head(const braid_infer_gpt_weights_t *g,
                                 const braid_infer_config_t      *c,
                                 const braid_infer_split_t       *sp,
                                 const braid_eng_st_t *st, int bare,
                                 float *scratch)
{
    const braid_eng_st_tensor_t *t;
    const int64_t shape[2] = {c->vocab, c->hidden}, C = c->hidden;
    if (!braid_eng_st_find(st, "lm_head.weight"))
        return BRAID_OK;
    braid_status_t s = braid_eng_st_expect(&t, st, "lm_head.weight", 2, shape);
    for (int64_t r = 0; r < sp->vocab_n && s == BRAID_OK; r++) {
        s = braid_eng_st_read(scratch, BRAID_F32, st, t, sp->vocab0 + r, 1, 0,
                              C);
        if (s == BRAID_OK &&
            memcmp(scratch, g->wte + r * C, (size_t)C * sizeof(float)) != 0)
            s = braid_eng_fail(
                BRAID_ERR_INVALID_ARG,
                "lm_head.weight row %lld differs from %s: GPT-2 "
                "ties them",
                (long long)(sp->vocab0 + r),
                file_name("transformer.wte.weight", bare));
    }
    return s;
}

braid_status_t braid_infer_gpt_load(braid_infer_weights_t      *w,
                                    const braid_infer_config_t *c,
                                    const braid_infer_split_t  *sp,
                                    const braid_eng_st_t       *st)
{
    braid_gpt_config_t gc = {.n_layer    = (int)c->layers,
                             .n_head     = (int)c->heads,
                             .n_embd     = (int)c->hidden,
                             .block_size = (int)c->max_pos,
                             .vocab_size = (int)c->vocab};
    int                n = braid_gpt_ntensors(&gc), L = gc.n_layer;
    int bare = !braid_eng_st_find(st, "transformer.wte.weight") &&
               braid_eng_st_find(st, "wte.weight");
    braid_gpt_tensor_t        *tn      = calloc((size_t)n, sizeof(*tn));
    braid_infer_gpt_weights_t *g       = calloc(1, sizeof(*g));
    float                     *scratch = NULL;
    memset(w, 0, sizeof(*w));
    w->gpt = g;
    if (g)
        g->block = calloc((size_t)L, sizeof(*g->block));
    braid_status_t s =
        tn && g && g->block
            ? BRAID_OK
            : braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    if (s == BRAID_OK) {
        braid_gpt_layout(tn, &gc);
        g->d = (braid_gpt_dims_t){.C  = gc.n_embd,
                                  .NH = (int)sp->heads,
                                  .CA = (int)sp->q_dim,
                                  .CF = (int)sp->inter};
        s    = check_tensors(tn, n, c, st, bare);
    }
    /* one arena for the share; scratch for the largest piece */
    size_t need = 0, largest = (size_t)c->hidden;
    for (int i = 0; i < n && s == BRAID_OK; i++) {
        share_t h     = share_of(tn, i, L, sp);
        size_t  piece = (size_t)(h.nr * h.nc);
        need += braid_eng_arena_need((size_t)h.n * piece * sizeof(float));
        largest = piece > largest ? piece : largest;
    }
    if (s == BRAID_OK)
        s = braid_eng_arena_init(&w->arena, need);
    if (s == BRAID_OK && !(scratch = malloc(largest * sizeof(float))))
        s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n && s == BRAID_OK; i++) {
        share_t h     = share_of(tn, i, L, sp);
        size_t  piece = (size_t)(h.nr * h.nc);
        size_t  bytes = (size_t)h.n * piece * sizeof(float);
        const braid_eng_st_tensor_t *t =
            braid_eng_st_find(st, file_name(tn[i].name, bare));
        float **dst = dest_of(g, i, L);
        if (bytes == 0)
            continue; /* a row-parallel bias (rank 0 adds it), no vocab */
        *dst = braid_eng_arena_take(&w->arena, bytes);
        w->bytes += bytes;
        for (int p = 0; p < h.n && s == BRAID_OK; p++)
            s = read_block(*dst + p * piece, scratch, st, t, &tn[i], h.r0[p],
                           h.nr, h.c0, h.nc);
    }
    if (s == BRAID_OK)
        s = check_head(g, c, sp, st, bare, scratch);
    free(scratch);
    free(tn);
    if (s != BRAID_OK)
        braid_infer_gpt_weights_free(w);
    return s;
}

void braid_infer_gpt_weights_free(braid_infer_weights_t *w)
{
    if (w->gpt)
        free(w->gpt->block);
    free(w->gpt);
    braid_eng_arena_free(&w->arena);
    memset(w, 0, sizeof(*w));
}

/* ---------------------------------------------------------------- forward */

typedef struct braid_infer_gpt_state {
    braid_eng_arena_t      kv;    /* holds the cache (huge pages) */
    float                 *cache; /* [L, ctx, 3CA]: every position's qkv */
    float                 *x;     /* [chunk, C]: the residual stream */
    float                 *mem;   /* the activations below */
    braid_gpt_block_acts_t acts;  /* one block's, reused by every layer */
} gpt_state_t;

/* n floats off *p */
static float *take(float **p, size_t n)
{
    *p += n;
    return *p - n;
}

braid_status_t braid_infer_gpt_init(braid_infer_model_t *m)
{
    const braid_gpt_dims_t *d = &m->w->gpt->d;
    size_t T = (size_t)m->chunk, S = (size_t)m->ctx, C = (size_t)d->C;
    size_t cache =
        (size_t)m->cfg->layers * S * 3 * (size_t)d->CA * sizeof(float);
    /* x, ln1, residual2, ln2: [T, C]; atty [T, CA]; fch, fch_gelu [T, CF];
     * means and rstds [T] x 4; att [NH, T, S] */
    size_t n = 4 * T * C + T * (size_t)d->CA + 2 * T * (size_t)d->CF + 4 * T +
               (size_t)d->NH * T * S;
    gpt_state_t *g = calloc(1, sizeof(*g));
    m->gpt         = g;
    if (!g ||
        braid_eng_arena_init(&g->kv, braid_eng_arena_need(cache)) !=
            BRAID_OK ||
        !(g->cache = braid_eng_arena_take(&g->kv, cache)) ||
        !(g->mem = malloc(n * sizeof(float))))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                              "out of memory for a KV cache of %lld positions",
                              (long long)m->ctx);
    float                  *p = g->mem;
    braid_gpt_block_acts_t *a = &g->acts;
    g->x                      = take(&p, T * C);
    a->ln1                    = take(&p, T * C);
    a->residual2              = take(&p, T * C);
    a->ln2                    = take(&p, T * C);
    a->atty                   = take(&p, T * (size_t)d->CA);
    a->fch                    = take(&p, T * (size_t)d->CF);
    a->fch_gelu               = take(&p, T * (size_t)d->CF);
    a->ln1_mean               = take(&p, T);
    a->ln1_rstd               = take(&p, T);
    a->ln2_mean               = take(&p, T);
    a->ln2_rstd               = take(&p, T);
    a->att                    = take(&p, (size_t)d->NH * T * S);
    return BRAID_OK;
}

void braid_infer_gpt_free(braid_infer_model_t *m)
{
    if (!m->gpt)
        return;
    braid_eng_arena_free(&m->gpt->kv);
    free(m->gpt->mem);
    free(m->gpt);
    m->gpt = NULL;
}

static braid_status_t reduce(void *m, float *buf, size_t n)
{
    return braid_infer_allreduce(m, buf, n);
}

braid_status_t braid_infer_gpt_forward(braid_infer_model_t *m,
                                       const int32_t *tokens, int64_t T,
                                       int64_t first, float *logits)
{
    const braid_infer_gpt_weights_t *w = m->w->gpt;
    gpt_state_t                     *g = m->gpt;
    int64_t C = w->d.C, pos = m->pos, vn = m->sp.vocab_n;
    /* x[T, C] = wte[tokens] + wpe[pos ..]: the owner of a token's row
     * writes it, the others zeros, and the sum is the row (adding zeros is
     * exact), so every rank count gives braid-train's embedding bit for bit */
    for (int64_t t = 0; t < T; t++) {
        int64_t row = tokens[t] - m->sp.vocab0;
        if (row >= 0 && row < vn)
            memcpy(g->x + t * C, w->wte + row * C, (size_t)C * sizeof(float));
        else
            memset(g->x + t * C, 0, (size_t)C * sizeof(float));
    }
    braid_status_t s = braid_infer_allreduce(m, g->x, (size_t)(T * C));
    if (s == BRAID_OK)
        braid_nn_residual_forward(g->x, g->x, w->wpe + pos * C,
                                  (size_t)(T * C));
    braid_gpt_block_acts_t a = g->acts;
    a.residual3 = g->x; /* each block updates the stream in place */
    for (int64_t l = 0; l < m->cfg->layers && s == BRAID_OK; l++) {
        a.qkv = g->cache + l * m->ctx * 3 * w->d.CA;
        s = braid_gpt_block_forward(&a, &w->block[l], g->x, &w->d, 1, (int)T,
                                    (int)pos, reduce, m);
    }
    if (s != BRAID_OK || vn == 0)
        return s;
    /* ln_f, and the LM head: this rank's rows of wte */
    int n = (int)(T - first);
    braid_nn_layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, g->x + first * C,
                               w->lnfw, w->lnfb, n, (int)C);
    braid_nn_matmul_forward(logits, a.ln1, w->wte, NULL, n, (int)C, (int)vn);
    return BRAID_OK;
}
