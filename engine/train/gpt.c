/* braid-train's GPT: parameter layout, forward and backward passes (see
 * gpt.h for the layout and why it is ordered so). */
#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/err.h"
#include "nn.h"
#include "util.h"

#define BLK_COUNT BRAID_GPT_BLK_COUNT

static const char *const blk_names[BLK_COUNT] = {
    "ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
    "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias",
};

#define T_WTE       0
#define T_WPE       1
#define T_BLK(l, k) (2 + (l)*BLK_COUNT + (k))
#define T_LNFW(L)   (2 + (L)*BLK_COUNT)
#define T_LNFB(L)   (3 + (L)*BLK_COUNT)

/* ----------------------------------------------------------------------------
 * layout */

static void set_tensor(braid_gpt_tensor_t *t, size_t *offset, const char *name,
                       int rows, int cols)
{
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->ndim     = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 0;
    t->numel    = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    t->decay    = t->ndim == 2;
    t->conv1d   = 0;
    t->offset   = *offset;
    *offset += t->numel;
}

int braid_gpt_ntensors(const braid_gpt_config_t *c)
{
    return 4 + c->n_layer * BLK_COUNT;
}

size_t braid_gpt_layout(braid_gpt_tensor_t *tn, const braid_gpt_config_t *c)
{
    int    C = c->n_embd, L = c->n_layer;
    size_t off = 0;
    char   name[64];
    set_tensor(&tn[T_WTE], &off, "transformer.wte.weight", c->vocab_size, C);
    set_tensor(&tn[T_WPE], &off, "transformer.wpe.weight", c->block_size, C);
    /* (rows, cols) of each block tensor; cols 0 for vectors */
    const int shape[BLK_COUNT][2] = {
        {C, 0}, {C, 0}, {3 * C, C}, {3 * C, 0}, {C, C},     {C, 0},
        {C, 0}, {C, 0}, {4 * C, C}, {4 * C, 0}, {C, 4 * C}, {C, 0},
    };
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < BLK_COUNT; k++) {
            snprintf(name, sizeof(name), "transformer.h.%d.%s", l,
                     blk_names[k]);
            set_tensor(&tn[T_BLK(l, k)], &off, name, shape[k][0], shape[k][1]);
            tn[T_BLK(l, k)].conv1d = shape[k][1] > 0;
        }
    }
    set_tensor(&tn[T_LNFW(L)], &off, "transformer.ln_f.weight", C, 0);
    set_tensor(&tn[T_LNFB(L)], &off, "transformer.ln_f.bias", C, 0);
    return off;
}

size_t braid_gpt_nparams(const braid_gpt_config_t *c)
{
    size_t C = (size_t)c->n_embd;
    return (size_t)c->vocab_size * C + (size_t)c->block_size * C +
           (size_t)c->n_layer * (12 * C * C + 13 * C) + 2 * C;
}

float **braid_gpt_block_slot(braid_gpt_block_t *blk, int k)
{
    float **p[BLK_COUNT] = {
        &blk->ln1w,     &blk->ln1b,     &blk->qkvw,    &blk->qkvb,
        &blk->attprojw, &blk->attprojb, &blk->ln2w,    &blk->ln2b,
        &blk->fcw,      &blk->fcb,      &blk->fcprojw, &blk->fcprojb,
    };
    return p[k];
}

void braid_gpt_block(braid_gpt_block_t *blk, const braid_gpt_t *model,
                     float *base, int l)
{
    const braid_gpt_tensor_t *t = &model->tensors[T_BLK(l, 0)];
    for (int k = 0; k < BLK_COUNT; k++)
        *braid_gpt_block_slot(blk, k) = base + t[k].offset;
}

/* ----------------------------------------------------------------------------
 * allocation */

/* Carves n floats off *cur. */
static float *take(float **cur, size_t n)
{
    float *p = *cur;
    *cur += n;
    return p;
}

