/* Pipelined ring engine.
 *
 * The buffer is cut into n chunks (one per rank) and every chunk into nseg
 * segments.  Step s of the ring moves chunk c_send(s) to the right neighbour
 * and chunk c_recv(s) in from the left one; a (step, segment) pair is a
 * "unit", numbered u = s * nseg + k, and is also the message's tag step.
 * Units are handled in order, but up to WINDOW receives and WINDOW sends are
 * in flight at once and a unit's send only waits for the same segment of the
 * previous step: segment k of step s+1 travels while segment k+1 of step s is
 * still arriving and being reduced.  That is the pipelining that lets large
 * messages overlap communication with reduction.
 *
 * Chunk schedule (all indices mod n):
 *   allreduce, reduce_scatter: c_send(s) = r-s-1, c_recv(s) = r-s-2.  After
 *     the n-1 reduce-scatter steps rank r holds chunk r fully reduced; the
 *     allgather steps s = n-1 .. 2n-3 keep the same formulas and pass the
 *     finished chunks around.
 *   allgather: c_send(s) = r-s, c_recv(s) = r-s-1, steps 0 .. n-2.
 *   broadcast: one chunk; a chain root, root+1, ..., root+n-1.
 * Each chunk is reduced along one chain of ranks, finished (AVG) by its
 * owner and then only copied, so every rank ends with the same bits.
 *
 * Buffers: reduce-scatter receives land in WINDOW segment slots of scratch
 * and are reduced into the accumulator: the receive buffer itself for
 * allreduce (its chunk c_recv(s) is not read again before it is sent at
 * s+1), or for reduce_scatter, whose output is one chunk, two chunk-sized
 * accumulators used alternately by steps.  Allgather receives land in place.
 * The dependencies that keep this safe are in the *_ready() checks. */
#include <string.h>

#include "ring.h"

#define WINDOW 4

typedef struct ring {
    braid_p2p_head_t      head; /* first (algo_common.h) */
    braid_p2p_ring_mode_t mode;
    int                   n, rank, left, right;
    int                   vpos; /* broadcast: position in the chain */
    size_t                dts;
    size_t                count; /* allreduce: total; others: per chunk */
    size_t                seg;   /* elements per segment */
    long                  nseg;  /* segments per chunk */
    long                  nunits;
    long                  recvs_posted, processed, sends_posted, sends_done;
    int                   started;
    const char           *src;
    char                 *dst;
    char                 *slots; /* WINDOW * seg elements */
    char                 *acc;   /* reduce_scatter: 2 * count elements */
    braid_treq_t          reqs[2 * WINDOW]; /* receives, then sends */
} ring_t;

#define RREQ(g, u) (&(g)->reqs[(u) % WINDOW])
#define SREQ(g, u) (&(g)->reqs[WINDOW + (u) % WINDOW])

/* ------------------------------------------------------------ geometry */

static int is_reducing(const ring_t *g)
{
    return g->mode == BRAID_P2P_RING_ALLREDUCE ||
           g->mode == BRAID_P2P_RING_REDUCE_SCATTER;
}

static size_t chunk_off(const ring_t *g, int c)
{
    switch (g->mode) {
    case BRAID_P2P_RING_ALLREDUCE: return braid_chunk_off(g->count, g->n, c);
    case BRAID_P2P_RING_BCAST: return 0;
    default: return (size_t)c * g->count;
    }
}

static size_t chunk_len(const ring_t *g, int c)
{
    if (g->mode == BRAID_P2P_RING_ALLREDUCE) {
        return braid_chunk_len(g->count, g->n, c);
    }
    return g->count;
}

static int c_send(const ring_t *g, long s)
{
    if (g->mode == BRAID_P2P_RING_BCAST) {
        return 0;
    }
    return braid_p2p_mod(g->rank - s - (is_reducing(g) ? 1 : 0), g->n);
}

