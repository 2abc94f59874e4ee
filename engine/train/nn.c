/* The layers of braid-train's GPT (see nn.h for the conventions). */
#include "nn.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/common/hot.h"

/* ----------------------------------------------------------------------------
 * the poll hook */

static braid_nn_poll_fn poll_fn;
static void            *poll_ctx;

void braid_nn_set_poll(braid_nn_poll_fn fn, void *ctx)
{
    poll_fn  = fn;
    poll_ctx = ctx;
}

static void poll(void)
{
    if (poll_fn != NULL)
        poll_fn(poll_ctx);
}

/* A backward matrix product is cut into row blocks of about this many
 * multiply-adds (a millisecond or so on one core), with a poll after each:
 * all-reduces then make progress that often.  The cut is the same whether
 * or not a hook is set, so that results never depend on it. */
#define POLL_MACS ((size_t)1 << 25)

static int rows_per_piece(int rows, size_t macs_per_row)
{
    size_t r = macs_per_row == 0 ? (size_t)rows : POLL_MACS / macs_per_row;
    if (r < 16)
        r = 16;
    return r > (size_t)rows ? rows : (int)r;
}

/* ----------------------------------------------------------------------------
 * exp and tanh that vectorise
 *
 * glibc's expf and tanhf are scalar calls (libmvec needs -ffast-math), and
 * GELU's tanh alone took a fifth of a training step.  This expf reduces
 * x = n ln2 + r (|r| <= ln2/2, ln2 in two parts so that r is exact enough),
 * takes e^r from its degree-6 Taylor polynomial (error below 2e-7
 * relative) and scales by 2^n through the exponent bits: plain arithmetic
 * that the compiler turns into vector code. */

static inline float exp_fast(float x)
{
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    /* n = round(x / ln2): adding 1.5 * 2^23 leaves no fraction bits */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693145751953125f; /* ln2, high bits: n*hi exact */
    r       = r - n * 1.42860682030941723212e-6f; /* ln2, low bits */
    float p =
        1.0f +
        r * (1.0f +
             r * (0.5f +
                  r * (1.0f / 6 + r * (1.0f / 24 +
                                       r * (1.0f / 120 + r * (1.0f / 720))))));
    /* Unsigned: n may be negative, and shifting a negative int is
     * undefined; the wrapped sum is the same bits. */
    union {
        float    f;
        uint32_t u;
    } u = {.f = p};
    u.u += (uint32_t)(int32_t)n << 23;
    return u.f;
}

/* tanh(u) = 1 - 2 / (e^2u + 1): exact limits +-1, absolute error ~1e-7
 * near 0 (where tanh(u) ~ u), which GELU's 0.5 x (1 + tanh) absorbs. */
static inline float tanh_fast(float u)
{
    return 1.0f - 2.0f / (exp_fast(2.0f * u) + 1.0f);
}

/* ----------------------------------------------------------------------------
 * The element-wise loops below are built once per x86-64 ISA level
 * (ENG_HOT: AVX-512, AVX2, baseline) and the loader picks one for this CPU.
 * Results may differ between levels (FMA contraction); that is allowed
 * here, where each rank's gradients are its own until the all-reduce.  The
 * optimizer, which must give the same parameters on every rank, is built
 * apart (adamw.c). */

/* ----------------------------------------------------------------------------
 * token and position embeddings */

ENG_HOT
void braid_nn_encoder_forward(float *out, const int *tokens, const float *wte,
                              const float *wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float       *out_bt = out + ((size_t)b * T + t) * C;
            const float *wte_ix = wte + (size_t)tokens[b * T + t] * C;
            const float *wpe_t  = wpe + (size_t)t * C;
            for (int i = 0; i < C; i++)
                out_bt[i] = wte_ix[i] + wpe_t[i];
        }
    }
}

ENG_HOT
void braid_nn_encoder_backward(float *dwte, float *dwpe, const float *dout,
                               const int *tokens, int B, int T, int C)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *dout_bt = dout + ((size_t)b * T + t) * C;
            float       *dwte_ix = dwte + (size_t)tokens[b * T + t] * C;
            float       *dwpe_t  = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                dwte_ix[i] += dout_bt[i];
                dwpe_t[i] += dout_bt[i];
            }
        }
    }
}

