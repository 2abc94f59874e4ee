/* allgather "recdbl": log-depth allgather, straight into the receive buffer.
 *
 * Power-of-two sizes use recursive doubling: at step i a rank and its
 * partner r ^ 2^i swap the 2^i blocks their aligned groups hold.  Other sizes
 * use Bruck's scheme without its final rotation: before step i rank r holds
 * blocks r .. r+2^i-1 (mod n); it sends the first min(2^i, n-2^i) of them to
 * r-2^i and receives as many, starting at block r+2^i, from r+2^i.  A range
 * that wraps past block n-1 travels as two messages, split at the same point
 * on both sides.  Blocks are only copied, so every rank ends identical. */
#include "algo_common.h"

typedef struct bruck {
    braid_p2p_head_t head; /* first (algo_common.h) */
    int              started;
    int              pow2;
    int              nsteps;
    int              posted; /* steps posted so far */
    size_t           bs;     /* block bytes */
    braid_treq_t     reqs[4];
} bruck_t;

static char *block(braid_task_t *task, const bruck_t *g, int b)
{
    return (char *)task->recvbuf + (size_t)b * g->bs;
}

static braid_status_t post_doubling(braid_task_t *task, bruck_t *g, int i)
{
    const int      width   = 1 << i;
    const int      partner = task->rank ^ width;
    const int      mine    = task->rank & ~(width - 1);
    const int      theirs  = partner & ~(width - 1);
    const size_t   len     = (size_t)width * g->bs;
    braid_status_t st;

    st = braid_p2p_recv(task, partner, i, block(task, g, theirs), len,
                        &g->reqs[0]);
    if (st == BRAID_OK) {
        st = braid_p2p_send(task, partner, i, block(task, g, mine), len,
                            &g->reqs[1]);
    }
    return st;
}

/* Posts the (at most two) pieces of blocks [first, first+cnt) mod n. */
static braid_status_t post_range(braid_task_t *task, bruck_t *g, int i,
                                 int peer, int first, int cnt, int is_send)
{
    const int      n            = task->size;
    int            len1         = first + cnt <= n ? cnt : n - first;
    int            pieces[2][2] = {{first, len1}, {0, cnt - len1}};
    braid_status_t st           = BRAID_OK;

    for (int k = 0; k < 2 && st == BRAID_OK; k++) {
        braid_treq_t *req = &g->reqs[2 * is_send + k];
        char         *buf = block(task, g, pieces[k][0]);
        size_t        len = (size_t)pieces[k][1] * g->bs;

        if (pieces[k][1] == 0) {
            continue;
        }
        st = is_send ? braid_p2p_send(task, peer, 2L * i + k, buf, len, req)
                     : braid_p2p_recv(task, peer, 2L * i + k, buf, len, req);
    }
    return st;
}

static braid_status_t post_bruck(braid_task_t *task, bruck_t *g, int i)
{
    const int      n = task->size, r = task->rank;
    const int      dist = 1 << i;
    const int      cnt  = dist < n - dist ? dist : n - dist;
    braid_status_t st;

    st = post_range(task, g, i, braid_p2p_mod(r + dist, n),
                    braid_p2p_mod(r + dist, n), cnt, 0);
    if (st == BRAID_OK) {
        st = post_range(task, g, i, braid_p2p_mod(r - dist, n), r, cnt, 1);
    }
    return st;
}

static braid_status_t start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    bruck_t       *g;
    braid_status_t st;

    st = BRAID_P2P_STATE(task, bruck_t, reqs);
    if (st != BRAID_OK) {
        return st;
    }
    g         = task->priv;
    g->pow2   = (task->size & (task->size - 1)) == 0;
    g->nsteps = task->count == 0 ? 0 : braid_p2p_log2_ceil(task->size);
    g->bs     = task->count * task->dtsize;
    return BRAID_OK;
}

static braid_status_t progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait            = BRAID_WAIT_PEER; /* only its requests are ever left */
    bruck_t       *g = task->priv;
    braid_status_t st;

    if (!g->started) {
        braid_p2p_copy(task, block(task, g, task->rank), task->sendbuf,
                       task->count);
        g->started = 1;
    }
    for (;;) {
        st = braid_p2p_test(task);
        if (st != BRAID_OK) {
            return st;
        }
        if (g->posted == g->nsteps) {
            return BRAID_OK;
        }
        st = g->pow2 ? post_doubling(task, g, g->posted)
                     : post_bruck(task, g, g->posted);
        g->posted++;
        if (st != BRAID_OK) {
            return st;
        }
    }
}

const braid_algo_t braid_p2p_allgather_recdbl = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "recdbl",
    .coll            = BRAID_COLL_ALLGATHER,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_allgather_recdbl,
    .start           = start,
    .progress        = progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
