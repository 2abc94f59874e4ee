/* Finite-difference checks of braid-train's backward passes: every layer
 * on its own (encoder, layernorm, matmul, attention, GELU, softmax +
 * cross-entropy), then the whole tiny model tensor by tensor.
 *
 * Each layer check minimises f = sum(out * R) for a fixed random R, so the
 * backward pass is fed dout = R, and compares its gradients with central
 * differences (f(x + e d) - f(x - e d)) / 2e along two directions per input
 * (a random one and the analytic gradient itself: a gradient of the wrong
 * size or sign fails either) and at a few coordinates (the largest and some
 * random).  Everything runs in fp32, as training does; f is summed in
 * double.  With inputs of order 1 and e = 1e-2 the truncation error is
 * O(e^2) relative and the rounding error about 1e-7/e, so agreement to 1%
 * of the compared magnitude passes a correct pass comfortably, while a
 * wrong factor, sign or index misses by tens of percent or more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/err.h"
#include "gpt.h"
#include "nn.h"
#include "util.h"

static int             failures, checks;
static braid_eng_rng_t rng = {12345};

static uint64_t rand_u64(void) { return braid_eng_mix64(rng.state++); }

static float *randn(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale * braid_train_normal(&rng);
    return p;
}

static float *zeros(size_t n) { return calloc(n, sizeof(float)); }

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* |fd - an| <= tol * scale; scale: the magnitude the error is judged by. */
static void expect(const char *layer, const char *what, double fd, double an,
                   double scale, double tol)
{
    checks++;
    double err = fabs(fd - an);
    int    ok  = err <= tol * scale && isfinite(fd) && isfinite(an);
    if (!ok || getenv("TEST_GRAD_VERBOSE") != NULL)
        printf("%s %-6s %-22s fd %+.6e analytic %+.6e err %.2e (allowed "
               "%.2e)\n",
               ok ? "ok  " : "FAIL", layer, what, fd, an, err, tol * scale);
    failures += !ok;
}

typedef double (*eval_fn)(void *ctx);

/* Checks gradient g of f = eval(ctx) with respect to x (n floats). */
static void check_input(const char *layer, const char *name, float *x,
                        const float *g, size_t n, eval_fn eval, void *ctx,
                        float eps, double tol)
{
    float *d    = malloc(n * sizeof(float));
    float *x0   = malloc(n * sizeof(float));
    double gmax = 0, gnorm = sqrt(dot(g, g, n));
    size_t imax = 0;
    memcpy(x0, x, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        if (fabs(g[i]) > gmax) {
            gmax = fabs(g[i]);
            imax = i;
        }
    }
    char what[64];
    /* directions: random unit-variance, then the gradient scaled to max 1 */
    for (int dir = 0; dir < 2; dir++) {
        for (size_t i = 0; i < n; i++)
            d[i] = dir == 0 ? braid_train_normal(&rng)
                            : (gmax > 0 ? (float)(g[i] / gmax) : 0.0f);
        for (size_t i = 0; i < n; i++)
            x[i] = x0[i] + eps * d[i];
        double fp = eval(ctx);
        for (size_t i = 0; i < n; i++)
            x[i] = x0[i] - eps * d[i];
        double fm = eval(ctx);
        memcpy(x, x0, n * sizeof(float));
        double fd = (fp - fm) / (2.0 * eps), an = dot(g, d, n);
        /* Judged by the larger of the two values, and at least by |g||d|
         * /sqrt(n), the size g.d has for a random d: a value near zero by
         * chance leaves nothing to compare relative to. */
        double scale = fmax(fmax(fabs(fd), fabs(an)),
                            gnorm * sqrt(dot(d, d, n) / (double)n));
        snprintf(what, sizeof(what), "d%s %s", name,
                 dir == 0 ? "random dir" : "grad dir");
        expect(layer, what, fd, an, scale > 0 ? scale : 1e-6, tol);
    }
    /* coordinates: the largest and three random ones */
    for (int k = 0; k < 4; k++) {
        size_t i  = k == 0 ? imax : rand_u64() % n;
        x[i]      = x0[i] + eps;
        double fp = eval(ctx);
        x[i]      = x0[i] - eps;
        double fm = eval(ctx);
        x[i]      = x0[i];
        snprintf(what, sizeof(what), "d%s[%zu]", name, i);
        expect(layer, what, (fp - fm) / (2.0 * eps), g[i],
               gmax > 0 ? gmax : 1e-6, tol);
    }
    free(d);
    free(x0);
}

