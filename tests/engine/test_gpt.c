/* braid-infer on a checkpoint braid-train wrote, against braid-train's own
 * forward pass; run under braidrun -n N with the checkpoint's directory.
 *
 * Every rank loads its tensor-parallel share through braid-infer's GPT-2
 * path, prefills a byte prompt in chunks of 4 (so the KV cache is appended
 * to across calls) and decodes greedily, one token at a time; it does so
 * twice.  The reference is braid-train's model loaded whole from the same
 * directory (braid_train_ckpt_load) and run once over the prompt and the
 * generated tokens (braid_gpt_forward without targets: probabilities).
 * Causality makes its row t the prediction after token t, which is what
 * braid-infer computed at that position.  Checked:
 *   - braid-infer's log-probabilities (log-softmax of its gathered logits,
 *     in double) match the log of braid-train's probabilities at every
 *     prompt position and decode step, for every token, within TOL;
 *   - each greedy token is the argmax of braid-train's row wherever its top
 *     two log-probabilities are further apart than 2 TOL (the test requires
 *     that of most of them);
 *   - the second run gives the same tokens and bitwise the same logits
 *     (greedy generation is deterministic), and the logits are bitwise the
 *     same on all ranks.
 * With a rank count that does not divide n_head, the refusal is checked.
 *
 * TOL: both sides run the same layers in f32 (braid_gpt_block_forward);
 * they differ in how sums are associated: sgemm over 4 rows or 1 (decode)
 * instead of all T, N partial products added by the all-reduce, the LM head
 * over vocabulary blocks.  A dot product of length K <= 4C = 256 moves by
 * about sqrt(K) 2^-24 = 1e-6 of its terms' magnitude; chained through
 * 2L + 1 = 5 products with unit-gain LayerNorms between them, the logits
 * and so the log-probabilities move by a few 1e-6 of the logits' scale s =
 * max|logit|.  TOL = 1e-5 s + 1e-6, as engine-tp's; braid-train's float
 * probabilities carry a relative error of a few 2^-24 (1e-7 in the log).
 * Measured: 9e-6 at s = 10 (TOL = 1e-4) on 1, 2 and 4 ranks.  A wrong split (a
 * head's q from another rank, a bias added twice, a position off by one in the
 * cache) moves them by 1e-2 and more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

#include "engine/common/err.h"
#include "engine/common/linalg.h"
#include "engine/common/safetensors.h"
#include "engine/common/util.h"
#include "engine/infer/config.h"
#include "engine/infer/gpt.h"
#include "engine/infer/model.h"
#include "engine/train/ckpt.h"
#include "tests/unit/check.h"

#define TOL_REL 1e-5

enum { CHUNK = 4, G = 12 };
static const char prompt_text[] = "the quick brown";

static int rank, size;

/* Prefill in chunks, then G greedy tokens: ids[G], log-probabilities of
 * every position full[P + G][V] (log-softmax in double of the gathered
 * logits), and the gathered logits raw[P + G][size * vocab_chunk]. */
static int run(braid_infer_model_t *m, const int32_t *prompt, int64_t P,
               int32_t *ids, double *full, float *raw)
{
    int64_t vc = m->sp.vocab_chunk, row = m->sp.size * vc, V = m->cfg->vocab;
    float  *local = malloc((size_t)(CHUNK * vc) * sizeof(float));
    int32_t next  = 0;
    int     bad   = !local;
    braid_infer_model_reset(m);
    for (int64_t at = 0; at < P + G && !bad; at++) {
        /* a chunk of prompt, or the last token chosen */
        int64_t        n  = at < P ? (P - at < CHUNK ? P - at : CHUNK) : 1;
        const int32_t *in = at < P ? prompt + at : &next;
        if (at >= P)
            ids[at - P] = next;
        bad = braid_infer_forward(m, in, n, 1, local) != BRAID_OK;
        for (int64_t i = 0; i < n && !bad; i++)
            bad = braid_infer_gather_logits(m, local + i * vc,
                                            raw + (at + i) * row) != BRAID_OK;
        if (!bad)
            bad =
                braid_infer_argmax(m, local + (n - 1) * vc, &next) != BRAID_OK;
        for (int64_t i = 0; i < n && !bad; i++) {
            const float *x   = raw + (at + i) * row;
            double       top = -INFINITY, sum = 0;
            for (int64_t v = 0; v < V; v++)
                top = fmax(top, x[v]);
            for (int64_t v = 0; v < V; v++)
                sum += exp((double)x[v] - top);
            for (int64_t v = 0; v < V; v++)
                full[(at + i) * V + v] = (double)x[v] - top - log(sum);
        }
        at += n - 1;
    }
    free(local);
    return bad ? -1 : 0;
}

