/* The composites: which steps each collective takes on which level, and
 * what the cost model says they cost.
 *
 * k ranks on each of N hosts, n = kN; a rank sits at (host h, position j);
 * m is the call's per-rank size (braid_cost_in_t.bytes).
 *
 *   allreduce       host reduce_scatter, rail allreduce, host allgather:
 *                   position j of each host ends the first step with chunk
 *                   j of its host's sum, its rail sums that chunk over the
 *                   hosts, and every host gathers the k chunks.  A chunk is
 *                   reduced by the same chain of calls whatever rank looks
 *                   at it, then only copied: every rank has the same bits.
 *                   A count that k does not divide is padded in scratch.
 *                   A large call is cut into pieces, run one after another,
 *                   when the model finds that cheaper (a piece's host steps
 *                   then fit a one-stage algorithm's cap).
 *   broadcast       the root's rail broadcasts from the root's host, then
 *                   every host broadcasts from the root's position.
 *   allgather       rail j gathers the blocks of position j, each host
 *                   gathers its rails' N blocks, and the k N blocks are put
 *                   in rank order.
 *   reduce_scatter  the blocks are put in (position, host) order, each host
 *                   reduces N blocks per position, and rail j reduces them
 *                   over the hosts, one block each.
 *
 * The estimate is the sum of the steps' estimates, each step by the
 * candidate its level's cost model picks (the one it then runs): the host
 * level over its own transport, the rail level over the network with the
 * host's link shared by the k rails that use it at once (one rail alone
 * for broadcast), and for allgather and reduce_scatter the reordering copy
 * of n m bytes.  AVG runs as SUM and is divided once, by n, where the sum
 * is complete. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "util/log.h"

/* Pieces of an allreduce are never smaller than this: below it every step's
 * latency outweighs anything a smaller host step saves. */
#define MIN_PIECE_BYTES ((size_t)64 << 10)
#define MAX_PIECES      1024

static const uint32_t host_mem = BRAID_MEM_BIT(BRAID_MEM_HOST);

/* One step as the estimate sees it. */
typedef struct step_cost {
    const braid_level_t    *lvl;
    const braid_selector_t *sel;
    braid_coll_t            coll;
    size_t                  bytes;
} step_cost_t;

/* The steps of a collective for a per-rank size of bytes (an allreduce
 * piece): their number. */
static int steps_of(step_cost_t *s, const braid_hier_t *h, braid_coll_t coll,
                    size_t bytes)
{
    const braid_level_t *host = &h->host_lvl, *rail = &h->rail;
    size_t               chunk = (bytes + (size_t)h->k - 1) / (size_t)h->k;
    size_t               all   = bytes * (size_t)h->nhosts;
    switch (coll) {
    case BRAID_COLL_ALLREDUCE:
        s[0] =
            (step_cost_t){host, &host->sel, BRAID_COLL_REDUCE_SCATTER, chunk};
        s[1] = (step_cost_t){rail, &rail->sel, BRAID_COLL_ALLREDUCE, chunk};
        s[2] = (step_cost_t){host, &host->sel, BRAID_COLL_ALLGATHER, chunk};
        return 3;
    case BRAID_COLL_BROADCAST:
        s[0] = (step_cost_t){rail, &rail->sel_alone, coll, bytes};
        s[1] = (step_cost_t){host, &host->sel, coll, bytes};
        return 2;
    case BRAID_COLL_ALLGATHER:
        s[0] = (step_cost_t){rail, &rail->sel, coll, bytes};
        s[1] = (step_cost_t){host, &host->sel, coll, all};
        return 2;
    case BRAID_COLL_REDUCE_SCATTER:
        s[0] = (step_cost_t){host, &host->sel, coll, all};
        s[1] = (step_cost_t){rail, &rail->sel, coll, bytes};
        return 2;
    default: return 0;
    }
}

/* Sum of the steps' estimates for one piece of bytes; -1 when a step has
 * no candidate. */
