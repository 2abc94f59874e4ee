/* Alpha-beta-gamma cost model of the lowhop algorithms (microseconds).
 *
 * Notation (as plugins/algorithms/p2p/cost.c): n ranks, m = in->bytes (the
 * per-rank size of braid_cost_in_t), alpha = in->link.put_alpha_us per stage
 * (every algorithm here moves its data with put_signal, so the put path is
 * its link), and
 *     B(x) = x / (beta·1e3)    us to send x bytes at beta = put_beta_gbps
 *     G(x) = x / (gamma·1e3)   us to reduce (or copy) x bytes locally
 * since 1 GB/s = 1e9 B/s = 1e3 B/us.
 *
 * Contention: L = braid_lowhop_alltoall_load().  Every algorithm here is a
 * direct all-to-all: in one stage each rank writes a block to each of the
 * n-1 others at once.  The stage lasts as long as the busiest link needs, L
 * blocks' worth of bytes:
 *   - one host, or a switch with one rank per host: each rank pushes its n-1
 *     blocks through its own port, L = n - 1;
 *   - N hosts of P ranks (ppn) behind a switch: the P ranks of a host share
 *     one NIC, which sends P blocks to each of the P ranks of each of the
 *     other N-1 hosts, L = P²·(N-1) (>= n-1; ranks on the same host meet
 *     without the NIC and are not counted);
 *   - N hosts cabled as a ring: there is no switch, so a host forwards what
 *     passes through it; a write to a host d hops away is sent d times
 *     (crosses d links).  Summed over every host pair and spread evenly by
 *     symmetry, each host's NIC sends P²·D blocks, D = sum over the other
 *     hosts of their hop distance = sum_{k=1}^{N-1} min(k, N-k) = floor(N²/4)
 *     (N = 4: 4 against 3 on a switch; N = 8: 16 against 7), so
 *     L = P²·floor(N²/4).
 * beta is what one host's NIC sends per second (the two QSFP ports of a DGX
 * Spark share 200 Gb/s).  The extra hops' latency is left out: it is small
 * against alpha, which is mostly software at the two ends.  The ring
 * allreduce only ever talks to its neighbour, so none of this touches it.
 *
 * Messages: a stage here is n-1 puts from every rank, and each beyond the
 * first costs o = in->link.put_msg_us more (the two ends' software, done
 * in turn by the ranks sharing a core; 0 where not measured): a stage is
 * alpha + (n-2)·o, written A below.
 *
 * The formulas, per rank:
 *   oneshot   A + L·B(m) + (n-1)·G(m)
 *             one stage; m to each peer; fold n-1 contributions of m.
 *   twoshot   2·A + 2·L·B(m/n) + (n-1)/n·G(m) + (n-1)/n·c·G(m)
 *             two stages of m/n per peer; fold n-1 pieces of m/n; copy the
 *             n-1 reduced chunks of m/n from the receive area to recvbuf,
 *             c = BRAID_COST_COPY_OVER_REDUCE (a copy moves two streams
 *             of memory, a fold three).
 *   allgather direct       A + L·B(m) + (n-1)·c·G(m)   (copy-out)
 *   reduce_scatter direct  A + L·B(m) + (n-1)·G(m)   (fold)
 *   barrier direct         A
 * Each is -1 above its cap (lowhop.h) so the dispatcher never picks it there.
 * B reads the put path's curve at the call's buffers plus the receive
 * area: (n-1)·m for the one-stage algorithms, 2(n-1)·m/n for twoshot's
 * two stages (put_us_per_byte).
 *
 * Crossovers with L = n-1 against the ucx ring (alpha standing for A)
 * (2(n-1)·alpha + 2(n-1)/n·B(m) + (n-1)/n·G(m)), writing b = 1/(beta·1e3),
 * g = 1/(gamma·1e3), c = BRAID_COST_COPY_OVER_REDUCE:
 *   oneshot = twoshot at   m1 = alpha·n / ((n-1)((n-2)·b + (n-1-c)·g))
 *     (n = 2: the same bytes on the link and one stage fewer, but a fold
 *     of all m against twoshot's fold of half and copy of half:
 *     m1 = 2·alpha / ((1-c)·g));
 *   twoshot = ring at      m2 = 2(n-2)·alpha·n / ((n-1)·c·g)
 *     (the ring saves the copy-out and pays 2(n-2) more latencies;
 *     n = 2: never, the ring wins outright);
 *   oneshot = ring (n = 2) at m = 2·alpha/g.
 * (alpha, b for the lowhop terms are the put link plus the stage term;
 * the ring's are the two-sided link: the formulas hold with one alpha and
 * b per side.)  A ring of hosts raises L and so lowers m1 (n = 8: by 16/7).
 * `braid-info -n N` prints where the declared links put the crossovers: on
 * this 2-core host, oneshot to 4 KiB on 4 ranks and 512 B on 8, twoshot up
 * to its cap, the ring above it. */
#include <math.h>
#include <stdint.h>

#include "lowhop.h"

