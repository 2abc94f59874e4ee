/* allreduce "twoshot": reduce-scatter by direct writes, then allgather by
 * direct writes.
 *
 * The count is cut into n chunks, chunk j owned by rank j (uneven when
 * count % n != 0: the first count % n chunks have one element more; with
 * count < n the last chunks are empty and their owners reduce nothing):
 *
 *     chunk j:  q + (j < rem) elements from element j·q + min(j, rem),
 *               q = count / n, rem = count % n
 *
 *   stage 1  rank r put_signals its chunk j of sendbuf into its slot of bank 0
 *            (the reduce-scatter region) of rank j, for every j != r;
 *            once all n-1 pieces of chunk r are in, r folds them with its own
 *            in rank order into recvbuf's chunk r (and divides for AVG);
 *   stage 2  r put_signals that reduced chunk into its slot of bank 1 (the
 *            allgather region) of every peer, and copies every peer's reduced
 *            chunk from its own bank 1 into recvbuf as it arrives.
 *
 * Two latencies, 2(n-1)/n·m bytes sent and (n-1)/n·m reduced per rank (as
 * TensorRT-LLM's and vLLM's two-stage kernels, MSCCL++'s packet all-reduce).
 * Each chunk is reduced by one rank only, and everybody copies that rank's
 * bits, so the result is bitwise identical everywhere.
 *
 * Why one buffer per stage suffices (no bank parity needed here).  Let c be
 * a call, F and S two ranks.
 *  - F writes its stage-1 piece of call c+1 into S's bank 0 only after it
 *    completed call c, which needed S's reduced chunk of call c whenever S
 *    owned a non-empty chunk; S sends that chunk only after folding it, i.e.
 *    after its last read of bank 0 in call c.  (If S's chunk of call c was
 *    empty S did not read bank 0 in call c, and no one wrote it.)
 *  - F writes its stage-2 chunk of call c+1 into S's bank 1 only after it
 *    received every rank's stage-1 piece of call c+1, S's included; S posts
 *    those only in call c+1, after it finished call c and with it every read
 *    of bank 1 for call c.
 * So the stage-1 writes of call c+1 can only meet stage-2 reads of call c,
 * which is why the stages have separate regions: one region for both would
 * not do, since F may write its stage-2 chunk of call c into S's slot while
 * S is still folding F's stage-1 piece of call c out of that slot. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lowhop.h"
#include "recv_area.h"

#define BANK_RS 0 /* stage 1: pieces of this rank's chunk */
#define BANK_AG 1 /* stage 2: the other ranks' reduced chunks */

typedef struct twoshot {
    braid_lowhop_area_t *area;
    uint64_t             flag;
    int                  posted;  /* stage-1 puts are out */
    int                  nseen;   /* stage-1 pieces arrived */
    int                  reduced; /* own chunk folded and stage 2 posted */
    int                  ag_left; /* reduced chunks still to copy out */
    braid_treq_t        *rs_reqs; /* [n-1]: rs_reqs[i-1] to rank+i */
    braid_treq_t        *ag_reqs; /* [n-1]: likewise */
    unsigned char       *rs_seen; /* [n-1], by slot */
    unsigned char       *ag_done; /* [n-1], by slot: copied (or empty) */
    const void         **src;     /* [n]: pieces of own chunk, rank order */
} twoshot_t;

static size_t chunk_count(const braid_task_t *task, int j)
{
    return braid_chunk_len(task->count, task->size, j);
}

static size_t chunk_first(const braid_task_t *task, int j)
{
    return braid_chunk_off(task->count, task->size, j);
}

