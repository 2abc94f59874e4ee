/* reduce_scatter "recdbl": recursive halving.
 *
 * With p the largest power of two <= n and rem = n - p, even ranks below
 * 2*rem hand their whole input to the next rank and sit out; the p others
 * (virtual rank v = real 2v+1 for v < rem, v+rem above) own contiguous runs
 * of real blocks: v < rem owns blocks 2v and 2v+1, the rest one block each.
 * Each halving step splits the current window of virtual ranks in two,
 * sends the partner the half it keeps and receives ours, so the data moved
 * halves every step; after log2(p) steps a virtual rank holds its own blocks
 * fully reduced and a folded rank passes its even neighbour's block back.
 *
 * Partial results live in scratch (acc, indexed by block) except our own
 * block, which is accumulated directly in the receive buffer: no final copy,
 * and in place the input block is consumed by the step that overwrites it.
 * Combining is (lower rank's data) op (higher rank's data) throughout. */
#include "algo_common.h"

enum {
    ST_INIT,
    ST_FOLD_IN,   /* odd rank < 2*rem: receive the even neighbour's input */
    ST_HALVE,
    ST_FOLD_OUT,  /* odd rank < 2*rem: return the neighbour's block */
    ST_IDLE_SEND, /* even rank < 2*rem: hand over the input ... */
    ST_IDLE_RECV, /* ... and receive its block */
    ST_DONE
};

typedef struct halving {
    int             stage;
    int             rem, p, vrank;
    int             mask, step;       /* current halving step */
    int             vlo, vhi;         /* window of virtual ranks */
    int             keep_lo, keep_hi; /* real blocks kept this step */
    int             send_lo, send_hi; /* real blocks sent this step */
    int             have_acc;         /* partials are in acc/recvbuf now */
    size_t          bs;               /* block bytes */
    char           *acc, *tmp;        /* n blocks each */
    braid_p2p_buf_t scratch;
    braid_treq_t    reqs[2];
} halving_t;

static int vstart(const halving_t *g, int v)
{
    return v < g->rem ? 2 * v : v + g->rem;
}

static int real_rank(const halving_t *g, int v)
{
    return v < g->rem ? 2 * v + 1 : v + g->rem;
}

/* Where block b's partial result lives. */
static char *accp(braid_task_t *task, const halving_t *g, int b)
{
    return b == task->rank ? (char *)task->recvbuf
                           : g->acc + (size_t)b * g->bs;
}

static const char *mine(braid_task_t *task, const halving_t *g, int b)
{
    return g->have_acc ? accp(task, g, b)
                       : (const char *)task->sendbuf + (size_t)b * g->bs;
}

/* Combines blocks [b0, b1) of our partials with tmp, piece by piece around
 * our own block (which lives apart, in the receive buffer). */
static void combine_blocks(braid_task_t *task, const halving_t *g, int b0,
                           int b1, int mine_is_lower)
{
    const int r = task->rank;
    int       cut[4] = {b0, r < b0 ? b0 : (r > b1 ? b1 : r),
                        r + 1 < b0 ? b0 : (r + 1 > b1 ? b1 : r + 1), b1};

    for (int i = 0; i < 3; i++) {
        int         x = cut[i], y = cut[i + 1];
        size_t      cnt;
        const char *m, *o;

        if (y <= x) {
            continue;
        }
        cnt = (size_t)(y - x) * task->count;
        m   = mine(task, g, x);
        o   = g->tmp + (size_t)x * g->bs;
        if (mine_is_lower) {
            braid_p2p_combine(task, accp(task, g, x), m, o, cnt);
        } else {
            braid_p2p_combine(task, accp(task, g, x), o, m, cnt);
        }
    }
}

/* Splits the window for the current mask. */
static void plan_step(halving_t *g)
{
    int mid = g->vlo + g->mask, klo, khi, slo, shi;

    if (g->vrank < mid) {
        klo = g->vlo, khi = mid, slo = mid, shi = g->vhi;
    } else {
        klo = mid, khi = g->vhi, slo = g->vlo, shi = mid;
    }
    g->keep_lo = vstart(g, klo);
    g->keep_hi = vstart(g, khi);
    g->send_lo = vstart(g, slo);
    g->send_hi = vstart(g, shi);
    g->vlo     = klo;
    g->vhi     = khi;
}

