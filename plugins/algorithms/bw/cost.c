/* Alpha-beta-gamma cost model of the bw engines (microseconds).
 *
 * Notation as plugins/algorithms/p2p/cost.c: n ranks, m = in->bytes (per
 * rank: the all-reduce's buffer, reduce_scatter's recvcount, allgather's
 * sendcount, times the dtype size), and
 *     B(x) = x / (beta·1e3)    us to move x bytes at beta GB/s
 *     G(x) = x / (gamma·1e3)   us to reduce x bytes (in->reduce_gbps)
 * pull reads with the transport's get path (in->get_alpha_us, get_beta),
 * and raises its flags with put_signal (put_alpha); pipe moves everything
 * with put_signal (put_alpha, put_beta).  Every flag wave is one stage:
 * alpha plus in->stage_us (the scheduler hand-offs of a shared core).
 *
 * pull (pull.c), with C = BRAID_BW_PULL_CHUNK and R = BRAID_BW_PULL_MAX_GET:
 *   allreduce       3·a_put + 2(n-1)/n·Bget(m) + (n-1)/n·G(m)
 *                   + a_get·(n-1)·(ceil(m/(nC)) + ceil(m/(nR)))
 *     three waves (hello, progress, done); each owner reads n-1 pieces of
 *     its slice and folds them; every rank reads n-1 finished slices.
 *   reduce_scatter  2·a_put + (n-1)·Bget(m) + (n-1)·G(m)
 *                   + a_get·(n-1)·ceil(m/C)
 *   allgather       2·a_put + (n-1)·Bget(m) + a_get·(n-1)·ceil(m/R)
 * pipe (pipe.c), with C = BRAID_BW_PIPE_CHUNK, K = ceil(m/(nC)) chunks a
 * slice, each chunk of a slice one put per peer and stage, and
 * D = BRAID_BW_PIPE_DEPTH:
 *   allreduce       2·a_put·(1 + min(K, D) + K/D) + 2(n-1)/n·Bput(m)
 *                   + 2(n-1)/n·G(m)
 *     pieces out, fold, reduced chunks out, copy-out (a copy costs
 *     c = BRAID_COST_COPY_OVER_REDUCE of a fold: G(m) of the second is
 *     c·G(m)).  A chunk's reduced copy can go out only
 *     once all its pieces are in and folded, so until D chunks are in
 *     flight every chunk waits out both phases' flags in turn, a stage a
 *     chunk and phase (the pipeline filling: a message of few chunks is
 *     all fill, which is why twoshot, one stage a phase, beats pipe
 *     there); after that, every D chunks the writers wait for credit, a
 *     stage.
 *   reduce_scatter  a_put·(1 + K'/D) + (n-1)·Bput(m) + (n-1)·G(m),
 *                   K' = ceil(m/C)
 *   allgather       a_put·(1 + K'/D) + (n-1)·Bput(m) + (n-1)·c·G(m)
 *     one phase: a chunk waits for nothing but its own put, and a reader
 *     has n-1 writers' streams to take turns on, so there is no fill to
 *     wait out.
 *   With the shared AG ring (in->caps has BRAID_CAP_LOAD) the finished
 *   chunks go out once, not once per peer: all-reduce's second put term
 *   becomes Bput(m/n) (puts m·Bput in all) and allgather's Bput(m).
 * Messages: each chunk goes to n-1 peers (the shared AG ring: once), and
 * each put beyond the first of its wave costs o = in->link.put_msg_us more
 * (lowhop/cost.c): allreduce + 2·K·(n-2)·o (shared: K·(n-2)·o),
 * reduce_scatter + K'·(n-2)·o, allgather + K'·(n-2)·o (shared: none).
 * Bput for pipe: where the calibration measured the put path beyond the
 * caches (in->put_curve), half of each put's traffic runs at the curve's
 * figure for the call's working set (the caller's buffers) and half at its
 * in-cache figure (the slot, handed on while hot) -- unless pipe writes
 * its slots with streaming stores (an allgather, or a reduction whose
 * footprint() outgrows the last-level cache, with the shared rings of
 * BRAID_CAP_LOAD: pipe.c's wants_stream), when all of it runs at the
 * working set's figure.  Without that
 * measurement (BRAID_CALIBRATE=0, a declared link) the declared figure is
 * an in-cache one, so once the host's buffers (footprint(): every rank's
 * send and receive buffer) outgrow the last-level cache, pipe's two extra
 * copies per byte (into a slot, out of it) are taken to run at
 * BRAID_BW_DRAM_COPY_GBPS.  pull copies each byte once, straight from the
 * peer, and its get link is declared at the uncached rate already.
 * Both return -1 without a usable link (pull: without a get path). */
#include <math.h>

#include "bw.h"

typedef struct terms {
    int    n;
    double m;
    double ap, bp; /* put: us per stage, us per byte */
    double ag, bg; /* get: us per read, us per byte (0: no get path) */
    double gus;    /* us per byte reduced or copied */
    double pm;     /* put: us per message of a wave beyond its first */
} terms_t;

