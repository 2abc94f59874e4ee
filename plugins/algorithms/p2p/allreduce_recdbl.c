/* allreduce "recdbl": recursive doubling on whole buffers.
 *
 * The p ranks that take part (recdbl.h: the others fold in first and get
 * the result back last) exchange their partial results with v ^ 2^i for
 * i < log2(p) and combine them, so every one ends with the full reduction.
 * Latency-bound: log2(p) (+2) messages of the whole buffer; right for small
 * messages. */
#include "recdbl.h"

typedef struct allreduce_recdbl {
    braid_p2p_recdbl_t g;   /* first */
    int                i;   /* doubling step */
    const char        *cur; /* this rank's partial result */
} allreduce_recdbl_t;

static int partner_vrank(const allreduce_recdbl_t *s)
{
    return s->g.vrank ^ (1 << s->i);
}

static void fold_in(braid_task_t *task)
{
    allreduce_recdbl_t *s = task->priv;
    braid_p2p_combine(task, task->recvbuf, s->g.tmp, s->cur, task->count);
    s->cur = task->recvbuf;
}

static braid_status_t post(braid_task_t *task)
{
    allreduce_recdbl_t *s     = task->priv;
    size_t              bytes = s->g.in_bytes;
    int                 peer  = braid_p2p_recdbl_real(&s->g, partner_vrank(s));
    braid_status_t      st =
        braid_p2p_recv(task, peer, 1 + s->i, s->g.tmp, bytes, &s->g.reqs[0]);
    if (st == BRAID_OK)
        st =
            braid_p2p_send(task, peer, 1 + s->i, s->cur, bytes, &s->g.reqs[1]);
    return st;
}

static int step_done(braid_task_t *task)
{
    allreduce_recdbl_t *s   = task->priv;
    void               *dst = task->recvbuf;

    if (s->g.vrank < partner_vrank(s))
        braid_p2p_combine(task, dst, s->cur, s->g.tmp, task->count);
    else
        braid_p2p_combine(task, dst, s->g.tmp, s->cur, task->count);
    s->cur = dst;
    if (++s->i < s->g.nsteps)
        return 0;
    task->svc->finish_avg(dst, task->count, task->dtype, task->op, task->size);
    return 1;
}

static const void *idle_result(braid_task_t *task) { return task->recvbuf; }

static const braid_p2p_recdbl_ops_t ops = {
    .fold_in     = fold_in,
    .post        = post,
    .step_done   = step_done,
    .idle_result = idle_result,
};

static braid_status_t start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    size_t         bytes = task->count * task->dtsize;
    braid_status_t st    = braid_p2p_recdbl_start(
           task, sizeof(allreduce_recdbl_t), &ops, bytes, bytes, bytes);
    if (st == BRAID_OK)
        ((allreduce_recdbl_t *)task->priv)->cur = task->sendbuf;
    return st;
}

const braid_algo_t braid_p2p_allreduce_recdbl = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_CORE_REDUCE, /* braid_p2p_combine */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "recdbl",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_allreduce_recdbl,
    .start           = start,
    .progress        = braid_p2p_recdbl_progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
