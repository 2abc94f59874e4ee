/* Tensor-parallel braid-infer against one rank, run under braidrun -n N.
 *
 * Every rank builds the model twice from the same seed: split over all N
 * ranks of the world communicator, and whole over a communicator of its own
 * (braid_comm_split by rank).  Both prefill a prompt (in chunks, so the KV
 * cache is appended to across calls) and decode greedily; the gathered
 * logits of every position must agree within TOL, the greedy tokens must be
 * the same, and the N-rank logits must be bitwise identical on all ranks.
 *
 * TOL: both runs compute in f32 from the same weights and differ only in
 * how sums are associated: a row-parallel product adds N partial dot
 * products through the all-reduce instead of one long one, and token-by-
 * token decode uses the matvec kernel where prefill uses sgemm.  A dot
 * product of length K <= 128 summed in another order moves by about
 * sqrt(K) * 2^-24 (7e-7) of its terms' magnitudes (K * 2^-24 = 8e-6 if
 * every rounding went the same way); the model chains 2L + 1 <= 7 such
 * products with unit-gain norms between them, which puts the expected
 * difference at a few 1e-6 of the logits' scale (measured: 5e-7).
 * TOL = 1e-5 * max|logit| + 1e-6.  The greedy check means something only if
 * the top two logits are further apart than that: the test requires a gap
 * of 10 * TOL (printed: "smallest top-2 gap"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

#include "engine/common/err.h"
#include "engine/common/linalg.h"
#include "engine/common/util.h"
#include "engine/infer/config.h"
#include "engine/infer/model.h"
#include "engine/infer/weights.h"
#include "tests/unit/check.h"

#define TOL_REL 1e-5

typedef struct {
    braid_infer_split_t   sp;
    braid_infer_weights_t w;
    braid_infer_model_t   m;
    float                *local, *full; /* [chunk, vocab_chunk], [P+G, V] */
} run_t;

static int rank, size;

static int setup(run_t *r, const braid_infer_config_t *c, braid_comm_t *comm,
                 braid_dtype_t dtype, int64_t ctx, int64_t chunk)
{
    memset(r, 0, sizeof(*r));
    int rk = braid_comm_rank(comm), sz = braid_comm_size(comm);
    if (braid_infer_split(&r->sp, c, rk, sz) != BRAID_OK ||
        braid_infer_weights_generate(&r->w, c, &r->sp, 7, dtype) != BRAID_OK ||
        braid_infer_model_init(&r->m, c, &r->sp, &r->w, comm, NULL, ctx,
                               chunk) != BRAID_OK) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, braid_eng_error());
        return -1;
    }
    r->local = malloc((size_t)(chunk * r->sp.vocab_chunk) * sizeof(float));
    r->full  = calloc((size_t)(ctx * sz * r->sp.vocab_chunk), sizeof(float));
    return r->local && r->full ? 0 : -1;
}

static void teardown(run_t *r, const braid_infer_config_t *c)
{
    braid_infer_model_free(&r->m);
    braid_infer_weights_free(&r->w, c);
    free(r->local);
    free(r->full);
}

/* Prompt in chunks of `step` tokens, every position's logits gathered into
 * full rows [pos][V]; then `gen` greedy tokens one at a time into ids[]. */
static int run_seq(run_t *r, const braid_infer_config_t *c,
                   const int32_t *prompt, int64_t P, int64_t step, int64_t gen,
                   int32_t *ids)
{
    int64_t vc = r->sp.vocab_chunk, row = r->sp.size * vc;
    braid_infer_model_reset(&r->m);
    for (int64_t at = 0; at < P; at += step) {
        int64_t n = P - at < step ? P - at : step;
        if (braid_infer_forward(&r->m, prompt + at, n, 1, r->local) !=
            BRAID_OK)
            return -1;
        for (int64_t i = 0; i < n; i++)
            if (braid_infer_gather_logits(&r->m, r->local + i * vc,
                                          r->full + (at + i) * row) !=
                BRAID_OK)
                return -1;
    }
    int32_t next;
    if (braid_infer_argmax(&r->m,
                           r->local + (P - 1 - (P - 1) / step * step) * vc,
                           &next) != BRAID_OK)
        return -1;
    for (int64_t g = 0; g < gen; g++) {
        ids[g] = next;
        if (braid_infer_forward(&r->m, &next, 1, 0, r->local) != BRAID_OK ||
            braid_infer_gather_logits(&r->m, r->local,
                                      r->full + (P + g) * row) != BRAID_OK ||
            braid_infer_argmax(&r->m, r->local, &next) != BRAID_OK)
            return -1;
    }
    (void)c;
    return 0;
}

