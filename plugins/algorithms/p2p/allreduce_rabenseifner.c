/* allreduce "rabenseifner": recursive-halving reduce-scatter, then
 * recursive-doubling allgather (Rabenseifner's algorithm), every exchange
 * pipelined in segments.
 *
 * The schedule (braid_p2p_rab_plan, below): log2(p) halving steps, each
 * exchanging half of the current window with the partner 2^k virtual
 * ranks away and reducing the half it keeps, then log2(p) doubling steps
 * that send the owned window and receive the partner's; ranks beyond the
 * power of two fold in before and out after.  2·log2(p) latencies against
 * the ring's 2(n-1), and the same 2(p-1)/p·m bytes.
 *
 * Pipelining.  Each phase's ranges are cut into segments, each its own
 * message: up to BRAID_P2P_RAB_WINDOW receives land in scratch slots while
 * earlier segments are being reduced, and as many sends are in flight, so
 * the reduction of one segment overlaps the transfer of the next (what
 * matters across hosts, where the NIC moves data while the CPU reduces).
 * Phases follow one another.
 *
 * Every block's final value is computed by one rank, by a fixed tree of
 * (lower rank's partial) op (higher rank's partial); the others copy it:
 * bitwise identical everywhere. */
#include <string.h>

#include "rabenseifner.h"

/* ----------------------------------------------------------- the call */

#define W BRAID_P2P_RAB_WINDOW

typedef struct rab {
    braid_p2p_head_t     head; /* first: its requests are reqs */
    braid_p2p_rab_plan_t plan;
    int                  cur; /* phase running */
    long                 nsend, nrecv, s_posted, s_done, r_posted, r_done;
    int                  local_done;
    size_t               dts;
    char                *slots;       /* W segments (the head's scratch) */
    braid_treq_t         reqs[2 * W]; /* sends [0, W), receives [W, 2W) */
} rab_t;

static const braid_p2p_rab_phase_t *phase(const rab_t *g)
{
    return &g->plan.ph[g->cur];
}

/* Segment k of a range: first element and length. */
static void seg_of(const rab_t *g, size_t lo, size_t len, long k,
                   size_t *first, size_t *cnt)
{
    size_t off = (size_t)k * g->plan.seg;
    *first     = lo + off;
    *cnt       = len - off < g->plan.seg ? len - off : g->plan.seg;
}

static long tag_of(const rab_t *g, long k)
{
    return (long)phase(g)->id * g->plan.maxseg + k;
}

static void enter_phase(rab_t *g)
{
    const braid_p2p_rab_phase_t *ph = phase(g);
    g->nsend                        = ph->send_peer >= 0
                                          ? (long)braid_p2p_rab_nseg(&g->plan, ph->send_len)
                                          : 0;
    g->nrecv                        = ph->recv_peer >= 0
                                          ? (long)braid_p2p_rab_nseg(&g->plan, ph->recv_len)
                                          : 0;
    g->s_posted = g->s_done = g->r_posted = g->r_done = 0;
}

static braid_status_t post_send(braid_task_t *task, rab_t *g)
{
    const braid_p2p_rab_phase_t *ph = phase(g);
    size_t                       first, cnt;
    long                         k = g->s_posted;
    seg_of(g, ph->send_lo, ph->send_len, k, &first, &cnt);
    const char   *base = ph->from_send ? (const char *)task->sendbuf
                                       : (const char *)task->recvbuf;
    braid_treq_t *req  = &g->reqs[k % W];
    memset(req, 0, sizeof(*req));
    return braid_p2p_send(task, ph->send_peer, tag_of(g, k),
                          base + first * g->dts, cnt * g->dts, req);
}

static braid_status_t post_recv(braid_task_t *task, rab_t *g)
{
    const braid_p2p_rab_phase_t *ph = phase(g);
    size_t                       first, cnt;
    long                         k = g->r_posted;
    seg_of(g, ph->recv_lo, ph->recv_len, k, &first, &cnt);
    char *into = ph->reduce ? g->slots + (size_t)(k % W) * g->plan.seg * g->dts
                            : (char *)task->recvbuf + first * g->dts;
    braid_treq_t *req = &g->reqs[W + k % W];
    memset(req, 0, sizeof(*req));
    return braid_p2p_recv(task, ph->recv_peer, tag_of(g, k), into,
                          cnt * g->dts, req);
}