/* braid-train's probabilities over seq[T]: probs[T][V]. */
static int reference(const char *dir, const int *seq, int T, float *probs)
{
    braid_gpt_config_t gc;
    braid_gpt_t       *gm = NULL;
    if (braid_train_ckpt_config(&gc, dir) != BRAID_OK ||
        braid_gpt_create(&gm, &gc, 1, T) != BRAID_OK ||
        braid_train_ckpt_load(gm, NULL, NULL, dir) != BRAID_OK) {
        fprintf(stderr, "rank %d: reference: %s\n", rank, braid_eng_error());
        braid_gpt_free(gm);
        return -1;
    }
    braid_gpt_forward(gm, seq, NULL);
    memcpy(probs, gm->acts.probs, (size_t)T * gc.vocab_size * sizeof(float));
    braid_gpt_free(gm);
    return 0;
}

static uint64_t fingerprint(const void *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}

static void check_model(const char *dir, const braid_infer_config_t *c,
                        const braid_infer_split_t *sp, braid_comm_t *world)
{
    int64_t P = (int64_t)strlen(prompt_text), V = c->vocab, T = P + G;
    int64_t row = sp->size * sp->vocab_chunk;
    int32_t prompt[sizeof(prompt_text)], ids[G], ids2[G];
    for (int64_t i = 0; i < P; i++)
        prompt[i] = (unsigned char)prompt_text[i];
    braid_infer_weights_t w;
    braid_infer_model_t   m;
    braid_eng_st_t       *st = NULL;
    memset(&m, 0, sizeof(m));
    int ok = braid_eng_st_open(&st, dir) == BRAID_OK &&
             braid_infer_gpt_load(&w, c, sp, st) == BRAID_OK &&
             braid_infer_model_init(&m, c, sp, &w, world, NULL, T, CHUNK) ==
                 BRAID_OK;
    if (st)
        braid_eng_st_close(st);
    CHECK(ok, "loading %s: %s", dir, braid_eng_error());
    if (!ok)
        return;
    double *full  = malloc((size_t)(T * V) * sizeof(double));
    double *full2 = malloc((size_t)(T * V) * sizeof(double));
    float  *raw   = calloc((size_t)(T * row), sizeof(float));
    float  *raw2  = calloc((size_t)(T * row), sizeof(float));
    float  *probs = malloc((size_t)(T * V) * sizeof(float));
    int    *seq   = malloc((size_t)T * sizeof(int));
    CHECK(run(&m, prompt, P, ids, full, raw) == 0, "run: %s",
          braid_eng_error());
    CHECK(run(&m, prompt, P, ids2, full2, raw2) == 0, "rerun: %s",
          braid_eng_error());
    CHECK(memcmp(ids, ids2, sizeof(ids)) == 0 &&
              memcmp(raw, raw2, (size_t)(T * row) * sizeof(float)) == 0,
          "greedy generation is not deterministic: a second run differs");

    for (int64_t i = 0; i < T; i++)
        seq[i] = i < P ? prompt[i] : ids[i - P];
    CHECK(reference(dir, seq, (int)T, probs) == 0, "braid-train's forward");
    double diff = 0, scale = 0;
    int    decided = 0, agree = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t v = 0; v < V; v++)
            scale = fmax(scale, fabs((double)raw[t * row + v]));
    double tol = TOL_REL * scale + 1e-6;
    for (int64_t t = 0; t < T; t++) {
        double  top1 = -INFINITY, top2 = -INFINITY;
        int64_t best = 0;
        for (int64_t v = 0; v < V; v++) {
            double lp = log((double)probs[t * V + v]); /* -inf: underflow */
            if (lp > -80) /* where f32 keeps p's relative precision */
                diff = fmax(diff, fabs(full[t * V + v] - lp));
            if (lp > top1)
                top2 = top1, top1 = lp, best = v;
            else if (lp > top2)
                top2 = lp;
        }
        /* the token chosen after position t: ids[t - P + 1] */
        if (t >= P - 1 && t < T - 1 && top1 - top2 > 2 * tol) {
            decided++;
            agree += ids[t - P + 1] == best;
        }
    }
    CHECK(diff <= tol,
          "%d ranks: log-probabilities differ from braid-train's "
          "by %.3g (logit scale %.3g, tolerance %.3g)",
          size, diff, scale, tol);
    CHECK(agree == decided && decided >= G / 2,
          "%d ranks: %d of %d greedy "
          "tokens are braid-train's argmax (%d clear-cut of %d)",
          size, agree, decided, decided, G);

    /* bitwise the same logits on every rank */
    int64_t mine =
        (int64_t)fingerprint(raw, (size_t)(T * row) * sizeof(float));
    int64_t *all = malloc((size_t)size * sizeof(int64_t));
    CHECK(braid_allgather(&mine, all, 1, BRAID_I64, world) == BRAID_OK,
          "allgather");
    int same = 1;
    for (int i = 0; i < size; i++)
        same &= all[i] == mine;
    CHECK(same, "logits are not bitwise identical on all ranks");
    if (rank == 0)
        printf("gpt2 %s: %d ranks: largest log-probability difference from "
               "braid-train %.3g (logit scale %.3g, tolerance %.3g); %d of %d "
               "clear-cut greedy tokens agree; ids %d %d %d ...\n",
               dir, size, diff, scale, tol, agree, decided, ids[0], ids[1],
               ids[2]);
    free(all), free(full), free(full2), free(raw), free(raw2), free(probs),
        free(seq);
    braid_infer_model_free(&m);
    braid_infer_weights_free(&w, c);
}

