/* Gradient all-reduce in buckets, overlapped with the backward pass (see
 * dp.h). */
#include "dp.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/common/err.h"
#include "nn.h"
#include "util.h"

braid_status_t braid_train_dp_create(braid_train_dp_t *dp, braid_comm_t *comm,
                                     float *grads, size_t n,
                                     size_t bucket_bytes, int overlap)
{
    *dp = (braid_train_dp_t){
        .comm = comm, .grads = grads, .n = n, .overlap = overlap};
    size_t per = bucket_bytes / sizeof(float);
    if (per == 0)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "bucket size %zu "
                              "bytes: need at least %zu",
                              bucket_bytes, sizeof(float));
    dp->nbuckets = overlap ? (int)((n + per - 1) / per) : 1;
    dp->b        = calloc((size_t)dp->nbuckets, sizeof(*dp->b));
    if (dp->b == NULL)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                              "out of memory for %d "
                              "buckets",
                              dp->nbuckets);
    for (int i = 0; i < dp->nbuckets; i++) {
        dp->b[i].hi = overlap ? n - (size_t)i * per : n;
        dp->b[i].lo = overlap && dp->b[i].hi > per ? dp->b[i].hi - per : 0;
    }
    return BRAID_OK;
}

void braid_train_dp_free(braid_train_dp_t *dp)
{
    free(dp->b);
    dp->b = NULL;
}

void braid_train_dp_print_choices(braid_comm_t *comm, size_t n,
                                  size_t bucket_bytes, int overlap,
                                  const char *indent)
{
    size_t per      = bucket_bytes / sizeof(float);
    size_t nbucket  = overlap ? (n + per - 1) / per : 1;
    size_t full     = (overlap && n > per ? per : n) * sizeof(float);
    size_t rest     = overlap && n % per ? n % per * sizeof(float) : full;
    size_t sizes[2] = {full, rest};
    char   cand[64], why[64];
    for (int i = 0; i < (rest != full ? 2 : 1); i++) {
        if (braid_comm_choice(comm, BRAID_COLL_ALLREDUCE, sizes[i], cand,
                              sizeof(cand), why, sizeof(why)) != BRAID_OK)
            snprintf(cand, sizeof(cand), "? (%s)", braid_last_error());
        printf("%s%s %.2f MiB on %d ranks: %s (%s)\n", indent,
               !overlap      ? "--no-overlap: one all-reduce of"
               : i           ? "last bucket,"
               : nbucket > 1 ? "buckets of"
                             : "one bucket of",
               sizes[i] / (double)(1 << 20), braid_comm_size(comm), cand, why);
    }
}

static void fail(braid_train_dp_t *dp, braid_status_t st, const char *what)
{
    if (dp->err == BRAID_OK)
        dp->err = braid_eng_fail_braid(st, what);
}

/* Tests the pending buckets in issue order: braid progresses the oldest
 * call, and a test that finds it done goes on to the next. */
static void poll_requests(void *ctx)
{
    braid_train_dp_t *dp = ctx;
    double            t0 = braid_eng_now();
    while (dp->err == BRAID_OK && dp->next_done < dp->next_send) {
        braid_train_bucket_t *b    = &dp->b[dp->next_done];
        int                   done = 0;
        braid_status_t        st   = braid_test(b->req, &done);
        if (st != BRAID_OK) {
            b->req = NULL; /* a finished request, failed or not, is freed */
            fail(dp, st, "gradient all-reduce");
            break;
        }
        if (!done)
            break;
        b->req  = NULL;
        b->done = 1;
        dp->next_done++;
    }
    dp->t_poll += braid_eng_now() - t0;
}

static void send_bucket(braid_train_dp_t *dp, braid_train_bucket_t *b)
{
    braid_status_t st =
        braid_iallreduce(dp->grads + b->lo, dp->grads + b->lo, b->hi - b->lo,
                         BRAID_F32, BRAID_AVG, dp->comm, &b->req);
    b->sent = 1;
    dp->next_send++;
    if (st != BRAID_OK) {
        b->req = NULL;
        fail(dp, st, "gradient all-reduce");
    }
}

void braid_train_dp_begin(braid_train_dp_t *dp)
{
    for (int i = 0; i < dp->nbuckets; i++) {
        dp->b[i].req  = NULL;
        dp->b[i].sent = dp->b[i].done = 0;
    }
    dp->next_send = dp->next_done = 0;
    dp->t_poll = dp->t_wait = 0;
    dp->active              = 1;
    if (dp->overlap)
        braid_nn_set_poll(poll_requests, dp);
}

void braid_train_dp_ready(void *ctx, size_t offset)
{
    braid_train_dp_t *dp = ctx;
    if (!dp->overlap || !dp->active)
        return;
    double t0 = braid_eng_now();
    while (dp->err == BRAID_OK && dp->next_send < dp->nbuckets &&
           dp->b[dp->next_send].lo >= offset)
        send_bucket(dp, &dp->b[dp->next_send]);
    dp->t_poll += braid_eng_now() - t0; /* posting starts the transfers */
    poll_requests(dp);
}

braid_status_t braid_train_dp_finish(braid_train_dp_t *dp)
{
    braid_nn_set_poll(NULL, NULL);
    dp->active = 0;
    double t0  = braid_eng_now();
    if (!dp->overlap && dp->err == BRAID_OK) {
        braid_status_t st = braid_allreduce(dp->grads, dp->grads, dp->n,
                                            BRAID_F32, BRAID_AVG, dp->comm);
        if (st != BRAID_OK)
            fail(dp, st, "gradient all-reduce");
        dp->next_send = dp->next_done = 1;
    }
    while (dp->err == BRAID_OK && dp->next_send < dp->nbuckets)
        send_bucket(dp, &dp->b[dp->next_send]);
    /* wait in issue order; after a failure still wait for what is out, so
     * that no request outlives this step */
    for (int i = dp->next_done; i < dp->next_send; i++) {
        braid_train_bucket_t *b = &dp->b[i];
        if (b->req == NULL)
            continue;
        braid_status_t st = braid_wait(b->req);
        b->req            = NULL;
        if (st != BRAID_OK)
            fail(dp, st, "gradient all-reduce");
    }
    dp->next_done = dp->next_send;
    dp->t_wait    = braid_eng_now() - t0;
    return dp->err;
}