static int c_recv(const ring_t *g, long s)
{
    if (g->mode == BRAID_P2P_RING_BCAST) {
        return 0;
    }
    return braid_p2p_mod(g->rank - s - (is_reducing(g) ? 2 : 1), g->n);
}

/* Segment k of chunk c: first element (absolute) and length. */
static void segment(size_t *off, size_t *len, const ring_t *g, int c, long k)
{
    size_t clen  = chunk_len(g, c);
    size_t first = (size_t)k * g->seg;

    *off = chunk_off(g, c) + first;
    *len = first >= clen ? 0 : (clen - first < g->seg ? clen - first : g->seg);
}

/* Last step of the reduce-scatter phase: its reduction is final. */
static long last_rs_step(const ring_t *g) { return g->n - 2; }

/* ------------------------------------------------------------ readiness */

static int send_ready(const ring_t *g, long u)
{
    if (g->mode == BRAID_P2P_RING_BCAST) {
        return g->vpos == 0 || g->processed > u;
    }
    /* No further ahead of this rank's own receives than two windows: the
     * right neighbour, which runs about as far as this rank, has posted
     * receives for a window of them, and a send beyond that would reach it
     * as an unexpected message, a buffer and a copy more (a whole step of
     * them when a neighbour falls behind on a shared core). */
    if (u >= g->processed + 2 * WINDOW)
        return 0;
    /* Step s+1 forwards what step s received (and reduced). */
    return u < g->nseg || g->processed > u - g->nseg;
}

static int recv_ready(const ring_t *g, long u)
{
    /* Allreduce's allgather phase receives into the receive buffer, which
     * the reduce-scatter send of the same segment, n-1 steps earlier, may
     * still be reading. */
    if (g->mode == BRAID_P2P_RING_ALLREDUCE && u / g->nseg > last_rs_step(g)) {
        return g->sends_done > u - (g->n - 1) * g->nseg;
    }
    return 1;
}

static int process_ready(const ring_t *g, long u)
{
    /* reduce_scatter's accumulator of step s was last read by the send of
     * step s-1, same segment. */
    if (g->mode == BRAID_P2P_RING_REDUCE_SCATTER && u / g->nseg >= 2) {
        return g->sends_done > u - g->nseg;
    }
    return 1;
}

/* ------------------------------------------------------------- actions */

static char *acc_seg(const ring_t *g, long s, long k)
{
    return g->acc + ((size_t)(s % 2) * g->count + (size_t)k * g->seg) * g->dts;
}

static char *slot(const ring_t *g, long u)
{
    return g->slots + (size_t)(u % WINDOW) * g->seg * g->dts;
}

static braid_status_t post_send(braid_task_t *task, ring_t *g, long u)
{
    long          s = u / g->nseg, k = u % g->nseg;
    braid_treq_t *req = SREQ(g, u);
    const char   *buf;
    size_t        off, len;

    memset(req, 0, sizeof(*req));
    if (g->mode == BRAID_P2P_RING_BCAST && g->vpos == g->n - 1) {
        return BRAID_OK; /* end of the chain */
    }
    segment(&off, &len, g, c_send(g, s), k);
    if (len == 0) {
        return BRAID_OK; /* both sides know the segment is empty */
    }
    switch (g->mode) {
    case BRAID_P2P_RING_ALLREDUCE:
        buf = (s == 0 ? g->src : g->dst) + off * g->dts;
        break;
    case BRAID_P2P_RING_REDUCE_SCATTER:
        buf = s == 0 ? g->src + off * g->dts : acc_seg(g, s - 1, k);
        break;
    case BRAID_P2P_RING_ALLGATHER:
        buf = s == 0 ? g->src + (size_t)k * g->seg * g->dts
                     : g->dst + off * g->dts;
        break;
    default: buf = (g->vpos == 0 ? g->src : g->dst) + off * g->dts; break;
    }
    return braid_p2p_send(task, g->right, u, buf, len * g->dts, req);
}