/* ----------------------------------------------------------------------------
 * layers */

typedef struct {
    int    B, T, C, NH, V, OC;
    int   *tokens;
    float *in, *w, *b, *out, *R, *aux1, *aux2;
    size_t nout;
} layer_t;

static double objective(const layer_t *s)
{
    return dot(s->out, s->R, s->nout);
}

static double eval_encoder(void *ctx)
{
    layer_t *s = ctx;
    braid_nn_encoder_forward(s->out, s->tokens, s->w, s->b, s->B, s->T, s->C);
    return objective(s);
}

static void test_encoder(void)
{
    layer_t s = {.B = 2, .T = 5, .C = 8, .V = 7};
    size_t  N = (size_t)s.B * s.T;
    s.tokens  = malloc(N * sizeof(int));
    for (size_t i = 0; i < N; i++)
        s.tokens[i] = (int)(rand_u64() % 4); /* repeats */
    s.w       = randn((size_t)s.V * s.C, 1);
    s.b       = randn((size_t)s.T * s.C, 1);
    s.nout    = N * s.C;
    s.out     = zeros(s.nout);
    s.R       = randn(s.nout, 1);
    float *dw = zeros((size_t)s.V * s.C), *db = zeros((size_t)s.T * s.C);
    braid_nn_encoder_backward(dw, db, s.R, s.tokens, s.B, s.T, s.C);
    check_input("encode", "wte", s.w, dw, (size_t)s.V * s.C, eval_encoder, &s,
                1e-2f, 1e-2);
    check_input("encode", "wpe", s.b, db, (size_t)s.T * s.C, eval_encoder, &s,
                1e-2f, 1e-2);
    free(dw), free(db), free(s.tokens), free(s.w), free(s.b), free(s.out);
    free(s.R);
}

static double eval_layernorm(void *ctx)
{
    layer_t *s = ctx;
    braid_nn_layernorm_forward(s->out, s->aux1, s->aux2, s->in, s->w, s->b,
                               s->B * s->T, s->C);
    return objective(s);
}

static void test_layernorm(void)
{
    layer_t s = {.B = 2, .T = 3, .C = 16};
    size_t  N = (size_t)s.B * s.T, n = N * s.C;
    s.in   = randn(n, 1);
    s.w    = randn((size_t)s.C, 1);
    s.b    = randn((size_t)s.C, 1);
    s.aux1 = zeros(N), s.aux2 = zeros(N);
    s.nout = n, s.out = zeros(n), s.R = randn(n, 1);
    float *din = zeros(n), *dw = zeros((size_t)s.C), *db = zeros((size_t)s.C);
    eval_layernorm(&s);
    braid_nn_layernorm_backward(din, dw, db, s.R, s.in, s.w, s.aux1, s.aux2,
                                (int)N, s.C);
    check_input("lnorm", "inp", s.in, din, n, eval_layernorm, &s, 1e-2f, 1e-2);
    check_input("lnorm", "w", s.w, dw, (size_t)s.C, eval_layernorm, &s, 1e-2f,
                1e-2);
    check_input("lnorm", "b", s.b, db, (size_t)s.C, eval_layernorm, &s, 1e-2f,
                1e-2);
    free(din), free(dw), free(db), free(s.in), free(s.w), free(s.b);
    free(s.aux1), free(s.aux2), free(s.out), free(s.R);
}