static braid_status_t twoshot_start(braid_task_t *task, braid_wait_t *wait)
{
    size_t         len = task->count * task->dtsize;
    int            n   = task->size;
    braid_status_t st;

    (void)wait;
    if (len > BRAID_LOWHOP_TWOSHOT_MAX_BYTES)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "lowhop: twoshot "
                                "takes at most %zu bytes per rank, this "
                                "allreduce has %zu (its receive area holds a "
                                "whole message)",
                                BRAID_LOWHOP_TWOSHOT_MAX_BYTES, len);
    size_t size = sizeof(twoshot_t) + 2 * (size_t)n * sizeof(braid_treq_t) +
                  (size_t)n * sizeof(void *) + 2 * (size_t)n;
    if ((st = task->svc->state_get(task, size, NULL)) != BRAID_OK)
        return st;
    twoshot_t *s = task->priv;
    s->rs_reqs   = (braid_treq_t *)(s + 1);
    s->ag_reqs   = s->rs_reqs + n;
    s->src       = (const void **)(s->ag_reqs + n);
    s->rs_seen   = (unsigned char *)(s->src + n);
    s->ag_done   = s->rs_seen + n;
    if (len == 0 || n == 1)
        return BRAID_OK; /* nothing to exchange (progress copies) */

    size_t need =
        chunk_count(task, 0) * task->dtsize; /* chunk 0 is a largest */
    st = braid_lowhop_area_get(&s->area, task, need,
                               BRAID_LOWHOP_TWOSHOT_MAX_BYTES / (size_t)n + 8);
    if (st != BRAID_OK)
        return st; /* finish() frees the state */
    s->area->calls++;
    s->flag = braid_lowhop_flag(task);
    for (int k = 0; k < n - 1; k++) {
        int j = braid_lowhop_slot_source(k, task->rank, n);
        if (chunk_count(task, j) == 0)
            s->ag_done[k] = 1; /* owner of an empty chunk: nothing comes */
        else
            s->ag_left++;
    }
    return BRAID_OK;
}

static braid_status_t post_stage1(braid_task_t *task, twoshot_t *s)
{
    int n = task->size;
    for (int i = 1; i < n; i++) {
        int    j   = (task->rank + i) % n;
        size_t cnt = chunk_count(task, j);
        if (cnt == 0)
            continue; /* rank j owns nothing: it expects no piece */
        braid_status_t st = braid_lowhop_put(
            task, s->area, j, BANK_RS,
            (const char *)task->sendbuf + chunk_first(task, j) * task->dtsize,
            cnt * task->dtsize, s->flag, &s->rs_reqs[i - 1]);
        if (st != BRAID_OK)
            return st;
    }
    s->posted = 1;
    return BRAID_OK;
}

/* Stage 1 end: fold own chunk once every piece is in, then stage 2 out. */
static braid_status_t reduce_own(braid_task_t *task, twoshot_t *s)
{
    int    n = task->size, me = task->rank;
    size_t cnt  = chunk_count(task, me);
    size_t boff = chunk_first(task, me) * task->dtsize;
    char  *out  = (char *)task->recvbuf + boff;

    if (cnt == 0) {
        s->reduced = 1; /* nothing owned: nothing to reduce or send */
        return BRAID_OK;
    }
    for (int k = 0; k < n - 1 && s->nseen < n - 1; k++) {
        if (s->rs_seen[k])
            continue;
        int got = braid_lowhop_arrived(s->area, BANK_RS, k, s->flag);
        if (got < 0)
            return braid_lowhop_mismatch(task, s->area, BANK_RS, k, s->flag);
        if (got > 0) {
            s->rs_seen[k] = 1;
            s->nseen++;
        }
    }
    if (s->nseen < n - 1)
        return BRAID_OK;
    for (int r = 0; r < n; r++)
        s->src[r] =
            r == me ? (const char *)task->sendbuf + boff
                    : braid_lowhop_slot_data(
                          s->area, BANK_RS, braid_lowhop_slot_index(r, me, n));
    braid_lowhop_fold(task, out, s->src, n, cnt);
    task->svc->finish_avg(out, cnt, task->dtype, task->op, n);
    s->reduced = 1;
    for (int i = 1; i < n; i++) {
        braid_status_t st =
            braid_lowhop_put(task, s->area, (me + i) % n, BANK_AG, out,
                             cnt * task->dtsize, s->flag, &s->ag_reqs[i - 1]);
        if (st != BRAID_OK)
            return st;
    }
    return BRAID_OK;
}