static braid_status_t post_recv(braid_task_t *task, ring_t *g, long u)
{
    long          s = u / g->nseg, k = u % g->nseg;
    braid_treq_t *req = RREQ(g, u);
    char         *buf;
    size_t        off, len;

    memset(req, 0, sizeof(*req));
    if (g->mode == BRAID_P2P_RING_BCAST && g->vpos == 0) {
        return BRAID_OK; /* the root has the data */
    }
    segment(&off, &len, g, c_recv(g, s), k);
    if (len == 0) {
        return BRAID_OK;
    }
    if (g->mode == BRAID_P2P_RING_REDUCE_SCATTER ||
        (g->mode == BRAID_P2P_RING_ALLREDUCE && s <= last_rs_step(g))) {
        buf = slot(g, u);
    } else {
        buf = g->dst + off * g->dts;
    }
    return braid_p2p_recv(task, g->left, u, buf, len * g->dts, req);
}

/* Reduces a received reduce-scatter segment into its accumulator; the last
 * step's result is final and is finished (AVG) by its owner only. */
static void process(braid_task_t *task, ring_t *g, long u)
{
    long   s = u / g->nseg, k = u % g->nseg;
    int    c = c_recv(g, s);
    size_t off, len;
    char  *d;

    if (!is_reducing(g) || s > last_rs_step(g)) {
        return;
    }
    segment(&off, &len, g, c, k);
    if (len == 0) {
        return;
    }
    if (g->mode == BRAID_P2P_RING_ALLREDUCE) {
        d = g->dst + off * g->dts;
    } else if (s == last_rs_step(g)) {
        d = g->dst + (size_t)k * g->seg * g->dts; /* output is chunk r only */
    } else {
        d = acc_seg(g, s, k);
    }
    braid_p2p_combine(task, d, slot(g, u), g->src + off * g->dts, len);
    if (s == last_rs_step(g)) {
        task->svc->finish_avg(d, len, task->dtype, task->op, g->n);
    }
}

/* Work that needs no peer: the single-rank case and own blocks. */
static void local_part(braid_task_t *task, ring_t *g)
{
    switch (g->mode) {
    case BRAID_P2P_RING_ALLREDUCE:
    case BRAID_P2P_RING_REDUCE_SCATTER:
        if (g->n == 1) {
            braid_p2p_copy(task, g->dst, g->src, g->count);
            if (g->count > 0) {
                task->svc->finish_avg(g->dst, g->count, task->dtype, task->op,
                                      1);
            }
        }
        break;
    case BRAID_P2P_RING_ALLGATHER:
        braid_p2p_copy(task, g->dst + (size_t)g->rank * g->count * g->dts,
                       g->src, g->count);
        break;
    default:
        if (g->vpos == 0) {
            braid_p2p_copy(task, g->dst, g->src, g->count);
        }
        break;
    }
}

/* ------------------------------------------------------------- interface */