static double eval_matmul(void *ctx)
{
    layer_t *s = ctx;
    braid_nn_matmul_forward(s->out, s->in, s->w, s->b, s->B * s->T, s->C,
                            s->OC);
    return objective(s);
}

/* N x C -> OC; the large case is cut into several pieces by the backward
 * pass (see POLL_MACS in nn.c), so piece boundaries are checked too. */
static void test_matmul(int N, int C, int OC, int with_bias)
{
    layer_t s   = {.B = 1, .T = N, .C = C, .OC = OC};
    size_t  nin = (size_t)N * C, nw = (size_t)OC * C;
    s.in   = randn(nin, 1);
    s.w    = randn(nw, 1.0f / sqrtf((float)C));
    s.b    = with_bias ? randn((size_t)OC, 1) : NULL;
    s.nout = (size_t)N * OC, s.out = zeros(s.nout), s.R = randn(s.nout, 1);
    float *din = randn(nin, 1); /* garbage: dinp must be overwritten */
    float *dw = zeros(nw), *db = with_bias ? zeros((size_t)OC) : NULL;
    braid_nn_matmul_backward(din, dw, db, s.R, s.in, s.w, N, C, OC);
    check_input("matmul", "inp", s.in, din, nin, eval_matmul, &s, 1e-2f, 1e-2);
    check_input("matmul", "w", s.w, dw, nw, eval_matmul, &s, 1e-2f, 1e-2);
    if (with_bias)
        check_input("matmul", "b", s.b, db, (size_t)OC, eval_matmul, &s, 1e-2f,
                    1e-2);
    free(din), free(dw), free(db), free(s.in), free(s.w), free(s.b);
    free(s.out), free(s.R);
}

static double eval_attention(void *ctx)
{
    layer_t *s = ctx;
    braid_nn_attention_forward(s->out, s->aux1, s->in, s->B, s->T, 0, s->C,
                               s->NH);
    return objective(s);
}

static void test_attention(void)
{
    layer_t s = {.B = 2, .T = 7, .C = 12, .NH = 3};
    size_t  N = (size_t)s.B * s.T, nin = N * 3 * s.C;
    s.in   = randn(nin, 1);
    s.aux1 = zeros((size_t)s.B * s.NH * s.T * s.T);
    s.nout = N * s.C, s.out = zeros(s.nout), s.R = randn(s.nout, 1);
    float *din = randn(nin, 1), *scratch = zeros((size_t)s.T * s.T);
    eval_attention(&s);
    braid_nn_attention_backward(din, scratch, s.R, s.in, s.aux1, s.B, s.T, s.C,
                                s.NH);
    check_input("attn", "qkv", s.in, din, nin, eval_attention, &s, 1e-2f,
                1e-2);
    /* causality: the first token's output ignores every later token */
    float *o0 = malloc((size_t)s.C * sizeof(float));
    memcpy(o0, s.out, (size_t)s.C * sizeof(float));
    for (size_t i = 3 * (size_t)s.C; i < (size_t)s.T * 3 * s.C; i++)
        s.in[i] += 1.0f;
    eval_attention(&s);
    expect("attn", "causal (token 0)", memcmp(o0, s.out, s.C * sizeof(float)),
           0, 1, 0);
    free(o0), free(din), free(scratch), free(s.in), free(s.aux1);
    free(s.out), free(s.R);
}

static double eval_gelu(void *ctx)
{
    layer_t *s = ctx;
    braid_nn_gelu_forward(s->out, s->in, s->nout);
    return objective(s);
}

static void test_gelu(void)
{
    layer_t s = {.nout = 64};
    s.in = randn(s.nout, 2), s.out = zeros(s.nout), s.R = randn(s.nout, 1);
    float *din = zeros(s.nout);
    braid_nn_gelu_backward(din, s.in, s.R, s.nout);
    check_input("gelu", "inp", s.in, din, s.nout, eval_gelu, &s, 1e-2f, 1e-2);
    free(din), free(s.in), free(s.out), free(s.R);
}

