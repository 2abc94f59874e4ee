/* Forward pass of the tensor-parallel decoder (see model.h). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/linalg.h"
#include "engine/common/util.h"
#include "engine/infer/gpt.h"
#include "engine/infer/model.h"

/* ---------------------------------------------------------------- setup */

static float *alloc_floats(size_t n, int *failed)
{
    float *p = NULL;
    if (posix_memalign((void **)&p, 64, (n ? n : 1) * sizeof(float)) != 0) {
        *failed = 1;
        return NULL;
    }
    return p;
}

static braid_status_t qwen_init(braid_infer_model_t *m);

braid_status_t
braid_infer_model_init(braid_infer_model_t *m, const braid_infer_config_t *c,
                       const braid_infer_split_t   *sp,
                       const braid_infer_weights_t *w, braid_comm_t *comm,
                       braid_eng_pool_t *pool, int64_t ctx, int64_t chunk)
{
    memset(m, 0, sizeof(*m));
    if (braid_comm_size(comm) != sp->size || braid_comm_rank(comm) != sp->rank)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "model split for rank %d of %d, communicator is "
                              "rank %d of %d",
                              sp->rank, sp->size, braid_comm_rank(comm),
                              braid_comm_size(comm));
    if (ctx < 1 || ctx > c->max_pos || chunk < 1)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "context of %lld positions: the model allows "
                              "1 to %lld",
                              (long long)ctx, (long long)c->max_pos);
    if (c->vocab >= (1 << 24))
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "vocab_size %lld: ids above 2^24 are not "
                              "supported",
                              (long long)c->vocab);
    m->cfg = c, m->sp = *sp, m->w = w, m->comm = comm, m->pool = pool;
    m->ctx   = ctx;
    m->chunk = chunk < ctx ? chunk : ctx;
    braid_status_t s =
        c->arch == BRAID_INFER_GPT2 ? braid_infer_gpt_init(m) : qwen_init(m);
    if (s != BRAID_OK)
        braid_infer_model_free(m);
    return s;
}

/* The Qwen3 path's KV cache, RoPE table and activations. */
static braid_status_t qwen_init(braid_infer_model_t *m)
{
    const braid_infer_config_t *c   = m->cfg;
    const braid_infer_split_t  *sp  = &m->sp;
    int64_t                     ctx = m->ctx;
    int64_t                     H = c->hidden, hd = c->head_dim, T = m->chunk;
    int64_t                     widest = H > sp->q_dim ? H : sp->q_dim;
    widest        = widest > sp->inter ? widest : sp->inter;
    int    failed = 0;
    size_t kv     = (size_t)(c->layers * ctx * sp->kv_dim) * sizeof(float);
    if (braid_eng_arena_init(&m->kv, 2 * braid_eng_arena_need(kv)) !=
            BRAID_OK ||
        !(m->kcache = braid_eng_arena_take(&m->kv, kv)) ||
        !(m->vcache = braid_eng_arena_take(&m->kv, kv)))
        failed = 1;
    m->rope    = alloc_floats((size_t)(ctx * hd), &failed);
    m->x       = alloc_floats((size_t)(T * H), &failed);
    m->h       = alloc_floats((size_t)(T * H), &failed);
    m->proj    = alloc_floats((size_t)(T * H), &failed);
    m->q       = alloc_floats((size_t)(T * sp->q_dim), &failed);
    m->att     = alloc_floats((size_t)(T * sp->q_dim), &failed);
    m->k       = alloc_floats((size_t)(T * sp->kv_dim), &failed);
    m->v       = alloc_floats((size_t)(T * sp->kv_dim), &failed);
    m->g       = alloc_floats((size_t)(T * sp->inter), &failed);
    m->u       = alloc_floats((size_t)(T * sp->inter), &failed);
    m->scores  = alloc_floats((size_t)(T * ctx), &failed);
    m->scratch = alloc_floats(braid_eng_matmul_scratch(widest), &failed);
    if (failed) {
        return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                              "out of memory for a KV cache of %lld positions",
                              (long long)ctx);
    }
    /* RoPE angles pos * theta^(-2i/hd), in double: exact to f32 rounding
     * even at large positions. */
    for (int64_t p = 0; p < ctx; p++)
        for (int64_t i = 0; i < hd / 2; i++) {
            double a =
                (double)p * pow(c->rope_theta, -2.0 * (double)i / (double)hd);
            m->rope[(p * (hd / 2) + i) * 2]     = (float)cos(a);
            m->rope[(p * (hd / 2) + i) * 2 + 1] = (float)sin(a);
        }
    return BRAID_OK;
}

