/* allreduce "oneshot": one stage of direct writes, then a local reduction.
 *
 * Every rank put_signals its whole buffer into its slot of every peer's
 * receive area (slots.h), then folds the n contributions in rank order --
 * its own straight from its send buffer -- into recvbuf.  One latency, but
 * (n-1)·m bytes leave every rank and (n-1)·m are reduced: the all-reduce for
 * the smallest messages (decode steps), as in TensorRT-LLM's push-mode
 * one-shot kernel and Open MPI's allgather_reduce.
 *
 * Per call:  start   grow the area if needed, pick the bank
 *            progress post the n-1 puts (first time), poll the n-1 flags,
 *                     fold once all arrived, complete once every put did. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lowhop.h"
#include "slots.h"

typedef struct oneshot {
    braid_lowhop_area_t *area;
    uint64_t             flag;
    int                  bank;
    int                  posted;  /* the puts are out */
    int                  nseen;   /* peers whose data arrived */
    int                  reduced;
    braid_treq_t        *reqs;    /* [n-1]: reqs[i-1] to rank+i */
    unsigned char       *seen;    /* [n-1], by slot */
    const void         **src;     /* [n]: contributions in rank order */
} oneshot_t;

static braid_status_t oneshot_start(braid_task_t *task)
{
    size_t len = task->count * task->dtsize;
    int    n   = task->size;
    braid_status_t st;

    if (len > BRAID_LOWHOP_ONESHOT_MAX_BYTES)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED, "lowhop: oneshot "
                                "takes at most %zu bytes per rank, this "
                                "allreduce has %zu (its receive area holds a "
                                "whole message per peer)",
                                BRAID_LOWHOP_ONESHOT_MAX_BYTES, len);
    size_t size = sizeof(oneshot_t) + (size_t)n * sizeof(braid_treq_t) +
                  (size_t)n * sizeof(void *) + (size_t)n;
    if ((st = braid_lowhop_priv_alloc(task, size)) != BRAID_OK)
        return st;
    oneshot_t *s = task->priv;
    s->reqs = (braid_treq_t *)(s + 1);
    s->src  = (const void **)(s->reqs + n);
    s->seen = (unsigned char *)(s->src + n);
    if (len == 0 || n == 1)
        return BRAID_OK; /* nothing to exchange (progress copies) */

    st = braid_lowhop_area_get(&s->area, task, len,
                               BRAID_LOWHOP_ONESHOT_MAX_BYTES);
    if (st != BRAID_OK)
        goto fail;
    s->bank = (int)(s->area->calls++ & 1);
    s->flag = braid_lowhop_flag(task->seq);
    return BRAID_OK;

fail:
    task->priv = NULL; /* finish() is not called when start fails */
    free(s);
    return st;
}

/* Local result of a call with nothing to exchange. */
static braid_status_t oneshot_local(braid_task_t *task)
{
    size_t len = task->count * task->dtsize;
    if (len > 0 && task->recvbuf != task->sendbuf)
        memcpy(task->recvbuf, task->sendbuf, len);
    return BRAID_OK; /* avg over one rank divides by 1 */
}

static braid_status_t oneshot_progress(braid_task_t *task)
{
    oneshot_t *s   = task->priv;
    int        n   = task->size;
    size_t     len = task->count * task->dtsize;
    int        nputs;
    braid_status_t st;

    if (s->area == NULL)
        return oneshot_local(task);
    if (!s->posted) {
        /* rank+1 first: spreads the writes so no rank is everyone's first */
        for (int i = 1; i < n; i++) {
            st = braid_lowhop_put(task, s->area, (task->rank + i) % n, s->bank,
                                  task->sendbuf, len, s->flag, &s->reqs[i - 1]);
            if (st != BRAID_OK)
                return st;
        }
        s->posted = 1;
    }
    if ((st = braid_lowhop_tl_progress(task)) != BRAID_OK)
        return st;
    for (int k = 0; k < n - 1 && s->nseen < n - 1; k++) {
        if (!s->seen[k] && braid_lowhop_arrived(s->area, s->bank, k, s->flag)) {
            s->seen[k] = 1;
            s->nseen++;
        }
    }
    st = braid_lowhop_reqs_test(task, s->reqs, n - 1, &nputs);
    if (st != BRAID_OK && st != BRAID_INPROGRESS)
        return st;
    /* In place, recvbuf is the source of our puts: a transport may read it
     * until the put completes, so the result waits for that. */
    int src_free = task->sendbuf != task->recvbuf || nputs == n - 1;
    if (!s->reduced && s->nseen == n - 1 && src_free) {
        for (int r = 0; r < n; r++)
            s->src[r] = r == task->rank
                            ? task->sendbuf
                            : braid_lowhop_slot_data(
                                  s->area, s->bank,
                                  braid_lowhop_slot_index(r, task->rank, n));
        braid_lowhop_fold(task, task->recvbuf, s->src, n, task->count);
        task->svc->finish_avg(task->recvbuf, task->count, task->dtype,
                              task->op, n);
        s->reduced = 1;
    }
    return s->reduced && st == BRAID_OK ? BRAID_OK : BRAID_INPROGRESS;
}

static void oneshot_finish(braid_task_t *task)
{
    free(task->priv);
    task->priv = NULL;
}

const braid_algo_v1_t braid_lowhop_oneshot_algo = {
    .name            = "oneshot",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = braid_lowhop_cost_oneshot,
    .start           = oneshot_start,
    .progress        = oneshot_progress,
    .finish          = oneshot_finish,
    .comm_state_free = braid_lowhop_area_free,
};