static double eval_xent(void *ctx)
{
    layer_t *s = ctx;
    size_t   n = (size_t)s->T * s->V;
    memcpy(s->out, s->in, n * sizeof(float));
    return braid_nn_crossentropy_forward(s->out, s->aux1, s->tokens, s->T,
                                         s->V);
}

static void test_xent(void)
{
    layer_t s = {.T = 6, .V = 11};
    size_t  n = (size_t)s.T * s.V;
    s.in = randn(n, 2), s.out = zeros(n), s.aux1 = zeros((size_t)s.T);
    s.tokens = malloc((size_t)s.T * sizeof(int));
    for (int i = 0; i < s.T; i++)
        s.tokens[i] = (int)(rand_u64() % (uint64_t)s.V);
    eval_xent(&s);
    float *d = malloc(n * sizeof(float));
    memcpy(d, s.out, n * sizeof(float));
    braid_nn_crossentropy_backward(d, s.tokens, 1.0f, s.T, s.V);
    check_input("xent", "logits", s.in, d, n, eval_xent, &s, 1e-2f, 1e-2);
    free(d), free(s.in), free(s.out), free(s.aux1), free(s.tokens);
}

/* ----------------------------------------------------------------------------
 * the whole model */

typedef struct {
    braid_gpt_t *m;
    int         *in, *tg;
} model_ctx_t;

static double eval_model(void *ctx)
{
    model_ctx_t *c = ctx;
    braid_gpt_forward(c->m, c->in, c->tg);
    double s = 0; /* the mean loss, summed in double */
    for (int i = 0; i < c->m->B * c->m->T; i++)
        s += c->m->acts.losses[i];
    return s / (c->m->B * c->m->T);
}

static void test_model(void)
{
    braid_gpt_config_t cfg;
    braid_gpt_t       *m;
    if (braid_gpt_config_preset(&cfg, "tiny") != BRAID_OK ||
        braid_gpt_create(&m, &cfg, 2, 16) != BRAID_OK) {
        printf("FAIL model: %s\n", braid_eng_error());
        failures++;
        return;
    }
    expect("model", "nparams formula", (double)braid_gpt_nparams(&cfg),
           (double)m->nparams, 1, 0);
    braid_gpt_init_weights(m, 7);
    /* larger weights than GPT-2's init so that every path carries signal */
    for (size_t i = 0; i < m->nparams; i++)
        m->params[i] *= 2.0f;
    size_t      N = (size_t)m->B * m->T;
    model_ctx_t c = {m, malloc(N * sizeof(int)), malloc(N * sizeof(int))};
    for (size_t i = 0; i < N; i++) {
        c.in[i] = (int)(rand_u64() % 256);
        c.tg[i] = (int)(rand_u64() % 256);
    }
    braid_gpt_zero_grad(m);
    braid_gpt_forward(m, c.in, c.tg);
    braid_gpt_backward(m, 1.0f / (float)N, NULL, NULL);
    for (int t = 0; t < m->ntensors; t++) {
        const braid_gpt_tensor_t *tn = &m->tensors[t];
        /* the loss is an average: steps of 1e-2 on weights of ~0.1 are
         * still small, and the float loss of 32 tokens resolves them */
        check_input("model", tn->name + 12, m->params + tn->offset,
                    m->grads + tn->offset, tn->numel, eval_model, &c, 1e-3f,
                    2e-2);
    }
    free(c.in), free(c.tg);
    braid_gpt_free(m);
}

int main(void)
{
    test_encoder();
    test_layernorm();
    test_matmul(5, 8, 6, 1);
    test_matmul(5, 8, 6, 0);
    test_matmul(48, 256, 4096, 1); /* several pieces both ways */
    test_attention();
    test_gelu();
    test_xent();
    test_model();
    printf("%d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