/* ----------------------------------------------------------------------------
 * layer normalisation */

#define LN_EPS 1e-5f

ENG_HOT
void braid_nn_layernorm_forward(float *out, float *mean, float *rstd,
                                const float *inp, const float *w,
                                const float *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float       *o = out + (size_t)n * C;
        float        m = 0.0f;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= C;
        float v = 0.0f;
        for (int i = 0; i < C; i++)
            v += (x[i] - m) * (x[i] - m);
        v /= C;
        float s = 1.0f / sqrtf(v + LN_EPS);
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * s * w[i] + b[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

ENG_HOT
void braid_nn_layernorm_backward(float *dinp, float *dw, float *db,
                                 const float *dout, const float *inp,
                                 const float *w, const float *mean,
                                 const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *dy = dout + (size_t)n * C;
        const float *x  = inp + (size_t)n * C;
        float       *dx = dinp + (size_t)n * C;
        float        m = mean[n], s = rstd[n];
        /* Two reductions first: the mean of dnorm and of dnorm * norm. */
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            float norm  = (x[i] - m) * s;
            float dnorm = w[i] * dy[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int i = 0; i < C; i++) {
            float norm  = (x[i] - m) * s;
            float dnorm = w[i] * dy[i];
            db[i] += dy[i];
            dw[i] += norm * dy[i];
            dx[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

/* ----------------------------------------------------------------------------
 * linear layers */

void braid_nn_matmul_forward(float *out, const float *inp, const float *w,
                             const float *b, int N, int C, int OC)
{
    float beta = 0.0f;
    if (b != NULL) {
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * OC, b, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp,
                C, w, C, beta, out, OC);
}

void braid_nn_matmul_backward(float *dinp, float *dw, float *db,
                              const float *dout, const float *inp,
                              const float *w, int N, int C, int OC)
{
    if (dinp != NULL) {
        /* dinp(N,C) = dout(N,OC) @ w(OC,C), a block of rows at a time */
        int step = rows_per_piece(N, (size_t)C * OC);
        for (int n0 = 0; n0 < N; n0 += step) {
            int rows = N - n0 < step ? N - n0 : step;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, C, OC,
                        1.0f, dout + (size_t)n0 * OC, OC, w, C, 0.0f,
                        dinp + (size_t)n0 * C, C);
            poll();
        }
    }
    /* dw(OC,C) += dout^T(OC,N) @ inp(N,C), a block of output rows at a time */
    int step = rows_per_piece(OC, (size_t)C * N);
    for (int o0 = 0; o0 < OC; o0 += step) {
        int rows = OC - o0 < step ? OC - o0 : step;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, C, N, 1.0f,
                    dout + o0, OC, inp, C, 1.0f, dw + (size_t)o0 * C, C);
        poll();
    }
    if (db != NULL) {
        for (int n = 0; n < N; n++) {
            const float *dy = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++)
                db[o] += dy[o];
        }
    }
}

/* ----------------------------------------------------------------------------
 * causal self-attention */

ENG_HOT
void braid_nn_attention_forward(float *out, float *att, const float *qkv,
                                int B, int T, int pos, int C, int NH)
{
    int   hs    = C / NH;
    int   ld    = 3 * C; /* q, k and v rows of one token are 3C apart */
    int   S     = pos + T;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *seq = qkv + (size_t)b * S * ld + (size_t)h * hs;
            const float *q   = seq + (size_t)pos * ld; /* the last T rows */
            const float *k   = seq + C;
            const float *v   = seq + 2 * C;
            float       *p   = att + ((size_t)b * NH + h) * T * S; /* (T,S) */
            /* scores(T,S) = q(T,hs) @ k(S,hs)^T * scale */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, S, hs,
                        scale, q, ld, k, ld, 0.0f, p, S);
            /* causal softmax: row t (position pos + t) sees keys 0..pos+t */
            for (int t = 0; t < T; t++) {
                float *row  = p + (size_t)t * S;
                int    last = pos + t;
                float  max  = row[0];
                for (int j = 1; j <= last; j++)
                    max = row[j] > max ? row[j] : max;
                for (int j = 0; j <= last; j++)
                    row[j] = exp_fast(row[j] - max); /* vectorised */
                float sum = 0.0f;
                for (int j = 0; j <= last; j++)
                    sum += row[j];
                float inv = 1.0f / sum;
                for (int j = 0; j <= last; j++)
                    row[j] *= inv;
                for (int j = last + 1; j < S; j++)
                    row[j] = 0.0f;
            }
            /* out(T,hs) = p(T,S) @ v(S,hs), into this head's columns */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, S,
                        1.0f, p, S, v, ld, 0.0f,
                        out + (size_t)b * T * C + (size_t)h * hs, C);
        }
    }
}