static double piece_cost(const braid_hier_t *h, braid_coll_t coll,
                         size_t bytes)
{
    step_cost_t s[BRAID_HIER_MAX_STEPS];
    int         n   = steps_of(s, h, coll, bytes);
    double      sum = 0.0, est;
    for (int i = 0; i < n; i++) {
        if (braid_select_cheapest(s[i].sel, s[i].coll, s[i].bytes, host_mem,
                                  &est) < 0)
            return -1.0;
        sum += est;
    }
    return n > 0 ? sum : -1.0;
}

int braid_hier_pieces(const braid_hier_t *h, braid_coll_t coll, size_t bytes)
{
    if (coll != BRAID_COLL_ALLREDUCE)
        return 1;
    int    best   = 1;
    double best_t = piece_cost(h, coll, bytes);
    for (int p = 2; p <= MAX_PIECES && bytes / (size_t)p >= MIN_PIECE_BYTES;
         p *= 2) {
        double t = piece_cost(h, coll, (bytes + (size_t)p - 1) / (size_t)p);
        if (t >= 0 && (best_t < 0 || p * t < best_t)) {
            best   = p;
            best_t = p * t;
        }
    }
    return best;
}

static double estimate(const braid_algo_t *self, const braid_cost_in_t *in)
{
    const braid_hier_t *h = in->comm_state;
    if (h == NULL || in->mem != BRAID_MEM_HOST || in->bytes == 0)
        return -1.0;
    /* The steps handle bytes x ranks at once (reordering, the host step of
     * an allgather): sizes where that overflows are not callable anyway. */
    if (in->bytes > SIZE_MAX / 2 / (size_t)h->nranks)
        return -1.0;
    int    p = braid_hier_pieces(h, self->coll, in->bytes);
    double t =
        piece_cost(h, self->coll, (in->bytes + (size_t)p - 1) / (size_t)p);
    if (t < 0)
        return -1.0;
    t *= p;
    /* allgather and reduce_scatter reorder n blocks of m through scratch. */
    if ((self->coll == BRAID_COLL_ALLGATHER ||
         self->coll == BRAID_COLL_REDUCE_SCATTER) &&
        in->reduce_gbps > 0)
        t += (double)in->bytes * h->nranks / (in->reduce_gbps * 1e3);
    return t;
}

int braid_hier_describe(const braid_candidate_t *c, braid_coll_t coll,
                        size_t bytes, char *buf, size_t len)
{
    if (c->algo != braid_hier_algo(coll) || c->comm_state == NULL)
        return 0;
    const braid_hier_t *h = c->comm_state;
    step_cost_t         s[BRAID_HIER_MAX_STEPS];
    int                 p = braid_hier_pieces(h, coll, bytes);
    int    n = steps_of(s, h, coll, (bytes + (size_t)p - 1) / (size_t)p);
    size_t o = 0;
    buf[0]   = '\0';
    for (int i = 0; i < n && o < len; i++) {
        double est;
        int    idx = braid_select_cheapest(s[i].sel, s[i].coll, s[i].bytes,
                                           host_mem, &est);
        int w = idx < 0 ? snprintf(buf + o, len - o, "%s%s %s: no candidate",
                                   i ? " + " : "", s[i].lvl->name,
                                   braid_coll_name(s[i].coll))
                        : snprintf(buf + o, len - o, "%s%s %s %s %.2f us",
                                   i ? " + " : "", s[i].lvl->name,
                                   braid_coll_name(s[i].coll),
                                   s[i].sel->cands[idx].name, est);
        if (w < 0)
            return 1;
        o += (size_t)w;
    }
    if (o < len && p > 1)
        o += (size_t)snprintf(buf + o, len - o, ", in %d pieces", p);
    if (o < len &&
        (coll == BRAID_COLL_ALLGATHER || coll == BRAID_COLL_REDUCE_SCATTER))
        snprintf(buf + o, len - o, " + reordering");
    return 1;
}

/* --------------------------------------------------------------- plans */

static braid_hier_step_t step(braid_level_t *lvl, braid_selector_t *sel,
                              braid_coll_t coll, const void *sendbuf,
                              void *recvbuf, size_t count, int root)
{
    return (braid_hier_step_t){lvl, sel, coll, sendbuf, recvbuf, count, root};
}

