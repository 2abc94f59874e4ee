/* Barriers.
 *
 * "ring": a token goes around twice.  The first lap (0 -> 1 -> ... -> n-1
 * -> 0) tells rank 0 that everyone has arrived; the second (0 -> ... ->
 * n-1) releases everyone.  2n-1 messages in sequence.
 *
 * "recdbl": dissemination.  In round k rank r signals r + 2^k and waits for
 * r - 2^k; after ceil(log2 n) rounds every rank has (transitively) heard
 * from all.  Works for any n, no folding needed.
 *
 * Tokens are one byte: a zero-length message is legal for UCX but not
 * necessarily for every transport these algorithms may run on. */
#include "algo_common.h"

typedef struct token_op {
    int  is_send;
    int  peer;
    long step;
} token_op_t;

typedef struct barrier {
    braid_p2p_head_t head;       /* first (algo_common.h) */
    int              nops, next; /* ring: sequential list of token moves */
    token_op_t       ops[4];
    int              rounds; /* recdbl */
    char             out, in;
    braid_treq_t     reqs[2];
} barrier_t;

static braid_status_t ring_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    const int      n = task->size, r = task->rank;
    const int      left = braid_p2p_mod(r - 1, n), right = (r + 1) % n;
    barrier_t     *g;
    braid_status_t st;

    st = BRAID_P2P_STATE(task, barrier_t, reqs);
    if (st != BRAID_OK || n == 1) {
        return st;
    }
    g = task->priv;
    if (r == 0) {
        g->ops[g->nops++] = (token_op_t){1, right, 0};
        g->ops[g->nops++] = (token_op_t){0, left, 0};
        g->ops[g->nops++] = (token_op_t){1, right, 1};
    } else {
        g->ops[g->nops++] = (token_op_t){0, left, 0};
        g->ops[g->nops++] = (token_op_t){1, right, 0};
        g->ops[g->nops++] = (token_op_t){0, left, 1};
        if (r != n - 1) {
            g->ops[g->nops++] = (token_op_t){1, right, 1};
        }
    }
    return BRAID_OK;
}

static braid_status_t ring_progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait            = BRAID_WAIT_PEER; /* only its requests are ever left */
    barrier_t     *g = task->priv;
    braid_status_t st;

    for (;;) {
        st = braid_p2p_req_test(task, &g->reqs[0]);
        if (st != BRAID_OK) {
            return st;
        }
        if (g->next == g->nops) {
            return BRAID_OK;
        }
        const token_op_t *op = &g->ops[g->next++];
        st = op->is_send ? braid_p2p_send(task, op->peer, op->step, &g->out, 1,
                                          &g->reqs[0])
                         : braid_p2p_recv(task, op->peer, op->step, &g->in, 1,
                                          &g->reqs[0]);
        if (st != BRAID_OK) {
            return st;
        }
    }
}

static braid_status_t recdbl_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    braid_status_t st = BRAID_P2P_STATE(task, barrier_t, reqs);

    if (st == BRAID_OK) {
        ((barrier_t *)task->priv)->rounds = braid_p2p_log2_ceil(task->size);
    }
    return st;
}

static braid_status_t recdbl_progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait            = BRAID_WAIT_PEER; /* only its requests are ever left */
    barrier_t     *g = task->priv;
    const int      n = task->size, r = task->rank;
    braid_status_t st;

    for (;;) {
        st = braid_p2p_test(task);
        if (st != BRAID_OK) {
            return st;
        }
        if (g->next == g->rounds) {
            return BRAID_OK;
        }
        const long dist = 1L << g->next;
        st = braid_p2p_recv(task, braid_p2p_mod(r - dist, n), g->next, &g->in,
                            1, &g->reqs[0]);
        if (st == BRAID_OK) {
            st = braid_p2p_send(task, braid_p2p_mod(r + dist, n), g->next,
                                &g->out, 1, &g->reqs[1]);
        }
        g->next++;
        if (st != BRAID_OK) {
            return st;
        }
    }
}

const braid_algo_t braid_p2p_barrier_ring = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "ring",
    .coll            = BRAID_COLL_BARRIER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_barrier_ring,
    .start           = ring_start,
    .progress        = ring_progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};

const braid_algo_t braid_p2p_barrier_recdbl = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "recdbl",
    .coll            = BRAID_COLL_BARRIER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_barrier_recdbl,
    .start           = recdbl_start,
    .progress        = recdbl_progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