braid_status_t braid_p2p_ring_start(braid_task_t         *task,
                                    braid_p2p_ring_mode_t mode)
{
    const int      n = task->size;
    ring_t        *g;
    long           steps;
    size_t         chunk_max, slots_bytes = 0, acc_bytes = 0;
    braid_status_t st;

    if (task->dtsize == 0 || (mode == BRAID_P2P_RING_BCAST &&
                              (task->root < 0 || task->root >= n))) {
        return task->svc->error(BRAID_ERR_INVALID_ARG,
                                "p2p ring: invalid dtype or root %d",
                                task->root);
    }
    st = BRAID_P2P_STATE(task, ring_t, reqs);
    if (st != BRAID_OK) {
        return st;
    }
    g        = task->priv;
    g->mode  = mode;
    g->n     = n;
    g->rank  = task->rank;
    g->left  = braid_p2p_mod(task->rank - 1, n);
    g->right = braid_p2p_mod(task->rank + 1, n);
    g->vpos  = braid_p2p_mod(task->rank - task->root, n);
    g->dts   = task->dtsize;
    g->count = task->count;
    g->src   = task->sendbuf;
    g->dst   = task->recvbuf;

    switch (mode) {
    case BRAID_P2P_RING_ALLREDUCE:
        steps     = 2L * (n - 1);
        chunk_max = braid_chunk_len(g->count, n, 0);
        break;
    case BRAID_P2P_RING_BCAST:
        steps     = n > 1 ? 1 : 0;
        chunk_max = g->count;
        break;
    default:
        steps     = n - 1;
        chunk_max = g->count;
        break;
    }
    g->seg = BRAID_P2P_SEG_BYTES / g->dts ? BRAID_P2P_SEG_BYTES / g->dts : 1;
    if (steps > 0 && chunk_max > 0) {
        g->nseg = (long)((chunk_max + g->seg - 1) / g->seg);
        if (steps * g->nseg > BRAID_P2P_MAX_STEPS) {
            /* Keep every unit's tag distinct: fewer, larger segments. */
            long most = BRAID_P2P_MAX_STEPS / steps;
            if (most == 0) {
                return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                        "p2p ring: %d ranks need more than "
                                        "%ld tags per call",
                                        n, BRAID_P2P_MAX_STEPS);
            }
            g->seg  = (chunk_max + (size_t)most - 1) / (size_t)most;
            g->nseg = (long)((chunk_max + g->seg - 1) / g->seg);
        }
        g->nunits = steps * g->nseg;
    }

    if (g->nunits > 0 && is_reducing(g)) {
        slots_bytes = WINDOW * g->seg * g->dts;
        if (mode == BRAID_P2P_RING_REDUCE_SCATTER && n > 2) {
            acc_bytes = 2 * g->count * g->dts;
        }
    }
    /* On error finish() gives the state back. */
    st     = braid_p2p_scratch(task, slots_bytes + acc_bytes, &g->slots);
    g->acc = g->slots != NULL ? g->slots + slots_bytes : NULL;
    return st;
}

braid_status_t braid_p2p_ring_progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait            = BRAID_WAIT_PEER; /* only its requests are ever left */
    ring_t        *g = task->priv;
    braid_status_t st;
    int            moved;

    if (!g->started) {
        local_part(task, g);
        g->started = 1;
    }
    do {
        moved = 0;
        while (g->sends_done < g->sends_posted) {
            st = braid_p2p_req_test(task, SREQ(g, g->sends_done));
            if (st != BRAID_OK) {
                if (st < 0) {
                    return st;
                }
                break;
            }
            g->sends_done++;
            moved = 1;
        }
        while (g->processed < g->recvs_posted &&
               process_ready(g, g->processed)) {
            st = braid_p2p_req_test(task, RREQ(g, g->processed));
            if (st != BRAID_OK) {
                if (st < 0) {
                    return st;
                }
                break;
            }
            process(task, g, g->processed);
            g->processed++;
            moved = 1;
        }
        /* Receives first: a posted receive saves the unexpected-message
         * copy when the matching send arrives. */
        while (g->recvs_posted < g->nunits &&
               g->recvs_posted - g->processed < WINDOW &&
               recv_ready(g, g->recvs_posted)) {
            st = post_recv(task, g, g->recvs_posted);
            if (st != BRAID_OK) {
                return st;
            }
            g->recvs_posted++;
            moved = 1;
        }
        while (g->sends_posted < g->nunits &&
               g->sends_posted - g->sends_done < WINDOW &&
               send_ready(g, g->sends_posted)) {
            st = post_send(task, g, g->sends_posted);
            if (st != BRAID_OK) {
                return st;
            }
            g->sends_posted++;
            moved = 1;
        }
    } while (moved);

    if (g->processed == g->nunits && g->sends_done == g->nunits) {
        return BRAID_OK;
    }
    return BRAID_INPROGRESS;
}