static braid_status_t post(braid_task_t *task, halving_t *g)
{
    const int      me = task->rank, n = task->size;
    const size_t   all = (size_t)n * g->bs;
    braid_status_t st;
    int            peer;

    switch (g->stage) {
    case ST_FOLD_IN:
        return braid_p2p_recv(task, me - 1, 0, g->tmp, all, &g->reqs[0]);
    case ST_HALVE:
        peer = real_rank(g, g->vrank ^ g->mask);
        st   = braid_p2p_recv(task, peer, 1 + g->step,
                              g->tmp + (size_t)g->keep_lo * g->bs,
                              (size_t)(g->keep_hi - g->keep_lo) * g->bs,
                              &g->reqs[0]);
        if (st == BRAID_OK) {
            st = braid_p2p_send(task, peer, 1 + g->step,
                                mine(task, g, g->send_lo),
                                (size_t)(g->send_hi - g->send_lo) * g->bs,
                                &g->reqs[1]);
        }
        return st;
    case ST_FOLD_OUT:
        return braid_p2p_send(task, me - 1, 1 + g->step,
                              accp(task, g, me - 1), g->bs, &g->reqs[0]);
    case ST_IDLE_SEND:
        return braid_p2p_send(task, me + 1, 0, task->sendbuf, all,
                              &g->reqs[0]);
    case ST_IDLE_RECV:
        /* Only now: in place, the buffer was being sent until this point. */
        return braid_p2p_recv(task, me + 1, 1 + braid_p2p_log2_ceil(g->p),
                              task->recvbuf, g->bs, &g->reqs[0]);
    default:
        return BRAID_OK;
    }
}

static void finish_avg(braid_task_t *task, void *block)
{
    task->svc->finish_avg(block, task->count, task->dtype, task->op,
                          task->size);
}

static void complete(braid_task_t *task, halving_t *g)
{
    const int folded = task->rank < 2 * g->rem;

    switch (g->stage) {
    case ST_INIT:
        if (task->count == 0) {
            g->stage = ST_DONE;
        } else if (task->size == 1) {
            braid_p2p_copy(task, task->recvbuf, task->sendbuf, task->count);
            task->svc->finish_avg(task->recvbuf, task->count, task->dtype,
                                  task->op, 1);
            g->stage = ST_DONE;
        } else if (folded && task->rank % 2 == 0) {
            g->stage = ST_IDLE_SEND;
        } else {
            g->stage = folded ? ST_FOLD_IN : ST_HALVE;
            if (!folded) {
                plan_step(g);
            }
        }
        break;
    case ST_FOLD_IN:
        combine_blocks(task, g, 0, task->size, 0);
        g->have_acc = 1;
        g->stage    = ST_HALVE;
        plan_step(g);
        break;
    case ST_HALVE:
        combine_blocks(task, g, g->keep_lo, g->keep_hi,
                       g->vrank < (g->vrank ^ g->mask));
        g->have_acc = 1;
        g->step++;
        g->mask /= 2;
        if (g->mask > 0) {
            plan_step(g);
            break;
        }
        finish_avg(task, task->recvbuf);
        if (folded) {
            finish_avg(task, accp(task, g, task->rank - 1));
            g->stage = ST_FOLD_OUT;
        } else {
            g->stage = ST_DONE;
        }
        break;
    case ST_IDLE_SEND:
        g->stage = ST_IDLE_RECV;
        break;
    default:
        g->stage = ST_DONE;
        break;
    }
}

static braid_status_t start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    const int      n = task->size;
    halving_t     *g;
    braid_status_t st;

    st = braid_p2p_priv_alloc(task, sizeof(halving_t));
    if (st != BRAID_OK) {
        return st;
    }
    g       = task->priv;
    g->p    = braid_p2p_pow2_floor(n);
    g->rem  = n - g->p;
    g->mask = g->p / 2;
    g->vlo  = 0;
    g->vhi  = g->p;
    g->bs   = task->count * task->dtsize;
    if (task->rank < 2 * g->rem) {
        g->vrank = task->rank % 2 ? task->rank / 2 : -1;
    } else {
        g->vrank = task->rank - g->rem;
    }
    if (g->vrank >= 0 && n > 1) {
        st = braid_p2p_scratch_get(&g->scratch, task, 2 * (size_t)n * g->bs);
        g->acc = g->scratch.ptr;
        g->tmp = g->scratch.ptr ? g->scratch.ptr + (size_t)n * g->bs : NULL;
    }
    if (st != BRAID_OK) {
        braid_p2p_priv_free(task);
    }
    return st;
}

static braid_status_t progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait = BRAID_WAIT_PEER; /* only its requests are ever left */
    halving_t     *g = task->priv;
    braid_status_t st;

    for (;;) {
        st = braid_p2p_reqs_test(task, g->reqs, 2);
        if (st != BRAID_OK) {
            return st;
        }
        complete(task, g);
        if (g->stage == ST_DONE) {
            return BRAID_OK;
        }
        st = post(task, g);
        if (st != BRAID_OK) {
            return st;
        }
    }
}

static void finish(braid_task_t *task)
{
    halving_t *g = task->priv;

    if (g != NULL) {
        /* Requests an error left active may still use tmp: first withdraw
         * them. */
        braid_p2p_reqs_cancel(task, g->reqs, 2);
        braid_p2p_scratch_put(&g->scratch, task);
        braid_p2p_priv_free(task);
    }
}

const braid_algo_t braid_p2p_reduce_scatter_recdbl = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "recdbl",
    .coll            = BRAID_COLL_REDUCE_SCATTER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_reduce_scatter_recdbl,
    .start           = start,
    .progress        = progress,
    .finish          = finish,
    .comm_state_free = braid_p2p_comm_state_free,
};