int main(int argc, char **argv)
{
    braid_comm_t *world;
    if (argc != 2) {
        fprintf(stderr,
                "usage: test_gpt CHECKPOINT_DIR (braid-train --save)\n");
        return 2;
    }
    if (braid_init(&world) != BRAID_OK) {
        fprintf(stderr, "braid_init: %s\n", braid_last_error());
        return 1;
    }
    rank = braid_comm_rank(world);
    size = braid_comm_size(world);
    braid_eng_blas_threads(1);

    char                 path[4096];
    braid_infer_config_t c;
    braid_infer_split_t  sp;
    int ok = braid_eng_path_join(path, sizeof(path), argv[1], "config.json") ==
                 BRAID_OK &&
             braid_infer_config_load(&c, path) == BRAID_OK;
    CHECK(ok, "config: %s", braid_eng_error());
    CHECK(!ok || c.arch == BRAID_INFER_GPT2, "%s is not read as a GPT-2",
          path);
    if (ok && braid_infer_split(&sp, &c, rank, size) == BRAID_OK)
        check_model(argv[1], &c, &sp, world);
    else if (ok) /* the refusal names n_head and the rank counts that work */
        CHECK(strstr(braid_eng_error(), "n_head 4 is not divisible") &&
                  strstr(braid_eng_error(), "1, 2, 4"),
              "refusal: %s", braid_eng_error());
    braid_finalize(world);
    char name[32];
    snprintf(name, sizeof(name), "engine-gpt rank %d", rank);
    return check_summary(name);
}
