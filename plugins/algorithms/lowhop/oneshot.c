/* allreduce "oneshot": one stage of direct writes, then a local reduction.
 *
 * Every rank put_signals its whole buffer into its slot of every peer's
 * receive area (recv_area.h), then folds the n contributions in rank order --
 * its own straight from its send buffer -- into recvbuf.  One latency, but
 * (n-1)·m bytes leave every rank and (n-1)·m are reduced: the all-reduce for
 * the smallest messages (decode steps), as in TensorRT-LLM's push-mode
 * one-shot kernel and Open MPI's allgather_reduce.
 *
 * Per call:  start    grow the area if needed, pick the bank, post the n-1
 *                     puts, and say whether only other CPUs' data is left
 *            progress poll the n-1 flags, fold once all arrived, complete
 *                     once every put did. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exchange.h"
#include "lowhop.h"

static braid_status_t oneshot_start(braid_task_t *task, braid_wait_t *wait)
{
    size_t         len = task->count * task->dtsize;
    braid_status_t st  = braid_lowhop_xchg_start(
         task, len, BRAID_LOWHOP_ONESHOT_MAX_BYTES, "oneshot");
    if (st != BRAID_OK)
        return st;
    return braid_lowhop_xchg_open(task, task->priv, task->sendbuf, len, 0,
                                  wait);
}

static braid_status_t oneshot_progress(braid_task_t *task, braid_wait_t *wait)
{
    braid_lowhop_xchg_t *s   = task->priv;
    int                  n   = task->size;
    int                  me  = task->rank;
    size_t               len = task->count * task->dtsize;
    braid_status_t       st;

    if (s->area == NULL)
        return braid_lowhop_local_result(task);
    if ((st = braid_lowhop_xchg_drive(task, s, task->sendbuf, len, 0)) !=
        BRAID_OK)
        return st;
    /* In place, recvbuf is the source of our puts: a transport may read it
     * until the put completes, so the result waits for that. */
    int src_free = task->sendbuf != task->recvbuf || s->sent;
    int got =
        !s->reduced && src_free ? braid_lowhop_xchg_arrived(task, s, wait) : 0;
    if (got < 0)
        return braid_lowhop_mismatch(task, s->area, s->bank, s->odd, s->flag);
    if (got > 0) {
        /* Rank r wrote slot r - me - 1 mod n: ranks below me from n-1-me
         * on, ranks above me from 0 (braid_lowhop_slot_index). */
        for (int r = 0, slot = n - 1 - me; r < n; r++, slot++) {
            if (slot == n)
                slot = 0;
            s->src[r] = r == me
                            ? task->sendbuf
                            : braid_lowhop_slot_data(s->area, s->bank, slot);
        }
        braid_lowhop_fold(task, task->recvbuf, s->src, n, task->count);
        task->svc->finish_avg(task->recvbuf, task->count, task->dtype,
                              task->op, n);
        s->reduced = 1;
    }
    return s->reduced && s->sent ? BRAID_OK : braid_lowhop_xchg_more(task, s);
}

static double oneshot_estimate(const braid_algo_t    *self,
                               const braid_cost_in_t *in)
{
    (void)self;
    return braid_lowhop_cost_oneshot(in);
}

const braid_algo_t braid_lowhop_oneshot_algo = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_RANK_ORDER, /* braid_lowhop_fold */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "oneshot",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = oneshot_estimate,
    .start           = oneshot_start,
    .progress        = oneshot_progress,
    .finish          = braid_lowhop_xchg_finish,
    .comm_state_free = braid_lowhop_area_free,
};
