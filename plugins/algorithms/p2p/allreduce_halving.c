/* allreduce "halving": Rabenseifner's schedule, folded in rank order.
 *
 * Rabenseifner (allreduce_rabenseifner.c) reduces as it halves: the value
 * of an element is a tree of partial sums, (x0 + x2) + (x1 + x3) on four
 * ranks, whose last bit differs from the left fold ((x0 + x1) + x2) + x3
 * that the rank-order algorithms compute.  So on more than two ranks the
 * core never lets it stand in for them, nor them for it (online trials,
 * tuning rows: plugin.h, BRAID_ALGO_RANK_ORDER), even where its
 * 2·log2(p) exchanges with one partner each beat them.
 *
 * This algorithm keeps the exchanges and carries the contributions
 * unreduced: in halving step s a rank sends, for the half of its window it
 * gives away, the data of every rank whose contribution it holds (its own
 * and those received so far, 2^s virtual ranks), one message each; the
 * partner does the same.  After log2(p) steps the rank holds block v of
 * every rank's input and folds them in rank order; recursive doubling then
 * gathers the blocks, as in Rabenseifner's.  The price is bytes: (n/p)·m/2
 * a halving step against m/2^(s+1) -- on 4 ranks m against 3/4 m -- which
 * is why it has a cap: it is a latency algorithm.  Ranks beyond the power
 * of two hand their input to the next rank unreduced and get the result
 * back, as in Rabenseifner's plan (rabenseifner_plan.c), whose peers,
 * ranges and phases this algorithm reuses.
 *
 * Every phase posts all its messages at once (at most n each way),
 * receives first (a posted receive saves the transport's unexpected
 * copy), and waits for them: the messages of a step are few and, under the
 * cap, short, so there is nothing to pipeline. */
#include <string.h>

#include "rabenseifner.h"

typedef struct halving {
    braid_p2p_head_t     head; /* first: its requests are reqs */
    braid_p2p_rab_plan_t plan;
    int                  cur, p, rem, steps, v, local_done;
    size_t               dts;
    char                *next;    /* scratch not yet handed out */
    braid_treq_t        *reqs;    /* [2n]: sends, then receives */
    const char         **from;    /* [n]: where rank c's contribution is */
    size_t              *lo;      /* [n]: the element from[c] starts at */
    int                 *members; /* [n]: group()'s output */
} halving_t;

#define HALVING_ALIGN(x) (((x) + 63) & ~(size_t)63)

/* The real ranks of the 2^s virtual ranks whose contributions virtual rank
 * u holds at the start of halving step s, in increasing order, into out;
 * returns how many.  After the steps before s, u holds those that differ
 * from it only in the bits those steps exchanged across (p/2 ... p/2^s);
 * a virtual rank below rem stands for two real ranks. */
static int group(const halving_t *g, int u, int s, int *out)
{
    int done = (g->p - 1) ^ ((g->p >> s) - 1), k = 0;
    for (int w = 0; w < g->p; w++) {
        if (((w ^ u) & ~done) != 0)
            continue;
        if (w < g->rem)
            out[k++] = 2 * w;
        out[k++] = braid_p2p_rab_real_rank(w, g->rem);
    }
    return k;
}

static long tag_of(const braid_task_t *task, int id, int c)
{
    return (long)id * task->size + c;
}

/* The halving step s a phase of the plan is, or -1: ids 1 .. steps are the
 * halving steps, 0 the fold-in, the others doubling and fold-out. */
static int halving_step(const halving_t *g, const braid_p2p_rab_phase_t *ph)
{
    return ph->id >= 1 && ph->id <= g->steps ? ph->id - 1 : -1;
}

/* Scratch for a phase's receives, handed out in order. */
static char *take(halving_t *g, size_t count)
{
    char *p = g->next;
    g->next += HALVING_ALIGN(count * g->dts);
    return p;
}

static braid_status_t post_send(braid_task_t *task, halving_t *g, int *ns,
                                int peer, long tag, const void *buf,
                                size_t count)
{
    if (count == 0)
        return BRAID_OK;
    return braid_p2p_send(task, peer, tag, buf, count * g->dts,
                          &g->reqs[(*ns)++]);
}