static size_t acts_layout(braid_gpt_acts_t *a, float *base,
                          const braid_gpt_config_t *c, int B, int T)
{
    size_t L = (size_t)c->n_layer, C = (size_t)c->n_embd;
    size_t NH = (size_t)c->n_head, V = (size_t)c->vocab_size;
    size_t BT    = (size_t)B * T;
    float *cur   = base;
    a->encoded   = take(&cur, BT * C);
    a->ln1       = take(&cur, L * BT * C);
    a->ln1_mean  = take(&cur, L * BT);
    a->ln1_rstd  = take(&cur, L * BT);
    a->qkv       = take(&cur, L * BT * 3 * C);
    a->atty      = take(&cur, L * BT * C);
    a->att       = take(&cur, L * B * NH * T * T);
    a->residual2 = take(&cur, L * BT * C);
    a->ln2       = take(&cur, L * BT * C);
    a->ln2_mean  = take(&cur, L * BT);
    a->ln2_rstd  = take(&cur, L * BT);
    a->fch       = take(&cur, L * BT * 4 * C);
    a->fch_gelu  = take(&cur, L * BT * 4 * C);
    a->residual3 = take(&cur, L * BT * C);
    a->lnf       = take(&cur, BT * C);
    a->lnf_mean  = take(&cur, BT);
    a->lnf_rstd  = take(&cur, BT);
    a->probs     = take(&cur, BT * V);
    a->losses    = take(&cur, BT);
    return (size_t)(cur - base);
}

static size_t scratch_layout(braid_gpt_scratch_t *s, float *base,
                             const braid_gpt_config_t *c, int B, int T)
{
    size_t C = (size_t)c->n_embd, BT = (size_t)B * T;
    float *cur   = base;
    s->dresidual = take(&cur, BT * C);
    s->dln       = take(&cur, BT * C);
    s->datty     = take(&cur, BT * C);
    s->dqkv      = take(&cur, BT * 3 * C);
    s->dfch      = take(&cur, BT * 4 * C);
    s->datt      = take(&cur, (size_t)T * T);
    return (size_t)(cur - base);
}

braid_status_t braid_gpt_create(braid_gpt_t             **model,
                                const braid_gpt_config_t *cfg, int B, int T)
{
    braid_status_t st = braid_gpt_config_check(cfg);
    *model            = NULL;
    if (st != BRAID_OK)
        return st;
    if (B < 1 || T < 1 || T > cfg->block_size)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "batch %d x %d tokens: "
                              "need B >= 1 and 1 <= T <= block_size (%d)",
                              B, T, cfg->block_size);
    braid_gpt_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        goto oom;
    m->cfg      = *cfg;
    m->B        = B;
    m->T        = T;
    m->ntensors = braid_gpt_ntensors(cfg);
    m->tensors  = calloc((size_t)m->ntensors, sizeof(*m->tensors));
    if (m->tensors == NULL)
        goto oom;
    m->nparams     = braid_gpt_layout(m->tensors, cfg);
    size_t nact    = acts_layout(&m->acts, NULL, cfg, B, T);
    size_t nscr    = scratch_layout(&m->scratch, NULL, cfg, B, T);
    m->params      = malloc(m->nparams * sizeof(float));
    m->grads       = calloc(m->nparams, sizeof(float));
    m->act_mem     = malloc(nact * sizeof(float));
    m->scratch_mem = malloc(nscr * sizeof(float));
    m->inputs      = malloc((size_t)B * T * sizeof(int));
    m->targets     = malloc((size_t)B * T * sizeof(int));
    if (m->params == NULL || m->grads == NULL || m->act_mem == NULL ||
        m->scratch_mem == NULL || m->inputs == NULL || m->targets == NULL)
        goto oom;
    acts_layout(&m->acts, m->act_mem, cfg, B, T);
    scratch_layout(&m->scratch, m->scratch_mem, cfg, B, T);
    *model = m;
    return BRAID_OK;
oom:
    braid_gpt_free(m);
    return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                          "out of memory for a model "
                          "of L=%d C=%d and a batch of %d x %d tokens",
                          cfg->n_layer, cfg->n_embd, B, T);
}