void braid_infer_model_free(braid_infer_model_t *m)
{
    braid_infer_gpt_free(m);
    braid_eng_arena_free(&m->kv);
    m->kcache = m->vcache = NULL;
    float **bufs[]        = {&m->rope, &m->x,   &m->h,      &m->proj,
                             &m->q,    &m->att, &m->k,      &m->v,
                             &m->g,    &m->u,   &m->scores, &m->scratch};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

void braid_infer_model_reset(braid_infer_model_t *m) { m->pos = 0; }

/* ---------------------------------------------------------------- blocks */

braid_status_t braid_infer_allreduce(braid_infer_model_t *m, float *buf,
                                     size_t n)
{
    if (m->sp.size == 1)
        return BRAID_OK;
    double         t0 = braid_eng_now();
    braid_status_t s =
        braid_allreduce(buf, buf, n, BRAID_F32, BRAID_SUM, m->comm);
    braid_infer_stats_t *st = &m->stats;
    st->allreduce_s += braid_eng_now() - t0;
    st->allreduces++;
    uint64_t bytes = n * sizeof(float);
    int      i     = 0;
    while (i < st->n_sizes && st->size_bytes[i] != bytes)
        i++;
    if (i == st->n_sizes && i < BRAID_INFER_MAX_SIZES)
        st->size_bytes[st->n_sizes++] = bytes;
    if (i < st->n_sizes)
        st->size_calls[i]++;
    return s == BRAID_OK ? BRAID_OK : braid_eng_fail_braid(s, "all-reduce");
}

/* x[T, H] += the sum over ranks of proj[T, H]: the end of a row-parallel
 * block, whose every rank holds a partial product. */
static braid_status_t add_reduced(braid_infer_model_t *m, int64_t T)
{
    int64_t        n = T * m->cfg->hidden;
    braid_status_t s = braid_infer_allreduce(m, m->proj, (size_t)n);
    for (int64_t i = 0; i < n; i++)
        m->x[i] += m->proj[i];
    return s;
}

/* out[n] = x[n] / rms(x) * w[n] */
static void rmsnorm(float *out, const float *x, const float *w, int64_t n,
                    double eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

/* Rotate-half RoPE of one head vec[hd] at the angles cs[hd/2][cos, sin]. */
static void rope(float *vec, const float *cs, int64_t hd)
{
    int64_t half = hd / 2;
    for (int64_t i = 0; i < half; i++) {
        float a = vec[i], b = vec[i + half];
        float c = cs[2 * i], s = cs[2 * i + 1];
        vec[i]        = a * c - b * s;
        vec[i + half] = b * c + a * s;
    }
}

/* out[T, W->rows] = in[T, W->cols] W^T: matvec for one token (memory
 * bound, weights read in their own type), sgemm for several. */
static void linear(braid_infer_model_t *m, float *out, const float *in,
                   const braid_eng_mat_t *W, int64_t T)
{
    if (T == 1)
        braid_eng_matvec(m->pool, 1, &out, &W, in);
    else
        braid_eng_matmul(out, in, W, T, m->scratch);
}

/* The attention of tokens [0, T) of this call, at positions pos + t, over
 * the cache of layer l (k, v of this call already in it): own heads.  Per
 * query head h (kv head g = h / group), with S = pos + T cached positions:
 *   scores[T, S] = q_h[T, hd] k_g[S, hd]^T / sqrt(hd), causal: token t sees
 *                  positions <= pos + t
 *   att_h[T, hd] = softmax(scores) v_g[S, hd]
 * through CBLAS (sgemv for one token), reading q, k, v in place with their
 * row strides (q_dim, kv_dim). */
static void attention(braid_infer_model_t *m, int64_t l, int64_t T)
{
    const braid_infer_config_t *c = m->cfg;
    int64_t      hd = c->head_dim, kv_dim = m->sp.kv_dim, q_dim = m->sp.q_dim;
    int64_t      group = m->sp.heads / m->sp.kv_heads, S = m->pos + T;
    const float *kc    = m->kcache + l * m->ctx * kv_dim;
    const float *vc    = m->vcache + l * m->ctx * kv_dim;
    float        scale = 1.0f / sqrtf((float)hd);
    for (int64_t hh = 0; hh < m->sp.heads; hh++) {
        const float *q = m->q + hh * hd, *k = kc + (hh / group) * hd;
        const float *v   = vc + (hh / group) * hd;
        float       *out = m->att + hh * hd, *sc = m->scores;
        if (T == 1)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)S, (int)hd, scale, k,
                        (int)kv_dim, q, 1, 0.0f, sc, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T,
                        (int)S, (int)hd, scale, q, (int)q_dim, k, (int)kv_dim,
                        0.0f, sc, (int)S);
        for (int64_t t = 0; t < T; t++) { /* causal softmax of row t */
            float  *row = sc + t * S, best = -INFINITY, sum = 0;
            int64_t seen = m->pos + t + 1;
            for (int64_t s = 0; s < seen; s++)
                best = fmaxf(best, row[s]);
            for (int64_t s = 0; s < seen; s++) {
                row[s] = expf(row[s] - best);
                sum += row[s];
            }
            for (int64_t s = 0; s < seen; s++)
                row[s] /= sum;
            for (int64_t s = seen; s < S; s++)
                row[s] = 0;
        }
        if (T == 1)
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)S, (int)hd, 1.0f, v,
                        (int)kv_dim, sc, 1, 0.0f, out, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T,
                        (int)hd, (int)S, 1.0f, sc, (int)S, v, (int)kv_dim,
                        0.0f, out, (int)q_dim);
    }
}