static braid_status_t post_recv(braid_task_t *task, halving_t *g, int *nr,
                                int peer, long tag, void *buf, size_t count)
{
    if (count == 0)
        return BRAID_OK;
    return braid_p2p_recv(task, peer, tag, buf, count * g->dts,
                          &g->reqs[task->size + (*nr)++]);
}

/* Posts every message of the current phase. */
static braid_status_t post(braid_task_t *task, halving_t *g)
{
    const braid_p2p_rab_phase_t *ph = &g->plan.ph[g->cur];
    int                          n = task->size, ns = 0, nr = 0;
    int                          s  = halving_step(g, ph);
    braid_status_t               st = BRAID_OK;

    memset(g->reqs, 0, 2 * (size_t)n * sizeof(*g->reqs));
    if (s < 0) {
        /* Fold-in, fold-out and doubling move one range each way, whole:
         * a fold-in's input unreduced into scratch, the rest the result. */
        const char *src = ph->from_send ? task->sendbuf : task->recvbuf;
        if (ph->recv_peer >= 0) {
            char *into = (char *)task->recvbuf + ph->recv_lo * g->dts;
            if (ph->id == 0) {
                into                   = take(g, ph->recv_len);
                g->from[ph->recv_peer] = into;
                g->lo[ph->recv_peer]   = 0;
            }
            st = post_recv(task, g, &nr, ph->recv_peer,
                           tag_of(task, ph->id, 0), into, ph->recv_len);
        }
        if (st == BRAID_OK && ph->send_peer >= 0)
            st =
                post_send(task, g, &ns, ph->send_peer, tag_of(task, ph->id, 0),
                          src + ph->send_lo * g->dts, ph->send_len);
        return st;
    }
    /* Halving step s: every contribution this rank holds, for the half it
     * gives away; every one the partner holds, for the half it keeps. */
    int pv = g->v ^ (g->p >> (s + 1));
    int k  = group(g, pv, s, g->members);
    for (int i = 0; i < k && st == BRAID_OK; i++) {
        int c      = g->members[i];
        g->from[c] = take(g, ph->recv_len);
        g->lo[c]   = ph->recv_lo;
        st = post_recv(task, g, &nr, ph->recv_peer, tag_of(task, ph->id, c),
                       (char *)g->from[c], ph->recv_len);
    }
    k = group(g, g->v, s, g->members);
    for (int i = 0; i < k && st == BRAID_OK; i++) {
        int c = g->members[i];
        st    = post_send(task, g, &ns, ph->send_peer, tag_of(task, ph->id, c),
                          g->from[c] + (ph->send_lo - g->lo[c]) * g->dts,
                          ph->send_len);
    }
    return st;
}

/* After the last halving step: block v of every rank's input is here; the
 * left fold in rank order goes to the block's place in recvbuf. */
static void fold(braid_task_t *task, halving_t *g)
{
    size_t bo  = braid_chunk_off(task->count, g->p, g->v);
    size_t bl  = braid_chunk_len(task->count, g->p, g->v);
    char  *dst = (char *)task->recvbuf + bo * g->dts;
    if (bl == 0)
        return;
    if (task->sendbuf == task->recvbuf) { /* this rank's block is dst */
        char *mine = take(g, bl);
        memcpy(mine, dst, bl * g->dts);
        g->from[task->rank] = mine;
        g->lo[task->rank]   = bo;
    }
#define AT(c) (g->from[c] + (bo - g->lo[c]) * g->dts)
    task->svc->reduce2(dst, AT(0), AT(1), bl, task->dtype, task->op);
    for (int c = 2; c < task->size; c++)
        task->svc->reduce(dst, AT(c), bl, task->dtype, task->op);
#undef AT
    task->svc->finish_avg(dst, bl, task->dtype, task->op, task->size);
}

/* Scratch: the fold-in's input, then every halving step's receives, then
 * this rank's block when the call is in place. */