void braid_gpt_free(braid_gpt_t *model)
{
    if (model == NULL)
        return;
    free(model->tensors);
    free(model->params);
    free(model->grads);
    free(model->act_mem);
    free(model->scratch_mem);
    free(model->inputs);
    free(model->targets);
    free(model);
}

void braid_gpt_init_weights(braid_gpt_t *model, unsigned long long seed)
{
    braid_eng_rng_t rng = {braid_eng_mix64(seed)};
    float resid_std     = 0.02f / sqrtf(2.0f * (float)model->cfg.n_layer);
    for (int i = 0; i < model->ntensors; i++) {
        const braid_gpt_tensor_t *t = &model->tensors[i];
        float                    *p = model->params + t->offset;
        if (t->ndim == 1) {
            /* LayerNorm weights start at 1, every bias at 0 */
            float v = strstr(t->name, ".weight") != NULL ? 1.0f : 0.0f;
            for (size_t j = 0; j < t->numel; j++)
                p[j] = v;
            continue;
        }
        /* Projections that add into the residual stream are scaled down so
         * that its variance does not grow with depth (GPT-2). */
        float std =
            strstr(t->name, "c_proj.weight") != NULL ? resid_std : 0.02f;
        for (size_t j = 0; j < t->numel; j++)
            p[j] = std * braid_train_normal(&rng);
    }
}

void braid_gpt_zero_grad(braid_gpt_t *model)
{
    memset(model->grads, 0, model->nparams * sizeof(float));
}

/* ----------------------------------------------------------------------------
 * forward pass */

static braid_gpt_dims_t whole_block(const braid_gpt_config_t *c)
{
    return (braid_gpt_dims_t){
        .C = c->n_embd, .NH = c->n_head, .CA = c->n_embd, .CF = 4 * c->n_embd};
}

/* Block l's activations in a model's arrays. */
static braid_gpt_block_acts_t layer_acts(const braid_gpt_t *m, int l)
{
    const braid_gpt_acts_t *a = &m->acts;
    size_t BT = (size_t)m->B * m->T, C = (size_t)m->cfg.n_embd;
    size_t NH = (size_t)m->cfg.n_head, L = (size_t)l;
    return (braid_gpt_block_acts_t){
        .ln1       = a->ln1 + L * BT * C,
        .ln1_mean  = a->ln1_mean + L * BT,
        .ln1_rstd  = a->ln1_rstd + L * BT,
        .qkv       = a->qkv + L * BT * 3 * C,
        .atty      = a->atty + L * BT * C,
        .att       = a->att + L * (size_t)m->B * NH * m->T * m->T,
        .residual2 = a->residual2 + L * BT * C,
        .ln2       = a->ln2 + L * BT * C,
        .ln2_mean  = a->ln2_mean + L * BT,
        .ln2_rstd  = a->ln2_rstd + L * BT,
        .fch       = a->fch + L * BT * 4 * C,
        .fch_gelu  = a->fch_gelu + L * BT * 4 * C,
        .residual3 = a->residual3 + L * BT * C,
    };
}

braid_status_t braid_gpt_block_forward(braid_gpt_block_acts_t  *a,
                                       const braid_gpt_block_t *w,
                                       const float             *residual,
                                       const braid_gpt_dims_t *d, int B, int T,
                                       int pos, braid_gpt_reduce_fn reduce,
                                       void *ctx)
{
    int    N = B * T, C = d->C;
    size_t NC  = (size_t)N * C;
    float *qkv = a->qkv + (size_t)pos * 3 * d->CA; /* this call's rows */
    braid_status_t st = BRAID_OK;

    /* x = x + attn(ln_1(x)); the projection lands in residual2 first */
    braid_nn_layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, residual,
                               w->ln1w, w->ln1b, N, C);
    braid_nn_matmul_forward(qkv, a->ln1, w->qkvw, w->qkvb, N, C, 3 * d->CA);
    braid_nn_attention_forward(a->atty, a->att, a->qkv, B, T, pos, d->CA,
                               d->NH);
    braid_nn_matmul_forward(a->residual2, a->atty, w->attprojw, w->attprojb, N,
                            d->CA, C);
    if (reduce != NULL && (st = reduce(ctx, a->residual2, NC)) != BRAID_OK)
        return st;
    braid_nn_residual_forward(a->residual2, a->residual2, residual, NC);
    /* x = x + mlp(ln_2(x)); residual3 may be residual: no longer read */
    braid_nn_layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->residual2,
                               w->ln2w, w->ln2b, N, C);
    braid_nn_matmul_forward(a->fch, a->ln2, w->fcw, w->fcb, N, C, d->CF);
    braid_nn_gelu_forward(a->fch_gelu, a->fch, (size_t)N * d->CF);
    braid_nn_matmul_forward(a->residual3, a->fch_gelu, w->fcprojw, w->fcprojb,
                            N, d->CF, C);
    if (reduce != NULL && (st = reduce(ctx, a->residual3, NC)) != BRAID_OK)
        return st;
    braid_nn_residual_forward(a->residual3, a->residual3, a->residual2, NC);
    return BRAID_OK;
}

