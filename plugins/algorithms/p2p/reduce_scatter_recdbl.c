/* reduce_scatter "recdbl": recursive halving.
 *
 * The p ranks that take part (recdbl.h: the even ranks below 2*rem hand
 * their whole input to the next rank and sit out) own contiguous runs of
 * real blocks: v < rem owns blocks 2v and 2v+1, the rest one block each.
 * Each halving step splits the current window of virtual ranks in two,
 * sends the partner the half it keeps and receives ours, so the data moved
 * halves every step; after log2(p) steps a virtual rank holds its own blocks
 * fully reduced and a folded rank passes its even neighbour's block back.
 *
 * Partial results live in scratch (acc, indexed by block) except our own
 * block, which is accumulated directly in the receive buffer: no final copy,
 * and in place the input block is consumed by the step that overwrites it.
 * Combining is (lower rank's data) op (higher rank's data) throughout. */
#include "recdbl.h"

typedef struct halving {
    braid_p2p_recdbl_t g;                /* first; g.tmp: n blocks */
    int                mask, step;       /* current halving step */
    int                vlo, vhi;         /* window of virtual ranks */
    int                keep_lo, keep_hi; /* real blocks kept this step */
    int                send_lo, send_hi; /* real blocks sent this step */
    int                have_acc;         /* partials are in acc/recvbuf */
    size_t             bs;               /* block bytes */
    char              *acc;              /* n blocks */
} halving_t;

static int vstart(const halving_t *s, int v)
{
    return v < s->g.rem ? 2 * v : v + s->g.rem;
}

/* Where block b's partial result lives. */
static char *accp(braid_task_t *task, const halving_t *s, int b)
{
    return b == task->rank ? (char *)task->recvbuf
                           : s->acc + (size_t)b * s->bs;
}

static const char *mine(braid_task_t *task, const halving_t *s, int b)
{
    return s->have_acc ? accp(task, s, b)
                       : (const char *)task->sendbuf + (size_t)b * s->bs;
}

/* Combines blocks [b0, b1) of our partials with tmp, piece by piece around
 * our own block (which lives apart, in the receive buffer). */
static void combine_blocks(braid_task_t *task, const halving_t *s, int b0,
                           int b1, int mine_is_lower)
{
    const int r      = task->rank;
    int       cut[4] = {b0, r < b0 ? b0 : (r > b1 ? b1 : r),
                  r + 1 < b0 ? b0 : (r + 1 > b1 ? b1 : r + 1), b1};

    for (int i = 0; i < 3; i++) {
        int x = cut[i], y = cut[i + 1];
        if (y <= x)
            continue;
        size_t      cnt = (size_t)(y - x) * task->count;
        const char *m   = mine(task, s, x);
        const char *o   = s->g.tmp + (size_t)x * s->bs;
        if (mine_is_lower)
            braid_p2p_combine(task, accp(task, s, x), m, o, cnt);
        else
            braid_p2p_combine(task, accp(task, s, x), o, m, cnt);
    }
}

/* Splits the window for the current mask. */
static void plan_step(braid_task_t *task)
{
    halving_t *s   = task->priv;
    int        mid = s->vlo + s->mask, klo, khi, slo, shi;

    if (s->g.vrank < mid) {
        klo = s->vlo, khi = mid, slo = mid, shi = s->vhi;
    } else {
        klo = mid, khi = s->vhi, slo = s->vlo, shi = mid;
    }
    s->keep_lo = vstart(s, klo);
    s->keep_hi = vstart(s, khi);
    s->send_lo = vstart(s, slo);
    s->send_hi = vstart(s, shi);
    s->vlo     = klo;
    s->vhi     = khi;
}

static void fold_in(braid_task_t *task)
{
    halving_t *s = task->priv;
    combine_blocks(task, s, 0, task->size, 0);
    s->have_acc = 1;
}

static braid_status_t post(braid_task_t *task)
{
    halving_t     *s    = task->priv;
    int            peer = braid_p2p_recdbl_real(&s->g, s->g.vrank ^ s->mask);
    braid_status_t st   = braid_p2p_recv(
          task, peer, 1 + s->step, s->g.tmp + (size_t)s->keep_lo * s->bs,
          (size_t)(s->keep_hi - s->keep_lo) * s->bs, &s->g.reqs[0]);
    if (st == BRAID_OK)
        st = braid_p2p_send(task, peer, 1 + s->step, mine(task, s, s->send_lo),
                            (size_t)(s->send_hi - s->send_lo) * s->bs,
                            &s->g.reqs[1]);
    return st;
}

static void finish_avg(braid_task_t *task, void *block)
{
    task->svc->finish_avg(block, task->count, task->dtype, task->op,
                          task->size);
}

static int step_done(braid_task_t *task)
{
    halving_t *s = task->priv;

    combine_blocks(task, s, s->keep_lo, s->keep_hi,
                   s->g.vrank < (s->g.vrank ^ s->mask));
    s->have_acc = 1;
    s->step++;
    s->mask /= 2;
    if (s->mask > 0) {
        plan_step(task);
        return 0;
    }
    finish_avg(task, task->recvbuf);
    if (task->rank < 2 * s->g.rem)
        finish_avg(task, accp(task, s, task->rank - 1));
    return 1;
}

static const void *idle_result(braid_task_t *task)
{
    return accp(task, task->priv, task->rank - 1);
}

static const braid_p2p_recdbl_ops_t ops = {
    .fold_in     = fold_in,
    .begin       = plan_step,
    .post        = post,
    .step_done   = step_done,
    .idle_result = idle_result,
};

static braid_status_t start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    size_t         bs  = task->count * task->dtsize;
    size_t         all = (size_t)task->size * bs;
    braid_status_t st  = braid_p2p_recdbl_start(task, sizeof(halving_t), &ops,
                                                all, bs, 2 * all);
    halving_t     *s   = task->priv;
    if (s == NULL)
        return st;
    s->mask = s->g.p / 2;
    s->vhi  = s->g.p;
    s->bs   = bs;
    s->acc  = s->g.tmp != NULL ? s->g.tmp + all : NULL;
    return st;
}

const braid_algo_t braid_p2p_reduce_scatter_recdbl = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_CORE_REDUCE, /* braid_p2p_combine */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "recdbl",
    .coll            = BRAID_COLL_REDUCE_SCATTER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_reduce_scatter_recdbl,
    .start           = start,
    .progress        = braid_p2p_recdbl_progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