typedef struct terms {
    int    n;
    double m, alpha;
    double bus;  /* us per byte on the link */
    double gus;  /* us per byte reduced or copied (0: unknown, not counted) */
    double load; /* L */
    double msg;  /* us per message of a stage beyond its first: o */
} terms_t;

/* us per byte on the put link for an algorithm whose receive area holds
 * area bytes on each rank.  The link's figure was read at the call's own
 * buffers; the area (a whole message from every peer) comes on top of
 * them and pushes the call out of the caches sooner, so the curve is read
 * again at both together (braid_cost_put_gbps_at). */
static double put_us_per_byte(const braid_cost_in_t *in, double area)
{
    double ws =
        BRAID_HAS(in, braid_cost_in_t, call_ws) ? in->call_ws + area : 0.0;
    return 1.0 / (braid_cost_put_gbps_at(in, ws) * 1e3);
}

/* 0 when the inputs are usable, -1 when they describe no usable link or
 * the message is above cap. */
static int terms(terms_t *t, const braid_cost_in_t *in, size_t cap)
{
    if (in->nranks < 1 || in->bytes > cap ||
        !isfinite(in->link.put_alpha_us) || !(in->link.put_alpha_us >= 0.0) ||
        !isfinite(in->link.put_beta_gbps) || !(in->link.put_beta_gbps > 0.0))
        return -1;
    t->n     = in->nranks;
    t->m     = (double)in->bytes;
    t->alpha = in->link.put_alpha_us + in->stage_us;
    t->bus   = 1.0 / (in->link.put_beta_gbps * 1e3);
    t->gus   = in->reduce_gbps > 0.0 && isfinite(in->reduce_gbps)
                   ? 1.0 / (in->reduce_gbps * 1e3)
                   : 0.0;
    t->load  = braid_lowhop_alltoall_load(in);
    t->msg   = braid_cost_put_msg_us(in);
    return 0;
}

double braid_lowhop_alltoall_load(const braid_cost_in_t *in)
{
    int n = in->nranks;
    if (n <= 1)
        return 0.0;
    double own   = (double)(n - 1);
    int    hosts = in->nnodes;
    if (in->topo == BRAID_TOPO_SINGLE_HOST || hosts <= 1)
        return own;
    double p =
        in->ppn >= 1 ? (double)in->ppn : ceil((double)n / (double)hosts);
    double hops = in->topo == BRAID_TOPO_RING
                      ? floor((double)hosts * (double)hosts / 4.0)
                      : (double)(hosts - 1);
    double host = p * p * hops;
    return host > own ? host : own;
}

/* One stage sending a block of m to every peer, then (n-1)·m of local work,
 * each byte of it `work` reductions' worth (1: a fold; a copy less):
 * allgather and reduce_scatter direct, and oneshot. */
static double one_stage(const braid_cost_in_t *in, size_t cap, double work)
{
    terms_t t;
    if (terms(&t, in, cap) < 0)
        return -1.0;
    if (t.n == 1)
        return 0.0;
    t.bus = put_us_per_byte(in, (t.n - 1) * t.m); /* a block from each peer */
    return t.alpha + (t.n - 2) * t.msg + t.load * t.m * t.bus +
           (t.n - 1) * t.m * t.gus * work;
}

double braid_lowhop_cost_oneshot(const braid_cost_in_t *in)
{
    return one_stage(in, BRAID_LOWHOP_ONESHOT_MAX_BYTES, 1.0);
}

double braid_lowhop_cost_twoshot(const braid_cost_in_t *in)
{
    terms_t t;
    if (terms(&t, in, BRAID_LOWHOP_TWOSHOT_MAX_BYTES) < 0)
        return -1.0;
    if (t.n == 1)
        return 0.0;
    double piece = t.m / t.n;
    double f     = (double)(t.n - 1) / t.n;
    t.bus = put_us_per_byte(in, 2.0 * (t.n - 1) * piece); /* both stages */
    return 2.0 * (t.alpha + (t.n - 2) * t.msg) + 2.0 * t.load * piece * t.bus +
           (1.0 + BRAID_COST_COPY_OVER_REDUCE) * f * t.m * t.gus;
}

double braid_lowhop_cost_allgather_direct(const braid_cost_in_t *in)
{
    return one_stage(in, BRAID_LOWHOP_ALLGATHER_MAX_BYTES,
                     BRAID_COST_COPY_OVER_REDUCE);
}

double braid_lowhop_cost_reduce_scatter_direct(const braid_cost_in_t *in)
{
    return one_stage(in, BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES, 1.0);
}

/* One stage of flags: A alone (the flag shares no bandwidth worth
 * counting).  A barrier moves no data, whatever bytes says. */
double braid_lowhop_cost_barrier_direct(const braid_cost_in_t *in)
{
    terms_t t;
    if (terms(&t, in, SIZE_MAX) < 0)
        return -1.0;
    return t.n == 1 ? 0.0 : t.alpha + (t.n - 2) * t.msg;
}