float braid_gpt_forward(braid_gpt_t *model, const int *inputs,
                        const int *targets)
{
    const braid_gpt_config_t *c = &model->cfg;
    braid_gpt_acts_t         *a = &model->acts;
    braid_gpt_dims_t          d = whole_block(c);
    int                       B = model->B, T = model->T, C = c->n_embd;
    int                       V = c->vocab_size, L = c->n_layer;
    size_t                    BT = (size_t)B * T;
    float                    *p  = model->params;

    memcpy(model->inputs, inputs, BT * sizeof(int));
    if (targets != NULL)
        memcpy(model->targets, targets, BT * sizeof(int));

    braid_nn_encoder_forward(a->encoded, inputs,
                             p + model->tensors[T_WTE].offset,
                             p + model->tensors[T_WPE].offset, B, T, C);
    const float *residual = a->encoded; /* (B,T,C) entering block l */
    for (int l = 0; l < L; l++) {
        braid_gpt_block_t      w;
        braid_gpt_block_acts_t la = layer_acts(model, l);
        braid_gpt_block(&w, model, p, l);
        braid_gpt_block_forward(&la, &w, residual, &d, B, T, 0, NULL, NULL);
        residual = la.residual3;
    }
    braid_nn_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, residual,
                               p + model->tensors[T_LNFW(L)].offset,
                               p + model->tensors[T_LNFB(L)].offset, (int)BT,
                               C);
    /* the LM head is the token embedding, transposed: logits (B,T,V) */
    braid_nn_matmul_forward(a->probs, a->lnf, p + model->tensors[T_WTE].offset,
                            NULL, (int)BT, C, V);
    if (targets == NULL) {
        /* probabilities for sampling; no loss */
        for (size_t n = 0; n < BT; n++) {
            float *row = a->probs + n * V;
            float  max = row[0], sum = 0.0f;
            for (int i = 1; i < V; i++)
                max = row[i] > max ? row[i] : max;
            for (int i = 0; i < V; i++) {
                row[i] = expf(row[i] - max);
                sum += row[i];
            }
            for (int i = 0; i < V; i++)
                row[i] /= sum;
        }
        return 0.0f;
    }
    double total = braid_nn_crossentropy_forward(a->probs, a->losses, targets,
                                                 (int)BT, V);
    return (float)(total / (double)BT);
}

/* ----------------------------------------------------------------------------
 * backward pass */

static void ready_at(braid_gpt_ready_fn ready, void *ctx,
                     const braid_gpt_tensor_t *t)
{
    if (ready != NULL)
        ready(ctx, t->offset);
}