/* max |a - b| over rows x V, with the scale max |b|. */
static void compare(const run_t *a, const run_t *b, int64_t rows, int64_t V,
                    double *diff, double *scale, double *gap)
{
    *diff = 0, *scale = 0, *gap = INFINITY;
    int64_t ra = a->sp.size * a->sp.vocab_chunk,
            rb = b->sp.size * b->sp.vocab_chunk;
    for (int64_t p = 0; p < rows; p++) {
        float top1 = -INFINITY, top2 = -INFINITY;
        for (int64_t i = 0; i < V; i++) {
            float x = a->full[p * ra + i], y = b->full[p * rb + i];
            *diff  = fmax(*diff, fabs((double)x - y));
            *scale = fmax(*scale, fabs((double)y));
            if (y > top1)
                top2 = top1, top1 = y;
            else if (y > top2)
                top2 = y;
        }
        *gap = fmin(*gap, (double)top1 - top2);
    }
}

static void check_case(const char *name, braid_infer_config_t *c,
                       braid_dtype_t dtype, braid_comm_t *world,
                       braid_comm_t *self)
{
    enum { P = 11, G = 8 };
    int32_t prompt[P], ids_tp[G], ids_one[G], ids_step[G];
    for (int i = 0; i < P; i++)
        prompt[i] =
            (int32_t)(braid_eng_mix64((uint64_t)i + 99) % (uint64_t)c->vocab);
    run_t tp, one, step1;
    if (setup(&tp, c, world, dtype, P + G, 4) ||
        setup(&one, c, self, dtype, P + G, 16) ||
        setup(&step1, c, self, dtype, P + G, 1)) {
        CHECK(0, "%s: setup failed", name);
        return;
    }
    /* tp: prefill in chunks of 4 (4 + 4 + 3); one: all at once; step1: one
     * token at a time (the decode path for the prompt too). */
    CHECK(run_seq(&tp, c, prompt, P, 4, G, ids_tp) == 0, "%s: %d ranks: %s",
          name, size, braid_eng_error());
    CHECK(run_seq(&one, c, prompt, P, 16, G, ids_one) == 0, "%s: 1 rank: %s",
          name, braid_eng_error());
    CHECK(run_seq(&step1, c, prompt, P, 1, G, ids_step) == 0, "%s: steps: %s",
          name, braid_eng_error());

    double diff, scale, gap, diff_s, scale_s, gap_s;
    compare(&tp, &one, P + G, c->vocab, &diff, &scale, &gap);
    compare(&step1, &one, P + G, c->vocab, &diff_s, &scale_s, &gap_s);
    double tol = TOL_REL * scale + 1e-6;
    CHECK(diff <= tol,
          "%s: %d-rank logits differ from 1 rank by %.3g "
          "(scale %.3g, tolerance %.3g)",
          name, size, diff, scale, tol);
    CHECK(diff_s <= tol,
          "%s: token-by-token logits differ from prefill by "
          "%.3g (tolerance %.3g)",
          name, diff_s, tol);
    CHECK(memcmp(ids_tp, ids_one, sizeof(ids_tp)) == 0,
          "%s: greedy tokens differ between %d ranks and 1", name, size);
    CHECK(memcmp(ids_step, ids_one, sizeof(ids_step)) == 0,
          "%s: greedy tokens differ between decode and prefill paths", name);
    CHECK(gap > 10 * tol,
          "%s: top-2 gap %.3g too close to the tolerance "
          "for the greedy check to mean anything",
          name, gap);

    /* Bitwise identical on every rank: compare hashes of the N-rank run. */
    int64_t              row = tp.sp.size * tp.sp.vocab_chunk;
    uint64_t             h   = 0xcbf29ce484222325ull;
    const unsigned char *b   = (const unsigned char *)tp.full;
    for (size_t i = 0; i < (size_t)((P + G) * row) * sizeof(float); i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    int64_t mine = (int64_t)h, *all = malloc((size_t)size * sizeof(int64_t));
    CHECK(braid_allgather(&mine, all, 1, BRAID_I64, world) == BRAID_OK,
          "allgather");
    int same = 1;
    for (int i = 0; i < size; i++)
        same &= all[i] == mine;
    CHECK(same, "%s: logits are not bitwise identical on all ranks", name);
    free(all);
    if (rank == 0)
        printf("%s (%s): %d ranks vs 1: max diff %.3g, scale %.3g, "
               "tolerance %.3g; decode vs prefill %.3g; smallest top-2 gap "
               "%.3g; tokens %d %d %d ...\n",
               name, braid_dtype_name(dtype), size, diff, scale, tol, diff_s,
               gap, ids_tp[0], ids_tp[1], ids_tp[2]);
    teardown(&tp, c);
    teardown(&one, c);
    teardown(&step1, c);
}

/* Equal maxima on every rank: the lowest id wins, the same on all ranks. */
static void check_argmax_ties(const braid_infer_config_t *c,
                              braid_comm_t               *world)
{
    braid_infer_split_t sp;
    braid_infer_model_t m;
    memset(&m, 0, sizeof(m));
    if (braid_infer_split(&sp, c, rank, size) != BRAID_OK)
        return;
    m.cfg = c, m.sp = sp, m.comm = world;
    float *local = malloc((size_t)sp.vocab_chunk * sizeof(float));
    for (int64_t i = 0; i < sp.vocab_chunk; i++)
        local[i] = -1;
    local[sp.vocab_n - 1] = 5;
    local[3]              = 5;
    int32_t token         = -1;
    CHECK(braid_infer_argmax(&m, local, &token) == BRAID_OK && token == 3,
          "argmax of ties: %d, expected 3", token);
    free(local);
}

int main(void)
{
    braid_comm_t *world, *self;
    if (braid_init(&world) != BRAID_OK) {
        fprintf(stderr, "braid_init: %s\n", braid_last_error());
        return 1;
    }
    rank = braid_comm_rank(world);
    size = braid_comm_size(world);
    if (braid_comm_split(world, rank, 0, &self) != BRAID_OK) {
        fprintf(stderr, "braid_comm_split: %s\n", braid_last_error());
        return 1;
    }
    braid_eng_blas_threads(1);

    braid_infer_config_t tiny, wide;
    braid_infer_config_preset(&tiny, "tiny");
    /* tied, 8 query / 4 kv heads, a vocabulary that splits unevenly over
     * 3 and 4 ranks */
    wide = tiny;
    snprintf(wide.name, sizeof(wide.name), "tiny-tied-v301");
    wide.heads = 8, wide.kv_heads = 4, wide.head_dim = 8, wide.inter = 96;
    wide.vocab = 301, wide.tied = 1, wide.layers = 3;
    braid_infer_split_t sp;
    if (braid_infer_split(&sp, &tiny, rank, size) == BRAID_OK) {
        check_case("tiny", &tiny, BRAID_F32, world, self);
        check_case("tiny", &tiny, BRAID_BF16, world, self);
    } else {
        /* the refusal names the dimension and the rank counts that work */
        CHECK(strstr(braid_eng_error(),
                     "num_key_value_heads 2 is not divisible") &&
                  strstr(braid_eng_error(), "1, 2"),
              "refusal: %s", braid_eng_error());
    }
    if (braid_infer_split(&sp, &wide, rank, size) == BRAID_OK)
        check_case("tiny-tied-v301", &wide, BRAID_F16, world, self);
    check_argmax_ties(&tiny, world);
    braid_finalize(self);
    braid_finalize(world);
    char name[32];
    snprintf(name, sizeof(name), "engine-tp rank %d", rank);
    return check_summary(name);
}