static braid_status_t no_memory(const braid_task_t *call, size_t bytes)
{
    return braid_error(BRAID_ERR_NO_MEMORY,
                       "hier: %s: out of memory for "
                       "%zu bytes of scratch",
                       braid_coll_name(call->coll), bytes);
}

static braid_status_t plan_allreduce(braid_hier_t *h, const braid_task_t *call)
{
    braid_hier_run_t *r   = &h->run;
    size_t            dts = call->dtsize;
    size_t            off = (size_t)r->piece * r->piece_count;
    size_t      cnt = call->count - off < r->piece_count ? call->count - off
                                                         : r->piece_count;
    size_t      b   = (cnt + (size_t)h->k - 1) / (size_t)h->k; /* chunk */
    size_t      all = b * (size_t)h->k;
    const char *in  = (const char *)call->sendbuf + off * dts;
    char       *out = (char *)call->recvbuf + off * dts;
    if (all != cnt) {
        char *pad = braid_hier_scratch(h, all * dts);
        if (pad == NULL)
            return no_memory(call, all * dts);
        memcpy(pad, in, cnt * dts);
        memset(pad + cnt * dts, 0, (all - cnt) * dts);
        in = out = pad;
    }
    char *chunk = out + (size_t)h->local * b * dts;
    r->out      = out;
    r->steps[0] = step(&h->host_lvl, &h->host_lvl.sel,
                       BRAID_COLL_REDUCE_SCATTER, in, chunk, b, 0);
    r->steps[1] =
        step(&h->rail, &h->rail.sel, BRAID_COLL_ALLREDUCE, chunk, chunk, b, 0);
    r->steps[2] = step(&h->host_lvl, &h->host_lvl.sel, BRAID_COLL_ALLGATHER,
                       chunk, out, b, 0);
    r->nsteps   = 3;
    return BRAID_OK;
}

static braid_status_t plan_broadcast(braid_hier_t *h, const braid_task_t *call)
{
    braid_hier_run_t *r  = &h->run;
    int               at = 0;
    while (h->rank_at[at] != call->root)
        at++;
    int   root_host = at / h->k, root_local = at % h->k;
    void *buf = call->recvbuf;
    r->steps[0] =
        h->local == root_local
            ? step(&h->rail, &h->rail.sel_alone, BRAID_COLL_BROADCAST, buf,
                   buf, call->count, root_host)
            : step(NULL, NULL, BRAID_COLL_BROADCAST, NULL, NULL, 0, 0);
    r->steps[1] = step(&h->host_lvl, &h->host_lvl.sel, BRAID_COLL_BROADCAST,
                       buf, buf, call->count, root_local);
    r->nsteps   = 2;
    return BRAID_OK;
}

/* Block (position j, host g) of the (position, host)-ordered scratch. */
static char *block(const braid_hier_t *h, char *base, int j, int g,
                   size_t block_bytes)
{
    return base + ((size_t)j * (size_t)h->nhosts + (size_t)g) * block_bytes;
}

static braid_status_t plan_allgather(braid_hier_t *h, const braid_task_t *call)
{
    braid_hier_run_t *r     = &h->run;
    size_t            bytes = call->count * call->dtsize;
    char             *s     = braid_hier_scratch(h, bytes * (size_t)h->nranks);
    if (s == NULL)
        return no_memory(call, bytes * (size_t)h->nranks);
    char *mine  = block(h, s, h->local, 0, bytes);
    r->out      = s;
    r->steps[0] = step(&h->rail, &h->rail.sel, BRAID_COLL_ALLGATHER,
                       call->sendbuf, mine, call->count, 0);
    r->steps[1] = step(&h->host_lvl, &h->host_lvl.sel, BRAID_COLL_ALLGATHER,
                       mine, s, call->count * (size_t)h->nhosts, 0);
    r->nsteps   = 2;
    return BRAID_OK;
}