void braid_gpt_backward(braid_gpt_t *model, float dloss,
                        braid_gpt_ready_fn ready, void *ctx)
{
    const braid_gpt_config_t *c = &model->cfg;
    braid_gpt_acts_t         *a = &model->acts;
    braid_gpt_scratch_t      *s = &model->scratch;
    int    B = model->B, T = model->T, C = c->n_embd, NH = c->n_head;
    int    V = c->vocab_size, L = c->n_layer;
    size_t BT = (size_t)B * T;
    float *p = model->params, *g = model->grads;
    const braid_gpt_tensor_t *tn = model->tensors;

    /* loss -> logits -> ln_f; the LM head's share of dwte comes first */
    braid_nn_crossentropy_backward(a->probs, model->targets, dloss, (int)BT,
                                   V);
    braid_nn_matmul_backward(s->dln, g + tn[T_WTE].offset, NULL, a->probs,
                             a->lnf, p + tn[T_WTE].offset, (int)BT, C, V);
    const float *res_last =
        L > 0 ? a->residual3 + (L - 1) * BT * C : a->encoded;
    memset(s->dresidual, 0, BT * C * sizeof(float));
    braid_nn_layernorm_backward(s->dresidual, g + tn[T_LNFW(L)].offset,
                                g + tn[T_LNFB(L)].offset, s->dln, res_last,
                                p + tn[T_LNFW(L)].offset, a->lnf_mean,
                                a->lnf_rstd, (int)BT, C);
    ready_at(ready, ctx, &tn[T_LNFW(L)]);

    /* s->dresidual holds the gradient of the residual stream leaving block
     * l; each block adds its own paths to it and hands it on. */
    for (int l = L - 1; l >= 0; l--) {
        braid_gpt_block_t w, dw;
        braid_gpt_block(&w, model, p, l);
        braid_gpt_block(&dw, model, g, l);
        const float *residual =
            l == 0 ? a->encoded : a->residual3 + (l - 1) * BT * C;
        braid_gpt_block_acts_t la = layer_acts(model, l);

        /* MLP: residual3 = residual2 + fcproj(gelu(fc(ln_2(residual2)))) */
        braid_nn_matmul_backward(s->dfch, dw.fcprojw, dw.fcprojb, s->dresidual,
                                 la.fch_gelu, w.fcprojw, (int)BT, 4 * C, C);
        ready_at(ready, ctx, &tn[T_BLK(l, BRAID_GPT_FCPROJW)]);
        braid_nn_gelu_backward(s->dfch, la.fch, s->dfch, BT * 4 * C);
        braid_nn_matmul_backward(s->dln, dw.fcw, dw.fcb, s->dfch, la.ln2,
                                 w.fcw, (int)BT, C, 4 * C);
        ready_at(ready, ctx, &tn[T_BLK(l, BRAID_GPT_FCW)]);
        braid_nn_layernorm_backward(s->dresidual, dw.ln2w, dw.ln2b, s->dln,
                                    la.residual2, w.ln2w, la.ln2_mean,
                                    la.ln2_rstd, (int)BT, C);
        ready_at(ready, ctx, &tn[T_BLK(l, BRAID_GPT_LN2W)]);
        /* attention: residual2 = residual + attproj(attn(qkv(ln_1(x)))) */
        braid_nn_matmul_backward(s->datty, dw.attprojw, dw.attprojb,
                                 s->dresidual, la.atty, w.attprojw, (int)BT, C,
                                 C);
        ready_at(ready, ctx, &tn[T_BLK(l, BRAID_GPT_ATTPROJW)]);
        braid_nn_attention_backward(s->dqkv, s->datt, s->datty, la.qkv, la.att,
                                    B, T, C, NH);
        braid_nn_matmul_backward(s->dln, dw.qkvw, dw.qkvb, s->dqkv, la.ln1,
                                 w.qkvw, (int)BT, C, 3 * C);
        ready_at(ready, ctx, &tn[T_BLK(l, BRAID_GPT_QKVW)]);
        braid_nn_layernorm_backward(s->dresidual, dw.ln1w, dw.ln1b, s->dln,
                                    residual, w.ln1w, la.ln1_mean, la.ln1_rstd,
                                    (int)BT, C);
        ready_at(ready, ctx, &tn[T_BLK(l, BRAID_GPT_LN1W)]);
    }
    braid_nn_encoder_backward(g + tn[T_WTE].offset, g + tn[T_WPE].offset,
                              s->dresidual, model->inputs, B, T, C);
    ready_at(ready, ctx, &tn[T_WTE]);
}