ENG_HOT
void braid_nn_attention_backward(float *dqkv, float *scratch,
                                 const float *dout, const float *qkv,
                                 const float *att, int B, int T, int C, int NH)
{
    int   hs    = C / NH;
    int   ld    = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t       off = (size_t)b * T * ld + (size_t)h * hs;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
            float       *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
            const float *p  = att + ((size_t)b * NH + h) * T * T;
            float       *ds = scratch; /* (T,T): dp, then dscores in place */
            /* dp(T,T) = dy(T,hs) @ v(T,hs)^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs,
                        1.0f, dy, C, v, ld, 0.0f, ds, T);
            /* dv(T,hs) = p^T(T,T) @ dy(T,hs) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T,
                        1.0f, p, T, dy, C, 0.0f, dv, ld);
            /* softmax backward: ds = p * (dp - sum_j p_j dp_j), row by row */
            for (int t = 0; t < T; t++) {
                const float *pr  = p + (size_t)t * T;
                float       *dr  = ds + (size_t)t * T;
                float        dot = 0.0f;
                for (int j = 0; j <= t; j++)
                    dot += pr[j] * dr[j];
                for (int j = 0; j <= t; j++)
                    dr[j] = pr[j] * (dr[j] - dot);
                for (int j = t + 1; j < T; j++)
                    dr[j] = 0.0f;
            }
            /* dq(T,hs) = ds @ k * scale;  dk(T,hs) = ds^T @ q * scale */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T,
                        scale, ds, T, k, ld, 0.0f, dq, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T,
                        scale, ds, T, q, ld, 0.0f, dk, ld);
            poll();
        }
    }
}

/* ----------------------------------------------------------------------------
 * GELU, residual */

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

ENG_HOT
void braid_nn_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K * (x + 0.044715f * x * x * x);
        out[i]  = 0.5f * x * (1.0f + tanh_fast(u));
    }
}

ENG_HOT
void braid_nn_gelu_backward(float *dinp, const float *inp, const float *dout,
                            size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x    = inp[i];
        float u    = GELU_K * (x + 0.044715f * x * x * x);
        float th   = tanh_fast(u);
        float du   = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        dinp[i]    = grad * dout[i];
    }
}

ENG_HOT
void braid_nn_residual_forward(float *out, const float *a, const float *b,
                               size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* ----------------------------------------------------------------------------
 * softmax and cross-entropy */

ENG_HOT
double braid_nn_crossentropy_forward(float *probs_logits, float *losses,
                                     const int *targets, int N, int V)
{
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        float *row = probs_logits + (size_t)n * V;
        float  max = row[0];
        for (int i = 1; i < V; i++)
            max = row[i] > max ? row[i] : max;
        float target_logit = row[targets[n]];
        for (int i = 0; i < V; i++)
            row[i] = exp_fast(row[i] - max); /* vectorised */
        float sum = 0.0f;
        for (int i = 0; i < V; i++)
            sum += row[i];
        float inv = 1.0f / sum;
        for (int i = 0; i < V; i++)
            row[i] *= inv;
        /* from the logits, not log(p): exact even where p underflows */
        losses[n] = logf(sum) - (target_logit - max);
        total += losses[n];
    }
    return total;
}

ENG_HOT
void braid_nn_crossentropy_backward(float *probs_dlogits, const int *targets,
                                    float dloss, int N, int V)
{
    for (int n = 0; n < N; n++) {
        float *row = probs_dlogits + (size_t)n * V;
        row[targets[n]] -= 1.0f;
        for (int i = 0; i < V; i++)
            row[i] *= dloss;
    }
}
