/* allreduce "recdbl": recursive doubling on whole buffers.
 *
 * With p the largest power of two <= n and rem = n - p, the first 2*rem
 * ranks pair up: even rank 2i hands its input to 2i+1 and sits out, so p
 * ranks remain (virtual rank v is real rank 2v+1 for v < rem, v+rem above).
 * Those exchange with v ^ 2^i for i < log2(p) and combine as
 * (lower rank's data) op (higher rank's data), so both partners compute
 * identical bits at every step and all end equal.  The idle ranks then get
 * the finished result back.  Latency-bound: log2(p) (+2) messages of the
 * whole buffer; right for small messages. */
#include "algo_common.h"

enum {
    ST_INIT,
    ST_FOLD_IN,   /* odd rank < 2*rem: receive the even neighbour's input */
    ST_DOUBLE,    /* exchange with the partner of step i */
    ST_FOLD_OUT,  /* odd rank < 2*rem: return the result */
    ST_IDLE_SEND, /* even rank < 2*rem: hand over the input ... */
    ST_IDLE_RECV, /* ... and wait for the result */
    ST_DONE
};

typedef struct recdbl {
    int             stage;
    int             i, nsteps; /* doubling step, log2(p) */
    int             rem;
    int             vrank;     /* -1 while sitting out */
    size_t          bytes;
    const char     *cur;       /* this rank's partial result */
    char           *tmp;       /* the partner's partial result */
    braid_p2p_buf_t scratch;
    braid_treq_t    reqs[2];
} recdbl_t;

static int real_rank(const recdbl_t *g, int v)
{
    return v < g->rem ? 2 * v + 1 : v + g->rem;
}

static int partner_vrank(const recdbl_t *g)
{
    return g->vrank ^ (1 << g->i);
}

static braid_status_t post(braid_task_t *task, recdbl_t *g)
{
    const int      me = task->rank;
    braid_status_t st = BRAID_OK;
    int            peer;

    switch (g->stage) {
    case ST_FOLD_IN:
        return braid_p2p_recv(task, me - 1, 0, g->tmp, g->bytes, &g->reqs[0]);
    case ST_DOUBLE:
        peer = real_rank(g, partner_vrank(g));
        st = braid_p2p_recv(task, peer, 1 + g->i, g->tmp, g->bytes,
                            &g->reqs[0]);
        if (st == BRAID_OK) {
            st = braid_p2p_send(task, peer, 1 + g->i, g->cur, g->bytes,
                                &g->reqs[1]);
        }
        return st;
    case ST_FOLD_OUT:
        return braid_p2p_send(task, me - 1, 1 + g->nsteps, task->recvbuf,
                              g->bytes, &g->reqs[0]);
    case ST_IDLE_SEND:
        return braid_p2p_send(task, me + 1, 0, task->sendbuf, g->bytes,
                              &g->reqs[0]);
    case ST_IDLE_RECV:
        /* Only now: in place, the buffer was being sent until this point. */
        return braid_p2p_recv(task, me + 1, 1 + g->nsteps, task->recvbuf,
                              g->bytes, &g->reqs[0]);
    default:
        return BRAID_OK;
    }
}

/* Local work once the stage's messages are done; chooses the next stage. */
static void complete(braid_task_t *task, recdbl_t *g)
{
    char *dst      = task->recvbuf;
    int   folded   = task->rank < 2 * g->rem;
    int   next_out = folded ? ST_FOLD_OUT : ST_DONE;

    switch (g->stage) {
    case ST_INIT:
        if (task->count == 0) {
            g->stage = ST_DONE;
        } else if (task->size == 1) {
            braid_p2p_copy(task, dst, task->sendbuf, task->count);
            task->svc->finish_avg(dst, task->count, task->dtype, task->op, 1);
            g->stage = ST_DONE;
        } else if (folded && task->rank % 2 == 0) {
            g->stage = ST_IDLE_SEND;
        } else {
            g->stage = folded ? ST_FOLD_IN : ST_DOUBLE;
        }
        break;
    case ST_FOLD_IN:
        braid_p2p_combine(task, dst, g->tmp, g->cur, task->count);
        g->cur   = dst;
        g->stage = ST_DOUBLE;
        break;
    case ST_DOUBLE:
        if (g->vrank < partner_vrank(g)) {
            braid_p2p_combine(task, dst, g->cur, g->tmp, task->count);
        } else {
            braid_p2p_combine(task, dst, g->tmp, g->cur, task->count);
        }
        g->cur = dst;
        if (++g->i == g->nsteps) {
            task->svc->finish_avg(dst, task->count, task->dtype, task->op,
                                  task->size);
            g->stage = next_out;
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
    recdbl_t      *g;
    braid_status_t st;
    int            p;

    st = braid_p2p_priv_alloc(task, sizeof(recdbl_t));
    if (st != BRAID_OK) {
        return st;
    }
    g         = task->priv;
    p         = braid_p2p_pow2_floor(n);
    g->rem    = n - p;
    g->nsteps = braid_p2p_log2_ceil(p);
    g->bytes  = task->count * task->dtsize;
    g->cur    = task->sendbuf;
    if (task->rank < 2 * g->rem) {
        g->vrank = task->rank % 2 ? task->rank / 2 : -1;
    } else {
        g->vrank = task->rank - g->rem;
    }
    if (g->vrank >= 0 && n > 1) {
        st = braid_p2p_scratch_get(&g->scratch, task, g->bytes);
        g->tmp = g->scratch.ptr;
    }
    if (st != BRAID_OK) {
        braid_p2p_priv_free(task);
    }
    return st;
}

static braid_status_t progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait = BRAID_WAIT_PEER; /* only its requests are ever left */
    recdbl_t      *g = task->priv;
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
    recdbl_t *g = task->priv;

    if (g != NULL) {
        /* Requests an error left active may still use tmp: first withdraw
         * them. */
        braid_p2p_reqs_cancel(task, g->reqs, 2);
        braid_p2p_scratch_put(&g->scratch, task);
        braid_p2p_priv_free(task);
    }
}

const braid_algo_t braid_p2p_allreduce_recdbl = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "recdbl",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_allreduce_recdbl,
    .start           = start,
    .progress        = progress,
    .finish          = finish,
    .comm_state_free = braid_p2p_comm_state_free,
};