static braid_status_t attention_block(braid_infer_model_t *m, int64_t l,
                                      int64_t T)
{
    const braid_infer_config_t *c  = m->cfg;
    const braid_infer_layer_t  *ly = &m->w->layer[l];
    int64_t                     H = c->hidden, hd = c->head_dim;
    int64_t                     q_dim = m->sp.q_dim, kv_dim = m->sp.kv_dim;
    for (int64_t t = 0; t < T; t++)
        rmsnorm(m->h + t * H, m->x + t * H, ly->ln1, H, c->rms_eps);
    if (T == 1) { /* one pass of the thread team for all three */
        float                 *y[3] = {m->q, m->k, m->v};
        const braid_eng_mat_t *W[3] = {&ly->wq, &ly->wk, &ly->wv};
        braid_eng_matvec(m->pool, 3, y, W, m->h);
    } else {
        linear(m, m->q, m->h, &ly->wq, T);
        linear(m, m->k, m->h, &ly->wk, T);
        linear(m, m->v, m->h, &ly->wv, T);
    }
    for (int64_t t = 0; t < T; t++) {
        const float *cs = m->rope + (m->pos + t) * hd;
        for (int64_t hh = 0; hh < m->sp.heads; hh++) {
            float *q = m->q + t * q_dim + hh * hd;
            rmsnorm(q, q, ly->qn, hd, c->rms_eps);
            rope(q, cs, hd);
        }
        for (int64_t hh = 0; hh < m->sp.kv_heads; hh++) {
            float *k = m->k + t * kv_dim + hh * hd;
            rmsnorm(k, k, ly->kn, hd, c->rms_eps);
            rope(k, cs, hd);
        }
    }
    size_t at = (size_t)((l * m->ctx + m->pos) * kv_dim);
    memcpy(m->kcache + at, m->k, (size_t)(T * kv_dim) * sizeof(float));
    memcpy(m->vcache + at, m->v, (size_t)(T * kv_dim) * sizeof(float));
    attention(m, l, T);
    linear(m, m->proj, m->att, &ly->wo, T);
    return add_reduced(m, T);
}

static braid_status_t mlp_block(braid_infer_model_t *m, int64_t l, int64_t T)
{
    const braid_infer_config_t *c  = m->cfg;
    const braid_infer_layer_t  *ly = &m->w->layer[l];
    int64_t                     H = c->hidden, n = T * m->sp.inter;
    for (int64_t t = 0; t < T; t++)
        rmsnorm(m->h + t * H, m->x + t * H, ly->ln2, H, c->rms_eps);
    if (T == 1) {
        float                 *y[2] = {m->g, m->u};
        const braid_eng_mat_t *W[2] = {&ly->wg, &ly->wu};
        braid_eng_matvec(m->pool, 2, y, W, m->h);
    } else {
        linear(m, m->g, m->h, &ly->wg, T);
        linear(m, m->u, m->h, &ly->wu, T);
    }
    for (int64_t i = 0; i < n; i++) /* SwiGLU: silu(gate) * up */
        m->g[i] = m->g[i] / (1.0f + expf(-m->g[i])) * m->u[i];
    linear(m, m->proj, m->g, &ly->wd, T);
    return add_reduced(m, T);
}

/* x[T, H] = the embedding rows of tokens: the owner of each row writes it,
 * the others zeros, and the sum is the row (adding zeros is exact). */
static braid_status_t embed(braid_infer_model_t *m, const int32_t *tokens,
                            int64_t T)
{
    const braid_infer_config_t *c  = m->cfg;
    const braid_eng_mat_t      *E  = &m->w->embed;
    int64_t                     H  = c->hidden;
    size_t                      es = braid_dtype_size(E->dtype);
    for (int64_t t = 0; t < T; t++) {
        int64_t id = tokens[t], row = id - m->sp.vocab0;
        if (row >= 0 && row < m->sp.vocab_n)
            braid_eng_convert(m->x + t * H, BRAID_F32,
                              (const char *)E->data + (size_t)(row * H) * es,
                              E->dtype, (size_t)H);
        else
            memset(m->x + t * H, 0, (size_t)H * sizeof(float));
    }
    return braid_infer_allreduce(m, m->x, (size_t)(T * H));
}