static braid_status_t plan_reduce_scatter(braid_hier_t       *h,
                                          const braid_task_t *call)
{
    braid_hier_run_t *r     = &h->run;
    size_t            bytes = call->count * call->dtsize;
    char             *s     = braid_hier_scratch(h, bytes * (size_t)h->nranks);
    if (s == NULL)
        return no_memory(call, bytes * (size_t)h->nranks);
    for (int j = 0; j < h->k; j++)
        for (int g = 0; g < h->nhosts; g++)
            memcpy(block(h, s, j, g, bytes),
                   (const char *)call->sendbuf +
                       (size_t)h->rank_at[g * h->k + j] * bytes,
                   bytes);
    char *mine = block(h, s, h->local, 0, bytes);
    r->steps[0] =
        step(&h->host_lvl, &h->host_lvl.sel, BRAID_COLL_REDUCE_SCATTER, s,
             mine, call->count * (size_t)h->nhosts, 0);
    r->steps[1] = step(&h->rail, &h->rail.sel, BRAID_COLL_REDUCE_SCATTER, mine,
                       call->recvbuf, call->count, 0);
    r->nsteps   = 2;
    return BRAID_OK;
}

braid_status_t braid_hier_plan(braid_hier_t *h, const braid_task_t *call)
{
    switch (call->coll) {
    case BRAID_COLL_ALLREDUCE: return plan_allreduce(h, call);
    case BRAID_COLL_BROADCAST: return plan_broadcast(h, call);
    case BRAID_COLL_ALLGATHER: return plan_allgather(h, call);
    case BRAID_COLL_REDUCE_SCATTER: return plan_reduce_scatter(h, call);
    default:
        return braid_error(BRAID_ERR_NOT_SUPPORTED,
                           "hier: no composite "
                           "for %s",
                           braid_coll_name(call->coll));
    }
}

void braid_hier_after_step(braid_hier_t *h, const braid_task_t *call, int s)
{
    const braid_hier_step_t *st = &h->run.steps[s];
    /* The sum is complete after the rail step: the allreduce's chunk, the
     * reduce_scatter's block. */
    if (call->op == BRAID_AVG && st->lvl == &h->rail &&
        (call->coll == BRAID_COLL_ALLREDUCE ||
         call->coll == BRAID_COLL_REDUCE_SCATTER))
        call->svc->finish_avg(st->recvbuf, st->count, call->dtype, call->op,
                              h->nranks);
}

void braid_hier_piece_done(braid_hier_t *h, const braid_task_t *call)
{
    braid_hier_run_t *r = &h->run;
    if (call->coll == BRAID_COLL_ALLREDUCE) {
        size_t off = (size_t)r->piece * r->piece_count;
        char  *dst = (char *)call->recvbuf + off * call->dtsize;
        size_t cnt = call->count - off < r->piece_count ? call->count - off
                                                        : r->piece_count;
        if (r->out != dst)
            memcpy(dst, r->out, cnt * call->dtsize);
    } else if (call->coll == BRAID_COLL_ALLGATHER) {
        size_t bytes = call->count * call->dtsize;
        for (int j = 0; j < h->k; j++)
            for (int g = 0; g < h->nhosts; g++)
                memcpy((char *)call->recvbuf +
                           (size_t)h->rank_at[g * h->k + j] * bytes,
                       block(h, r->out, j, g, bytes), bytes);
    }
}

/* ---------------------------------------------------------- composites */

/* Not a plugin's: nothing reads their flags, and the core frees what they
 * keep (comm_state_free NULL). */
#define COMPOSITE(c)                                                          \
    {                                                                         \
        .struct_size = sizeof(braid_algo_t),                                  \
        .mem_types = BRAID_MEM_BIT(BRAID_MEM_HOST), .name = BRAID_HIER_NAME,  \
        .coll = (c), .estimate = estimate, .start = braid_hier_start,         \
        .progress = braid_hier_progress, .finish = braid_hier_finish,         \
    }

static const braid_algo_t composites[] = {
    COMPOSITE(BRAID_COLL_ALLREDUCE),
    COMPOSITE(BRAID_COLL_REDUCE_SCATTER),
    COMPOSITE(BRAID_COLL_ALLGATHER),
    COMPOSITE(BRAID_COLL_BROADCAST),
};

const braid_algo_t *braid_hier_algo(braid_coll_t coll)
{
    for (size_t i = 0; i < sizeof(composites) / sizeof(composites[0]); i++)
        if (composites[i].coll == coll)
            return &composites[i];
    return NULL;
}