static size_t scratch_bytes(const braid_task_t *task, halving_t *g)
{
    size_t bytes = 0;
    for (int k = 0; k < g->plan.nphases; k++) {
        const braid_p2p_rab_phase_t *ph = &g->plan.ph[k];
        int                          s  = halving_step(g, ph);
        if (ph->id == 0 && ph->recv_peer >= 0)
            bytes += HALVING_ALIGN(ph->recv_len * g->dts);
        if (s >= 0 && ph->recv_len > 0)
            bytes +=
                (size_t)group(g, g->v ^ (g->p >> (s + 1)), s, g->members) *
                HALVING_ALIGN(ph->recv_len * g->dts);
    }
    return bytes +
           HALVING_ALIGN(braid_chunk_len(task->count, g->p, 0) * g->dts);
}

static braid_status_t halving_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    int    n   = task->size;
    size_t off = HALVING_ALIGN(sizeof(halving_t));
    size_t fo  = off + HALVING_ALIGN(2 * (size_t)n * sizeof(braid_treq_t));
    size_t lo  = fo + HALVING_ALIGN((size_t)n * sizeof(char *));
    size_t mo  = lo + HALVING_ALIGN((size_t)n * sizeof(size_t));
    size_t len = task->count * task->dtsize;
    if (len > BRAID_P2P_HALVING_MAX_BYTES)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "p2p halving: %zu bytes a rank, above its cap "
                                "of %zu (it carries every input unreduced)",
                                len, (size_t)BRAID_P2P_HALVING_MAX_BYTES);
    if (!braid_p2p_halving_tags_fit(n))
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "p2p halving: %d ranks need more tags than "
                                "a call has",
                                n);
    braid_status_t st =
        braid_p2p_state(task, mo + (size_t)n * sizeof(int), off, 2 * n);
    if (st != BRAID_OK)
        return st;
    halving_t *g = task->priv;
    g->reqs      = (braid_treq_t *)(void *)((char *)g + off);
    g->from      = (const char **)(void *)((char *)g + fo);
    g->lo        = (size_t *)(void *)((char *)g + lo);
    g->members   = (int *)(void *)((char *)g + mo);
    g->dts       = task->dtsize;
    g->p         = braid_p2p_pow2_floor(n);
    g->rem       = n - g->p;
    g->steps     = braid_p2p_log2_ceil(g->p);
    g->v         = braid_p2p_rab_vrank(task->rank, g->rem);
    /* Whole ranges, one message each: segments as large as the cap. */
    if (braid_p2p_rab_plan(&g->plan, n, task->rank, task->count, task->dtsize,
                           BRAID_P2P_HALVING_MAX_BYTES) < 0)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "p2p halving: %d ranks need more phases "
                                "than its plan holds",
                                n);
    g->from[task->rank] = task->sendbuf;
    g->lo[task->rank]   = 0;
    st = braid_p2p_scratch(task, scratch_bytes(task, g), &g->next);
    if (st != BRAID_OK || g->plan.nphases == 0)
        return st;
    return post(task, g);
}

static braid_status_t halving_progress(braid_task_t *task, braid_wait_t *wait)
{
    *wait        = BRAID_WAIT_PEER; /* only its requests are ever left */
    halving_t *g = task->priv;
    if (g->plan.nphases == 0) { /* one rank, or nothing to move */
        if (!g->local_done)
            braid_p2p_local(task);
        g->local_done = 1;
        return BRAID_OK;
    }
    for (;;) {
        braid_status_t st = braid_p2p_test(task);
        if (st != BRAID_OK)
            return st;
        const braid_p2p_rab_phase_t *ph = &g->plan.ph[g->cur];
        if (g->v >= 0 && halving_step(g, ph) == g->steps - 1)
            fold(task, g);
        if (++g->cur == g->plan.nphases)
            return BRAID_OK;
        if ((st = post(task, g)) != BRAID_OK)
            return st;
    }
}

const braid_algo_t braid_p2p_allreduce_halving = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_RANK_ORDER, /* fold() */
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "halving",
    .coll            = BRAID_COLL_ALLREDUCE,
    .needs_caps      = BRAID_CAP_SENDRECV,
    .transport       = NULL,
    .estimate        = braid_p2p_cost_allreduce_halving,
    .start           = halving_start,
    .progress        = halving_progress,
    .finish          = braid_p2p_finish,
    .comm_state_free = NULL,
};