static int terms(terms_t *t, const braid_cost_in_t *in)
{
    if (in->nranks < 1 || !isfinite(in->link.put_alpha_us) ||
        !(in->link.put_alpha_us >= 0.0) || !isfinite(in->link.put_beta_gbps) ||
        !(in->link.put_beta_gbps > 0.0))
        return -1;
    t->n   = in->nranks;
    t->m   = (double)in->bytes;
    t->ap  = in->link.put_alpha_us + in->stage_us;
    t->bp  = 1.0 / (in->link.put_beta_gbps * 1e3);
    t->gus = in->reduce_gbps > 0.0 && isfinite(in->reduce_gbps)
                 ? 1.0 / (in->reduce_gbps * 1e3)
                 : 0.0;
    t->pm  = braid_cost_put_msg_us(in);
    t->ag = t->bg = 0.0;
    if (BRAID_HAS(in, braid_cost_in_t, get_beta_gbps) &&
        isfinite(in->get_beta_gbps) && in->get_beta_gbps > 0.0 &&
        isfinite(in->get_alpha_us) && in->get_alpha_us >= 0.0) {
        t->ag = in->get_alpha_us;
        t->bg = 1.0 / (in->get_beta_gbps * 1e3);
    }
    return 0;
}

static double pieces(double bytes, size_t per)
{
    return ceil(bytes / (double)per);
}

/* The stages of a stream of k chunks (top): fill: the two-phase
 * all-reduce's, where the first D chunks each wait their turn. */
static double pipe_stages(double k, int fill)
{
    double d = (double)BRAID_BW_PIPE_DEPTH;
    return 1.0 + (fill ? fmin(k, d) : 0.0) + k / d;
}

double braid_bw_cost_pull(const braid_cost_in_t *in)
{
    terms_t t;
    if (terms(&t, in) < 0 || t.bg <= 0.0)
        return -1.0;
    if (t.n == 1)
        return 0.0;
    double f = (double)(t.n - 1) / t.n, k = t.n - 1.0;
    switch (in->coll) {
    case BRAID_COLL_ALLREDUCE:
        return 3.0 * t.ap + 2.0 * f * t.m * t.bg + f * t.m * t.gus +
               t.ag * k *
                   (pieces(t.m / t.n, BRAID_BW_PULL_CHUNK) +
                    pieces(t.m / t.n, BRAID_BW_PULL_MAX_GET));
    case BRAID_COLL_REDUCE_SCATTER:
        return 2.0 * t.ap + k * t.m * (t.bg + t.gus) +
               t.ag * k * pieces(t.m, BRAID_BW_PULL_CHUNK);
    case BRAID_COLL_ALLGATHER:
        return 2.0 * t.ap + k * t.m * t.bg +
               t.ag * k * pieces(t.m, BRAID_BW_PULL_MAX_GET);
    default: return -1.0;
    }
}

/* Bytes of all ranks' send and receive buffers on one host. */
static double footprint(const braid_cost_in_t *in, double n, double m)
{
    return in->coll == BRAID_COLL_ALLREDUCE ? 2.0 * n * m : n * (n + 1.0) * m;
}

double braid_bw_cost_pipe(const braid_cost_in_t *in)
{
    terms_t t;
    if (terms(&t, in) < 0)
        return -1.0;
    if (t.n == 1)
        return 0.0;
    int measured = BRAID_HAS(in, braid_cost_in_t, call_ws) &&
                   in->put_curve.out_gbps > 0.0 && in->call_ws > 0.0;
    int shared = BRAID_HAS(in, braid_cost_in_t, caps) &&
                 (in->caps & BRAID_CAP_LOAD) != 0;
    /* slots written to memory, not handed on hot */
    int streamed =
        shared && braid_bw_pipe_streams(in->coll, t.n, in->ppn, t.m);
    if (measured && !streamed) {
        /* Every put has one end in the caller's buffers, at the call's
         * working set, and the other in a slot that the next copy reads
         * while it is still in the cache (the curve's in-cache point, at
         * any working set below it): half its traffic at each figure.
         * Streamed, both ends are at the working set's figure. */
        double hot = 1.0 / (braid_cost_put_gbps_at(in, 0.0) * 1e3);
        t.bp       = 0.5 * (t.bp + hot);
    } else if (!measured &&
               footprint(in, t.n, t.m) > (double)BRAID_BW_CACHE_BYTES) {
        t.bp = fmax(t.bp, 1.0 / (BRAID_BW_DRAM_COPY_GBPS * 1e3));
    }
    double f = (double)(t.n - 1) / t.n, k = t.n - 1.0;
    /* Each chunk goes to n-1 peers (the shared AG ring: once): n-2
     * messages more than the one its wave is charged for. */
    double more = (t.n - 2.0) * t.pm;
    double ks = pieces(t.m / t.n, BRAID_BW_PIPE_CHUNK); /* a slice */
    double kb = pieces(t.m, BRAID_BW_PIPE_CHUNK);       /* a block */
    switch (in->coll) {
    case BRAID_COLL_ALLREDUCE:
        return 2.0 * t.ap * pipe_stages(ks, 1) + (shared ? 1.0 : 2.0) * ks * more +
               (shared ? 1.0 : 2.0 * f) * t.m * t.bp +
               (1.0 + BRAID_COST_COPY_OVER_REDUCE) * f * t.m * t.gus;
    case BRAID_COLL_REDUCE_SCATTER:
        return t.ap * pipe_stages(kb, 0) + kb * more + k * t.m * (t.bp + t.gus);
    case BRAID_COLL_ALLGATHER:
        return t.ap * pipe_stages(kb, 0) + (shared ? 0.0 : kb * more) +
               (shared ? 1.0 : k) * t.m * t.bp +
               k * t.m * t.gus * BRAID_COST_COPY_OVER_REDUCE;
    default: return -1.0;
    }
}