/* A received segment: combined with this rank's data into recvbuf. */
static void process(braid_task_t *task, rab_t *g, long k)
{
    const braid_p2p_rab_phase_t *ph = phase(g);
    if (!ph->reduce)
        return;
    size_t first, cnt;
    seg_of(g, ph->recv_lo, ph->recv_len, k, &first, &cnt);
    const char *theirs = g->slots + (size_t)(k % W) * g->plan.seg * g->dts;
    const char *mine   = (ph->from_send ? (const char *)task->sendbuf
                                        : (const char *)task->recvbuf) +
                       first * g->dts;
    char *dst = (char *)task->recvbuf + first * g->dts;
    if (ph->mine_lower)
        braid_p2p_combine(task, dst, mine, theirs, cnt);
    else
        braid_p2p_combine(task, dst, theirs, mine, cnt);
}

static braid_status_t rab_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    braid_status_t st = BRAID_P2P_STATE(task, rab_t, reqs);
    if (st != BRAID_OK)
        return st;
    rab_t *g = task->priv;
    g->dts   = task->dtsize;
    if (braid_p2p_rab_plan(&g->plan, task->size, task->rank, task->count,
                           task->dtsize, BRAID_P2P_RAB_SEG_BYTES) < 0)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "p2p rabenseifner: "
                                "%d ranks need more phases than its tags "
                                "hold",
                                task->size);
    int reduces = 0;
    for (int i = 0; i < g->plan.nphases; i++)
        reduces |= g->plan.ph[i].reduce;
    st = braid_p2p_scratch(task, reduces ? W * g->plan.seg * g->dts : 0,
                           &g->slots);
    if (st != BRAID_OK)
        return st;
    if (g->plan.nphases > 0)
        enter_phase(g);
    return BRAID_OK;
}

static braid_status_t rab_progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait            = BRAID_WAIT_PEER; /* only its requests are ever left */
    rab_t         *g = task->priv;
    braid_status_t st;
    int            moved;

    if (g->plan.nphases == 0) { /* one rank, or nothing to move */
        if (!g->local_done)
            braid_p2p_local(task);
        g->local_done = 1;
        return BRAID_OK;
    }
    do {
        moved = 0;
        while (g->s_done < g->s_posted) {
            st = braid_p2p_req_test(task, &g->reqs[g->s_done % W]);
            if (st != BRAID_OK) {
                if (st < 0)
                    return st;
                break;
            }
            g->s_done++;
            moved = 1;
        }
        while (g->r_done < g->r_posted) {
            st = braid_p2p_req_test(task, &g->reqs[W + g->r_done % W]);
            if (st != BRAID_OK) {
                if (st < 0)
                    return st;
                break;
            }
            process(task, g, g->r_done);
            g->r_done++;
            moved = 1;
        }
        /* Receives first: a posted receive saves the unexpected copy. */
        while (g->r_posted < g->nrecv && g->r_posted - g->r_done < W) {
            if ((st = post_recv(task, g)) != BRAID_OK)
                return st;
            g->r_posted++;
            moved = 1;
        }
        while (g->s_posted < g->nsend && g->s_posted - g->s_done < W) {
            if ((st = post_send(task, g)) != BRAID_OK)
                return st;
            g->s_posted++;
            moved = 1;
        }
        if (g->s_done == g->nsend && g->r_done == g->nrecv) {
            const braid_p2p_rab_phase_t *ph = phase(g);
            if (ph->avg_len > 0)
                task->svc->finish_avg(
                    (char *)task->recvbuf + ph->avg_lo * g->dts, ph->avg_len,
                    task->dtype, task->op, task->size);
            if (++g->cur == g->plan.nphases)
                return BRAID_OK;
            enter_phase(g);
            moved = 1;
        }
    } while (moved);
    return BRAID_INPROGRESS;
}

const braid_algo_t braid_p2p_allreduce_rabenseifner = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_CORE_REDUCE, /* braid_p2p_combine */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "rabenseifner",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_allreduce_rabenseifner,
    .start           = rab_start,
    .progress        = rab_progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
