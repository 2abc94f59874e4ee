/* Alpha-beta-gamma cost model of the p2p plugin's algorithms.
 *
 * Notation: n ranks, m = in->bytes (the per-rank size defined by
 * braid_cost_in_t), alpha = in->link.alpha_us (us per message), and
 *   B(x) = x / (beta * 1e3)    us to move x bytes at beta GB/s
 *   G(x) = x / (gamma * 1e3)   us to reduce x bytes at gamma GB/s
 * since 1 GB/s = 1e9 B/s = 1e3 B/us.  p = largest power of two <= n,
 * L = log2(p), rem = n - p, C = ceil(log2 n).
 *
 * Several hosts: a message to a partner on another host crosses the
 * network, and messages sent at once share its links.  The recursive
 * doubling and halving algorithms exchange with partners 2^k ranks away in
 * step k, all ranks at once, so their B terms are multiplied by the load of
 * the busiest link in that step (link_load): ranks sit host by host, ppn per
 * host; behind a switch the ppn ranks of a host share its link; on a ring
 * of hosts (BRAID_TOPO_RING: full-duplex links, shortest way round, half
 * way round clockwise, as braidrun --netns routes) a partner d hosts away
 * is d links away and each link carries the streams of the d hosts before
 * it.  The ring algorithms only talk to neighbours in rank order, one link
 * away on either topology, and need no such factor.
 *
 * Every function is a pure function of *in, so all ranks agree.  They return
 * -1 (cannot run) for a broken link description, 0 for a single rank (no
 * messages; the local copy is not worth modelling), and, for the ring, when
 * n exceeds what BRAID_TAG's 16 step bits can name. */
#include <math.h>

#include "rabenseifner.h"

#define RING_SEG_BYTES ((double)BRAID_P2P_SEG_BYTES)

typedef struct terms {
    int    n;
    double m, alpha;
    double bus; /* us per byte on the link */
    double gus; /* us per byte of reduction (0: unknown, not counted) */
} terms_t;

/* 0 when usable, -1 when the inputs describe no usable link. */
static int terms(terms_t *t, const braid_cost_in_t *in)
{
    if (in->nranks < 1 || !(in->link.alpha_us >= 0.0) ||
        !isfinite(in->link.alpha_us) || !(in->link.beta_gbps > 0.0) ||
        !isfinite(in->link.beta_gbps)) {
        return -1;
    }
    t->n     = in->nranks;
    t->m     = (double)in->bytes;
    t->alpha = in->link.alpha_us + in->stage_us;
    t->bus   = 1.0 / (in->link.beta_gbps * 1e3);
    /* No reduction throughput known: compare on communication alone. */
    t->gus = in->reduce_gbps > 0.0 && isfinite(in->reduce_gbps)
                 ? 1.0 / (in->reduce_gbps * 1e3)
                 : 0.0;
    return 0;
}

/* Messages on the busiest link when every rank sends to the rank dist
 * places away at once (see the top of the file).  1 on one host and for
 * partners on the same host: the link term is then the transport's own. */
static double link_load(const braid_cost_in_t *in, int dist)
{
    int ppn = in->ppn >= 1 ? in->ppn : 1;
    if (in->topo == BRAID_TOPO_SINGLE_HOST || in->nnodes <= 1 || dist < ppn)
        return 1.0;
    if (in->topo != BRAID_TOPO_RING)
        return (double)ppn;
    int d = ((dist + ppn - 1) / ppn) % in->nnodes;
    if (2 * d > in->nnodes)
        d = in->nnodes - d;
    return (double)ppn * (d < 1 ? 1 : d);
}

static double log2_floor_d(int n)
{
    return (double)braid_p2p_log2_ceil(braid_p2p_pow2_floor(n));
}

/* Allreduce, ring: n-1 reduce-scatter steps and n-1 allgather steps, each
 * moving one chunk of m/n bytes per rank; only the reduce-scatter half
 * reduces.  Segments pipeline behind one another, so their latencies
 * overlap with the transfer and are not counted per segment:
 *   2(n-1) alpha + 2(n-1)/n B(m) + (n-1)/n G(m). */
double braid_p2p_cost_allreduce_ring(const braid_algo_t    *self,
                                     const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0 || 2.0 * (t.n - 1) > BRAID_P2P_MAX_STEPS) {
        return -1.0;
    }
    if (t.n == 1) {
        return 0.0;
    }
    double f = (double)(t.n - 1) / t.n;
    return 2.0 * (t.n - 1) * t.alpha + 2.0 * f * t.m * t.bus + f * t.m * t.gus;
}

