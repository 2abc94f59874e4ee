/* reduce_scatter "direct": one stage of direct writes, then a local fold.
 *
 * Rank r put_signals block j of its send buffer (recvcount elements at
 * j·block) into its slot of rank j's receive area (bank by call parity,
 * slots.h), for every j != r; once all n-1 pieces of block r arrived it
 * folds them with its own block in rank order into recvbuf.  One latency and
 * (n-1)/n of the send buffer out per rank, against n-1 latencies for the
 * ring.  In place (recvbuf == sendbuf + r·block) the puts read the other
 * blocks and the fold writes block r, so they never meet. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lowhop.h"
#include "slots.h"

typedef struct rs_direct {
    braid_lowhop_area_t *area;
    uint64_t             flag;
    int                  bank;
    int                  posted;
    int                  nseen;
    int                  reduced;
    braid_treq_t        *reqs;  /* [n-1]: reqs[i-1] to rank+i */
    unsigned char       *seen;  /* [n-1], by slot */
    const void         **src;   /* [n]: pieces of block r, rank order */
} rs_direct_t;

static braid_status_t rs_start(braid_task_t *task)
{
    size_t len = task->count * task->dtsize;
    int    n   = task->size;
    braid_status_t st;

    if (len > BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED, "lowhop: "
                                "reduce_scatter direct takes at most %zu "
                                "bytes per rank, this call receives %zu (its "
                                "receive area holds a whole block per peer)",
                                BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES, len);
    size_t size = sizeof(rs_direct_t) + (size_t)n * sizeof(braid_treq_t) +
                  (size_t)n * sizeof(void *) + (size_t)n;
    if ((st = braid_lowhop_priv_alloc(task, size)) != BRAID_OK)
        return st;
    rs_direct_t *s = task->priv;
    s->reqs = (braid_treq_t *)(s + 1);
    s->src  = (const void **)(s->reqs + n);
    s->seen = (unsigned char *)(s->src + n);
    if (len == 0 || n == 1)
        return BRAID_OK;

    st = braid_lowhop_area_get(&s->area, task, len,
                               BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES);
    if (st != BRAID_OK) {
        task->priv = NULL; /* finish() is not called when start fails */
        free(s);
        return st;
    }
    s->bank = (int)(s->area->calls++ & 1);
    s->flag = braid_lowhop_flag(task->seq);
    return BRAID_OK;
}

static braid_status_t rs_progress(braid_task_t *task)
{
    rs_direct_t *s   = task->priv;
    int          n   = task->size, me = task->rank;
    size_t       len = task->count * task->dtsize;
    const char  *in  = task->sendbuf;
    braid_status_t st;

    if (s->area == NULL) {
        if (len > 0 && task->recvbuf != task->sendbuf)
            memcpy(task->recvbuf, task->sendbuf, len);
        return BRAID_OK;
    }
    if (!s->posted) {
        for (int i = 1; i < n; i++) {
            int j = (me + i) % n;
            st = braid_lowhop_put(task, s->area, j, s->bank,
                                  in + (size_t)j * len, len, s->flag,
                                  &s->reqs[i - 1]);
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
    if (!s->reduced && s->nseen == n - 1) {
        for (int r = 0; r < n; r++)
            s->src[r] = r == me ? (const void *)(in + (size_t)me * len)
                                : braid_lowhop_slot_data(
                                      s->area, s->bank,
                                      braid_lowhop_slot_index(r, me, n));
        braid_lowhop_fold(task, task->recvbuf, s->src, n, task->count);
        task->svc->finish_avg(task->recvbuf, task->count, task->dtype,
                              task->op, n);
        s->reduced = 1;
    }
    st = braid_lowhop_reqs_test(task, s->reqs, n - 1, NULL);
    if (st != BRAID_OK)
        return st;
    return s->reduced ? BRAID_OK : BRAID_INPROGRESS;
}

static void rs_finish(braid_task_t *task)
{
    free(task->priv);
    task->priv = NULL;
}

const braid_algo_v1_t braid_lowhop_reduce_scatter_direct_algo = {
    .name            = "direct",
    .coll            = BRAID_COLL_REDUCE_SCATTER,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = braid_lowhop_cost_reduce_scatter_direct,
    .start           = rs_start,
    .progress        = rs_progress,
    .finish          = rs_finish,
    .comm_state_free = braid_lowhop_area_free,
};
