/* broadcast "recdbl": binomial tree rooted at root.
 *
 * With v = (rank - root) mod n, a non-root rank receives from v minus its
 * lowest set bit, then forwards to v + 2^j for every 2^j below that bit (the
 * root: below n), largest subtree first.  ceil(log2 n) rounds of the whole
 * message: the latency choice, where the pipelined chain wins on size. */
#include "algo_common.h"

#define MAX_CHILDREN 32

enum { ST_INIT, ST_RECV, ST_SEND, ST_DONE };

typedef struct binomial {
    braid_p2p_head_t head; /* first (algo_common.h) */
    int              stage;
    int              parent; /* real rank, -1 at the root */
    int              nchildren;
    int              children[MAX_CHILDREN];
    size_t           bytes;
    braid_treq_t     reqs[MAX_CHILDREN];
} binomial_t;

static braid_status_t start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    const int      n = task->size;
    binomial_t    *g;
    braid_status_t st;
    int            v, top;

    if (task->root < 0 || task->root >= n) {
        return task->svc->error(BRAID_ERR_INVALID_ARG,
                                "p2p recdbl broadcast: root %d out of range "
                                "[0, %d)",
                                task->root, n);
    }
    st = BRAID_P2P_STATE(task, binomial_t, reqs);
    if (st != BRAID_OK) {
        return st;
    }
    g        = task->priv;
    g->bytes = task->count * task->dtsize;
    v        = braid_p2p_mod(task->rank - task->root, n);
    if (v == 0) {
        g->parent = -1;
        top       = 1 << braid_p2p_log2_ceil(n);
    } else {
        top       = v & -v;
        g->parent = braid_p2p_mod(v - top + task->root, n);
    }
    for (int m = top / 2; m >= 1; m /= 2) {
        if (v + m < n) {
            g->children[g->nchildren++] = braid_p2p_mod(v + m + task->root, n);
        }
    }
    return BRAID_OK;
}

static braid_status_t progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait            = BRAID_WAIT_PEER; /* only its requests are ever left */
    binomial_t    *g = task->priv;
    braid_status_t st;

    for (;;) {
        st = braid_p2p_test(task);
        if (st != BRAID_OK) {
            return st;
        }
        switch (g->stage) {
        case ST_INIT:
            if (g->bytes == 0 || task->size == 1) {
                braid_p2p_copy(task, task->recvbuf, task->sendbuf,
                               task->count);
                return BRAID_OK;
            }
            g->stage = ST_RECV;
            if (g->parent < 0) {
                braid_p2p_copy(task, task->recvbuf, task->sendbuf,
                               task->count);
                break;
            }
            st = braid_p2p_recv(task, g->parent, 0, task->recvbuf, g->bytes,
                                &g->reqs[0]);
            break;
        case ST_RECV:
            g->stage = ST_SEND;
            for (int i = 0; i < g->nchildren && st == BRAID_OK; i++) {
                st = braid_p2p_send(task, g->children[i], 0, task->recvbuf,
                                    g->bytes, &g->reqs[i]);
            }
            break;
        default: return BRAID_OK;
        }
        if (st != BRAID_OK) {
            return st;
        }
    }
}

const braid_algo_t braid_p2p_bcast_recdbl = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "recdbl",
    .coll            = BRAID_COLL_BROADCAST,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_bcast_recdbl,
    .start           = start,
    .progress        = progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
