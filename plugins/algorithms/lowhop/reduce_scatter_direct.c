/* reduce_scatter "direct": one stage of direct writes, then a local fold.
 *
 * Rank r put_signals block j of its send buffer (recvcount elements at
 * j·block) into its slot of rank j's receive area (bank by call parity,
 * recv_area.h), for every j != r; once all n-1 pieces of block r arrived it
 * folds them with its own block in rank order into recvbuf.  One latency and
 * (n-1)/n of the send buffer out per rank, against n-1 latencies for the
 * ring.  In place (recvbuf == sendbuf + r·block) the puts read the other
 * blocks and the fold writes block r, so they never meet. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exchange.h"
#include "lowhop.h"

static braid_status_t rs_start(braid_task_t *task, braid_wait_t *wait)
{
    size_t         len = task->count * task->dtsize;
    braid_status_t st  = braid_lowhop_xchg_start(
         task, len, BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES,
         "reduce_scatter direct");
    if (st != BRAID_OK)
        return st;
    return braid_lowhop_xchg_open(task, task->priv, task->sendbuf, len, len,
                                  wait);
}

static braid_status_t rs_progress(braid_task_t *task, braid_wait_t *wait)
{
    braid_lowhop_xchg_t *s = task->priv;
    int                  n = task->size, me = task->rank;
    size_t               len = task->count * task->dtsize;
    const char          *in  = task->sendbuf;
    braid_status_t       st;

    if (s->area == NULL)
        return braid_lowhop_local_result(task);
    if ((st = braid_lowhop_xchg_drive(task, s, in, len, len)) != BRAID_OK)
        return st;
    int got = !s->reduced ? braid_lowhop_xchg_arrived(task, s, wait) : 0;
    if (got < 0)
        return braid_lowhop_mismatch(task, s->area, s->bank, s->odd, s->flag);
    if (got > 0) {
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
    return s->reduced && s->sent ? BRAID_OK : braid_lowhop_xchg_more(task, s);
}

static double rs_estimate(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return braid_lowhop_cost_reduce_scatter_direct(in);
}

const braid_algo_t braid_lowhop_reduce_scatter_direct_algo = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_RANK_ORDER, /* braid_lowhop_fold */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "direct",
    .coll            = BRAID_COLL_REDUCE_SCATTER,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = rs_estimate,
    .start           = rs_start,
    .progress        = rs_progress,
    .finish          = braid_lowhop_xchg_finish,
    .comm_state_free = braid_lowhop_area_free,
};
