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

static braid_status_t oneshot_start(braid_task_t *task)
{
    return braid_lowhop_xchg_start(task, task->count * task->dtsize,
                                   BRAID_LOWHOP_ONESHOT_MAX_BYTES, "oneshot");
}

static braid_status_t oneshot_progress(braid_task_t *task)
{
    braid_lowhop_xchg_t *s   = task->priv;
    int                  n   = task->size;
    int                  me  = task->rank;
    size_t               len = task->count * task->dtsize;
    braid_status_t       st;

    if (s->area == NULL)
        return braid_lowhop_local_result(task);
    int first = !s->posted;
    if ((st = braid_lowhop_xchg_drive(task, s, task->sendbuf, len, 0)) !=
        BRAID_OK)
        return st;
    if (first && braid_lowhop_xchg_yield_first(task, s))
        return BRAID_INPROGRESS;
    /* In place, recvbuf is the source of our puts: a transport may read it
     * until the put completes, so the result waits for that. */
    int src_free = task->sendbuf != task->recvbuf || s->sent;
    if (!s->reduced && src_free && braid_lowhop_xchg_arrived(task, s)) {
        /* Rank r wrote slot r - me - 1 mod n: ranks below me from n-1-me
         * on, ranks above me from 0 (braid_lowhop_slot_index). */
        for (int r = 0, slot = n - 1 - me; r < n; r++, slot++) {
            if (slot == n)
                slot = 0;
            s->src[r] = r == me ? task->sendbuf
                                : braid_lowhop_slot_data(s->area, s->bank,
                                                         slot);
        }
        braid_lowhop_fold(task, task->recvbuf, s->src, n, task->count);
        task->svc->finish_avg(task->recvbuf, task->count, task->dtype,
                              task->op, n);
        s->reduced = 1;
    }
    return s->reduced && s->sent ? BRAID_OK : BRAID_INPROGRESS;
}

const braid_algo_v3_t braid_lowhop_oneshot_algo = {
    .name            = "oneshot",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = braid_lowhop_cost_oneshot,
    .start           = oneshot_start,
    .progress        = oneshot_progress,
    .finish          = braid_lowhop_xchg_finish,
    .comm_state_free = braid_lowhop_area_free,
};