/* Allreduce, recursive doubling: L exchanges of the whole buffer with
 * partners 2^k away, each followed by a full reduction:
 * sum_k (alpha + load(2^k) B(m) + G(m)).  For n not a power of two add the
 * fold-in (alpha + B(m) + G(m): receive and reduce the neighbour's input)
 * and fold-out (alpha + B(m): return the result). */
double braid_p2p_cost_allreduce_recdbl(const braid_algo_t    *self,
                                       const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;
    double  cost = 0.0;

    if (terms(&t, in) < 0) {
        return -1.0;
    }
    if (t.n == 1) {
        return 0.0;
    }
    for (int k = 0; (1 << k) < braid_p2p_pow2_floor(t.n); k++) {
        cost += t.alpha + link_load(in, 1 << k) * t.m * t.bus + t.m * t.gus;
    }
    if (braid_p2p_pow2_floor(t.n) != t.n) {
        cost += 2.0 * (t.alpha + t.m * t.bus) + t.m * t.gus;
    }
    return cost;
}

/* Allreduce, Rabenseifner: recursive halving over p = pow2_floor(n)
 * blocks, then recursive doubling.  Halving step j (partner p/2^(j+1)
 * away) moves and reduces m/2^(j+1); doubling step j (partner 2^j away)
 * moves m·2^j/p:
 *   2 L alpha + sum_d load(d) (2 d/p) B(m) + (p-1)/p G(m),  d = p/2 ... 1.
 * Not a power of two: fold-in alpha + B(m) + G(m), fold-out alpha + B(m).
 * Segments overlap their reduction with the next one's transfer; as for
 * the ring, the model counts both (one host: the same CPU does both). */
double braid_p2p_cost_allreduce_rabenseifner(const braid_algo_t    *self,
                                             const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0)
        return -1.0;
    if (t.n == 1)
        return 0.0;
    int    p = braid_p2p_pow2_floor(t.n);
    double cost =
        2.0 * log2_floor_d(t.n) * t.alpha + (double)(p - 1) / p * t.m * t.gus;
    for (int dist = p / 2; dist >= 1; dist /= 2)
        cost += link_load(in, dist) * 2.0 * dist / p * t.m * t.bus;
    if (p != t.n)
        cost += 2.0 * (t.alpha + t.m * t.bus) + t.m * t.gus;
    return cost;
}

/* Allreduce, halving: Rabenseifner's exchanges carrying the inputs
 * unreduced.  Halving step j (partner p/2^(j+1) away) sends the inputs of
 * the 2^j virtual ranks held, about (n/p)·2^j messages of m/2^(j+1): one
 * stage, a message's alpha for each beyond the first, and (n/p)·m/2
 * bytes; the owner then folds n-1 blocks of m/p; doubling as Rabenseifner:
 *   2 L alpha + sum_j (msgs_j - 1) alpha_msg
 *     + sum_d load(d) (n/2p + d/p) B(m) + (n-1)/p G(m),  d = p/2 ... 1.
 * Not a power of two: fold-in and fold-out alpha + B(m) each, no
 * reduction.  -1 above its cap (rabenseifner.h). */
double braid_p2p_cost_allreduce_halving(const braid_algo_t    *self,
                                        const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0 || in->bytes > BRAID_P2P_HALVING_MAX_BYTES ||
        !braid_p2p_halving_tags_fit(t.n))
        return -1.0;
    if (t.n == 1)
        return 0.0;
    int    p    = braid_p2p_pow2_floor(t.n);
    double per  = (double)t.n / p; /* real ranks a virtual rank holds */
    double cost = 2.0 * log2_floor_d(t.n) * t.alpha +
                  (double)(t.n - 1) / p * t.m * t.gus;
    for (int dist = p / 2, j = 0; dist >= 1; dist /= 2, j++)
        cost +=
            (per * (1 << j) - 1.0) * in->link.alpha_us +
            link_load(in, dist) * (per / 2.0 + (double)dist / p) * t.m * t.bus;
    if (p != t.n)
        cost += 2.0 * (t.alpha + t.m * t.bus);
    return cost;
}

/* Reduce-scatter, ring (m = one block): n-1 steps each moving and reducing
 * one block: (n-1) (alpha + B(m) + G(m)). */
double braid_p2p_cost_reduce_scatter_ring(const braid_algo_t    *self,
                                          const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0 || (double)(t.n - 1) > BRAID_P2P_MAX_STEPS) {
        return -1.0;
    }
    return (t.n - 1) * (t.alpha + t.m * t.bus + t.m * t.gus);
}