/* ---------------------------------------------------------------- forward */

/* The logits of tokens first .. T-1 of this call: rows of this rank's
 * vocab_n, [T - first, vocab_n]. */
static braid_status_t qwen_forward(braid_infer_model_t *m,
                                   const int32_t *tokens, int64_t T,
                                   int64_t first, float *logits)
{
    const braid_infer_config_t *c = m->cfg;
    braid_status_t              s = embed(m, tokens, T);
    for (int64_t l = 0; l < c->layers && s == BRAID_OK; l++) {
        s = attention_block(m, l, T);
        if (s == BRAID_OK)
            s = mlp_block(m, l, T);
    }
    if (s != BRAID_OK)
        return s;
    /* Final norm and this rank's vocabulary rows of the LM head. */
    int64_t H = c->hidden;
    for (int64_t t = first; t < T; t++)
        rmsnorm(m->h + (t - first) * H, m->x + t * H, m->w->norm, H,
                c->rms_eps);
    linear(m, logits, m->h, &m->w->head, T - first);
    return BRAID_OK;
}

braid_status_t braid_infer_forward(braid_infer_model_t *m,
                                   const int32_t *tokens, int64_t T,
                                   int all_logits, float *logits)
{
    const braid_infer_config_t *c = m->cfg;
    if (T < 1 || T > m->chunk)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "forward of %lld tokens: 1 to %lld at a time",
                              (long long)T, (long long)m->chunk);
    if (m->pos + T > m->ctx)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "position %lld is past the context of %lld "
                              "(--ctx)",
                              (long long)(m->pos + T), (long long)m->ctx);
    for (int64_t t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab)
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "token id %d is outside the vocabulary "
                                  "[0, %lld)",
                                  tokens[t], (long long)c->vocab);
    int64_t        first = all_logits ? 0 : T - 1, n = T - first;
    int64_t        vn = m->sp.vocab_n, vc = m->sp.vocab_chunk;
    braid_status_t s =
        c->arch == BRAID_INFER_GPT2
            ? braid_infer_gpt_forward(m, tokens, T, first, logits)
            : qwen_forward(m, tokens, T, first, logits);
    if (s != BRAID_OK)
        return s;
    m->pos += T;
    for (int64_t t = n - 1; t >= 0; t--) { /* rows of vn -> rows of vc */
        memmove(logits + t * vc, logits + t * vn, (size_t)vn * sizeof(float));
        for (int64_t i = vn; i < vc; i++)
            logits[t * vc + i] = -INFINITY;
    }
    return BRAID_OK;
}

braid_status_t braid_infer_gather_logits(braid_infer_model_t *m,
                                         const float *local, float *full)
{
    size_t n = (size_t)m->sp.vocab_chunk;
    if (m->sp.size == 1) {
        memcpy(full, local, n * sizeof(float));
        return BRAID_OK;
    }
    double         t0 = braid_eng_now();
    braid_status_t s  = braid_allgather(local, full, n, BRAID_F32, m->comm);
    m->stats.other_s += braid_eng_now() - t0;
    return s == BRAID_OK ? BRAID_OK
                         : braid_eng_fail_braid(s, "allgather of logits");
}

braid_status_t braid_infer_argmax(braid_infer_model_t *m, const float *local,
                                  int32_t *token)
{
    float mine[2] = {-INFINITY, 0};
    for (int64_t i = 0; i < m->sp.vocab_n; i++)
        if (local[i] > mine[0] || i == 0) {
            mine[0] = local[i];
            mine[1] = (float)(m->sp.vocab0 + i); /* exact: ids < 2^24 */
        }
    if (m->sp.size == 1) {
        *token = (int32_t)mine[1];
        return BRAID_OK;
    }
    float all[2 * 256],
        *best = m->sp.size <= 256
                    ? all
                    : malloc((size_t)m->sp.size * 2 * sizeof(float));
    if (!best)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    double         t0 = braid_eng_now();
    braid_status_t s  = braid_allgather(mine, best, 2, BRAID_F32, m->comm);
    m->stats.other_s += braid_eng_now() - t0;
    if (s == BRAID_OK) {
        int b = -1; /* ranks hold ascending ids: the first best wins ties */
        for (int r = 0; r < m->sp.size; r++)
            if (m->sp.vocab_chunk * r < m->cfg->vocab && /* holds rows */
                (b < 0 || best[2 * r] > best[2 * b]))
                b = r;
        *token = (int32_t)best[2 * b + 1];
    }
    if (best != all)
        free(best);
    return s == BRAID_OK ? BRAID_OK
                         : braid_eng_fail_braid(s, "allgather of the argmax");
}