/* Stage 2: copies out the reduced chunks that arrived. */
static braid_status_t copy_out(braid_task_t *task, twoshot_t *s)
{
    int n = task->size, me = task->rank;
    int inplace = task->sendbuf == task->recvbuf;

    for (int k = 0; k < n - 1 && s->ag_left > 0; k++) {
        if (s->ag_done[k])
            continue;
        int got = braid_lowhop_arrived(s->area, BANK_AG, k, s->flag);
        if (got < 0)
            return braid_lowhop_mismatch(task, s->area, BANK_AG, k, s->flag);
        if (got == 0)
            continue;
        int j = braid_lowhop_slot_source(k, me, n);
        /* In place, recvbuf's chunk j is what our stage-1 put to j reads
         * (maybe still, on a zero-copy transport): wait for it. */
        if (inplace && s->rs_reqs[(j - me + n) % n - 1].active)
            continue;
        size_t bytes = chunk_count(task, j) * task->dtsize;
        task->svc->copy((char *)task->recvbuf +
                            chunk_first(task, j) * task->dtsize,
                        braid_lowhop_slot_data(s->area, BANK_AG, k), bytes,
                        braid_lowhop_stream_ok(task, s->area, bytes));
        s->ag_done[k] = 1;
        s->ag_left--;
    }
    return BRAID_OK;
}

static braid_status_t twoshot_progress(braid_task_t *task, braid_wait_t *wait)
{
    twoshot_t     *s = task->priv;
    int            n = task->size;
    braid_status_t st, rs, ag;

    if (s->area == NULL)
        return braid_lowhop_local_result(task);
    if (!s->posted && (st = post_stage1(task, s)) != BRAID_OK)
        return st;
    if ((st = braid_lowhop_tl_progress(task)) != BRAID_OK)
        return st;
    if (!s->reduced && (st = reduce_own(task, s)) != BRAID_OK)
        return st;
    rs = task->svc->reqs_test(task, s->rs_reqs, n - 1, NULL);
    if (rs != BRAID_OK && rs != BRAID_INPROGRESS)
        return rs;
    ag = task->svc->reqs_test(task, s->ag_reqs, n - 1, NULL);
    if (ag != BRAID_OK && ag != BRAID_INPROGRESS)
        return ag;
    if ((st = copy_out(task, s)) != BRAID_OK)
        return st;
    if (s->reduced && s->ag_left == 0 && rs == BRAID_OK && ag == BRAID_OK)
        return BRAID_OK;
    /* Stage 1 waits for pieces of the own chunk, stage 2 for chunks. */
    if (braid_lowhop_mates_in(s->area, s->reduced ? s->ag_done : s->rs_seen,
                              n))
        *wait = BRAID_WAIT_REMOTE;
    return BRAID_INPROGRESS;
}

/* After an error, stage-1 puts may still read sendbuf and stage-2 puts
 * recvbuf: withdrawn before the caller gets them back. */
static void twoshot_finish(braid_task_t *task)
{
    twoshot_t *s = task->priv;

    if (s != NULL) {
        task->svc->reqs_cancel(task, s->rs_reqs, task->size - 1);
        task->svc->reqs_cancel(task, s->ag_reqs, task->size - 1);
    }
    task->svc->state_put(task);
}

static double twoshot_estimate(const braid_algo_t    *self,
                               const braid_cost_in_t *in)
{
    (void)self;
    return braid_lowhop_cost_twoshot(in);
}

const braid_algo_t braid_lowhop_twoshot_algo = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_RANK_ORDER, /* braid_lowhop_fold */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "twoshot",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = twoshot_estimate,
    .start           = twoshot_start,
    .progress        = twoshot_progress,
    .finish          = twoshot_finish,
    .comm_state_free = braid_lowhop_area_free,
};