/* Reduce-scatter, recursive halving (m = one block, N = n m the input):
 * step j moves and reduces half of the previous step's data, N/2 ... N/p,
 * with the partner p/2 ... 1 away, summing to (p-1)/p N:
 * L alpha + sum_j load(p/2^(j+1)) B(N/2^(j+1)) + (p-1)/p G(N).  Not a power
 * of two: the fold-in moves and reduces the whole input (alpha + B(N) +
 * G(N)), the fold-out returns one block (alpha + B(m)). */
double braid_p2p_cost_reduce_scatter_recdbl(const braid_algo_t    *self,
                                            const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;
    double  big, cost;
    int     p;

    if (terms(&t, in) < 0) {
        return -1.0;
    }
    if (t.n == 1) {
        return 0.0;
    }
    p    = braid_p2p_pow2_floor(t.n);
    big  = t.n * t.m;
    cost = log2_floor_d(t.n) * t.alpha + (double)(p - 1) / p * big * t.gus;
    for (int dist = p / 2; dist >= 1; dist /= 2) {
        cost += link_load(in, dist) * big * dist / p * t.bus;
    }
    if (p != t.n) {
        cost += t.alpha + big * (t.bus + t.gus) + t.alpha + t.m * t.bus;
    }
    return cost;
}

/* Allgather, ring (m = one block): n-1 steps of one block:
 * (n-1) (alpha + B(m)). */
double braid_p2p_cost_allgather_ring(const braid_algo_t    *self,
                                     const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0 || (double)(t.n - 1) > BRAID_P2P_MAX_STEPS) {
        return -1.0;
    }
    return (t.n - 1) * (t.alpha + t.m * t.bus);
}

/* Allgather, recursive doubling / Bruck: C steps; step i moves
 * min(2^i, n - 2^i) blocks to a partner 2^i away, so every block but our
 * own arrives exactly once: C alpha + sum_i load(2^i) min(2^i, n-2^i) B(m)
 * (that is (n-1) B(m) on one host).  (Bruck's wrapped ranges cost a second
 * message in some steps; their latency overlaps the first.) */
double braid_p2p_cost_allgather_recdbl(const braid_algo_t    *self,
                                       const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;
    double  cost;

    if (terms(&t, in) < 0) {
        return -1.0;
    }
    cost = braid_p2p_log2_ceil(t.n) * t.alpha;
    for (int w = 1; w < t.n; w *= 2) {
        int blocks = w < t.n - w ? w : t.n - w;
        cost += link_load(in, w) * blocks * t.m * t.bus;
    }
    return cost;
}

/* Broadcast, pipelined chain: k = ceil(m / S) segments of S = 256 KiB
 * (at least one).  The last rank gets the last segment after the first
 * has crossed n-1 links and the other k-1 have followed it:
 *   (n - 2 + k) (alpha + B(m / k)). */
double braid_p2p_cost_bcast_ring(const braid_algo_t    *self,
                                 const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;
    double  k;

    if (terms(&t, in) < 0) {
        return -1.0;
    }
    if (t.n == 1) {
        return 0.0;
    }
    k = ceil(t.m / RING_SEG_BYTES);
    if (k < 1.0) {
        k = 1.0;
    }
    return (t.n - 2 + k) * (t.alpha + t.m / k * t.bus);
}

/* Broadcast, binomial tree: C rounds of the whole message, C (alpha + B(m)).
 * (A rank forwards to its children one after another; their sends share
 * the link, which this model, like the usual one, leaves out.) */
double braid_p2p_cost_bcast_recdbl(const braid_algo_t    *self,
                                   const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0) {
        return -1.0;
    }
    return braid_p2p_log2_ceil(t.n) * (t.alpha + t.m * t.bus);
}

/* Barrier, token twice around: (2n - 1) alpha in sequence. */
double braid_p2p_cost_barrier_ring(const braid_algo_t    *self,
                                   const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0) {
        return -1.0;
    }
    return t.n == 1 ? 0.0 : (2.0 * t.n - 1.0) * t.alpha;
}

/* Barrier, dissemination: C rounds, C alpha. */
double braid_p2p_cost_barrier_recdbl(const braid_algo_t    *self,
                                     const braid_cost_in_t *in)
{
    (void)self;
    terms_t t;

    if (terms(&t, in) < 0) {
        return -1.0;
    }
    return braid_p2p_log2_ceil(t.n) * t.alpha;
}
