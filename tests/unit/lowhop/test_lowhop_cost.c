/* The lowhop cost model (plugins/algorithms/lowhop/cost.c) against the ring
 * all-reduce it competes with (plugins/algorithms/p2p/cost.c's formula,
 * restated here with the same link so that only the shapes are compared):
 *
 *  - for n = 2, 4, 8 on one host (ucx's declared 0.6 us, 6 GB/s) and behind
 *    a switch (10 us, 1.5 GB/s), scanning sizes from 1 B to 32 MiB, the
 *    cheapest of {oneshot, twoshot, ring} is oneshot at the smallest sizes,
 *    then twoshot (n > 2 only), then the ring, never going back;
 *  - the crossovers found by bisection equal the closed forms of cost.c;
 *  - a ring of hosts (and ranks sharing a NIC) raises the all-to-all load
 *    and moves the oneshot/twoshot crossover down;
 *  - caps, broken links, n = 1; and start() refusing a message above the
 *    cap before it touches the transport.
 *
 * Prints the crossover table; exits 1 on any failure. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lowhop.h"

#define GAMMA_GBPS 8.0 /* the core's REDUCE_GBPS */

static long n_checks, n_failed;

static void check(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void check(int ok, const char *fmt, ...)
{
    n_checks++;
    if (ok)
        return;
    n_failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static double ring_allreduce(const braid_cost_in_t *in)
{
    double n = in->nranks, m = (double)in->bytes;
    double b = 1.0 / (in->link.beta_gbps * 1e3);
    double g = 1.0 / (in->reduce_gbps * 1e3);
    return 2 * (n - 1) * in->link.alpha_us + 2 * (n - 1) / n * m * b +
           (n - 1) / n * m * g;
}

typedef enum { ONESHOT = 0, RING, TWOSHOT } who_t; /* name order */
static const char *const who_name[] = {"oneshot", "ring", "twoshot"};

/* The dispatcher's choice: cheapest non-negative, ties to the first name. */
static who_t cheapest(const braid_cost_in_t *in)
{
    double t[3] = {braid_lowhop_cost_oneshot(in), ring_allreduce(in),
                   braid_lowhop_cost_twoshot(in)};
    who_t  best = RING;
    for (int i = 0; i < 3; i++)
        if (t[i] >= 0 && t[i] < t[best])
            best = (who_t)i;
    return best;
}

static braid_cost_in_t setup(int n, int nnodes, int ppn,
                             braid_topo_kind_t topo, double alpha, double beta)
{
    braid_cost_in_t in;
    memset(&in, 0, sizeof(in));
    in.coll               = BRAID_COLL_ALLREDUCE;
    in.nranks             = n;
    in.nnodes             = nnodes;
    in.ppn                = ppn;
    in.topo               = topo;
    in.link.alpha_us      = alpha; /* the ring's two-sided path */
    in.link.beta_gbps     = beta;
    in.link.put_alpha_us  = alpha; /* the same link for put_signal here */
    in.link.put_beta_gbps = beta;
    in.reduce_gbps        = GAMMA_GBPS;
    return in;
}

/* Smallest size in (lo, hi] where f(in) says 1, f(lo) saying 0. */
static double bisect(braid_cost_in_t in, int (*f)(const braid_cost_in_t *),
                     double lo, double hi)
{
    while (hi - lo > 1.0) {
        double mid = floor((lo + hi) / 2);
        in.bytes   = (size_t)mid;
        if (f(&in))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* An estimate, "cannot run" (negative) as infinitely slow. */
static double cost(double (*f)(const braid_cost_in_t *),
                   const braid_cost_in_t *in)
{
    double t = f(in);
    return t < 0 ? INFINITY : t;
}

static int twoshot_cheaper(const braid_cost_in_t *in)
{
    return cost(braid_lowhop_cost_twoshot, in) <
           cost(braid_lowhop_cost_oneshot, in);
}

static int ring_cheaper_than_twoshot(const braid_cost_in_t *in)
{
    return ring_allreduce(in) <= cost(braid_lowhop_cost_twoshot, in);
}

static int ring_cheaper_than_oneshot(const braid_cost_in_t *in)
{
    return ring_allreduce(in) <= cost(braid_lowhop_cost_oneshot, in);
}

static double near(double a, double b) { return fabs(a - b) <= 0.01 * b + 2; }

/* The scan and the crossovers of one configuration; returns m1. */
static double crossovers(const char *label, braid_cost_in_t in)
{
    int    n     = in.nranks;
    double alpha = in.link.alpha_us;
    double b = 1.0 / (in.link.beta_gbps * 1e3), g = 1.0 / (GAMMA_GBPS * 1e3);

    /* Winners along a geometric scan: oneshot+, twoshot*, ring+. */
    who_t prev         = ONESHOT;
    int   seen_twoshot = 0, order_ok = 1;
    for (double m = 1; m <= 32.0 * 1024 * 1024; m *= 1.05) {
        in.bytes = (size_t)m;
        who_t w  = cheapest(&in);
        if (in.bytes == 1)
            check(w == ONESHOT, "%s: %s wins at 1 byte, not oneshot", label,
                  who_name[w]);
        int rank_prev = prev == ONESHOT ? 0 : prev == TWOSHOT ? 1 : 2;
        int rank_w    = w == ONESHOT ? 0 : w == TWOSHOT ? 1 : 2;
        if (rank_w < rank_prev)
            order_ok = 0;
        seen_twoshot |= w == TWOSHOT;
        prev = w;
    }
    check(order_ok, "%s: winners not in the order oneshot, twoshot, ring",
          label);
    check(prev == RING, "%s: %s wins at 32 MiB, not the ring", label,
          who_name[prev]);
    check(seen_twoshot == (n > 2), "%s: twoshot %s", label,
          n > 2 ? "never wins" : "wins with 2 ranks");

    double m1 = 0, m2 = 0;
    if (n > 2) {
        m1 = bisect(in, twoshot_cheaper, 0, 64.0 * 1024 * 1024);
        m2 = bisect(in, ring_cheaper_than_twoshot, m1, 64.0 * 1024 * 1024);
        if (braid_lowhop_alltoall_load(&in) == n - 1) {
            double c = BRAID_COST_COPY_OVER_REDUCE;
            double c1 =
                alpha * n / ((n - 1.0) * ((n - 2.0) * b + (n - 1.0 - c) * g));
            double c2 = 2.0 * (n - 2) * alpha * n / ((n - 1.0) * c * g);
            check(near(m1, c1),
                  "%s: oneshot/twoshot at %.0f B, closed form "
                  "%.0f",
                  label, m1, c1);
            check(near(m2, c2),
                  "%s: twoshot/ring at %.0f B, closed form "
                  "%.0f",
                  label, m2, c2);
        }
        printf("  %-28s oneshot < %9.0f B < twoshot < %9.0f B < ring\n", label,
               m1, m2);
    } else {
        m2 = bisect(in, ring_cheaper_than_oneshot, 0, 64.0 * 1024 * 1024);
        double c = 2.0 * alpha / g;
        check(near(m2, c), "%s: oneshot/ring at %.0f B, closed form %.0f",
              label, m2, c);
        printf("  %-28s oneshot < %9.0f B < ring (twoshot never)\n", label,
               m2);
    }
    return m1;
}

static void test_crossovers(void)
{
    static const int ns[] = {2, 4, 8};
    char             label[64];
    printf("crossovers (gamma %.0f GB/s):\n", GAMMA_GBPS);
    for (int i = 0; i < 3; i++) {
        int n = ns[i];
        snprintf(label, sizeof(label), "n=%d one host", n);
        crossovers(label, setup(n, 1, n, BRAID_TOPO_SINGLE_HOST, 0.6, 6.0));
        snprintf(label, sizeof(label), "n=%d switch", n);
        double sw =
            crossovers(label, setup(n, n, 1, BRAID_TOPO_SWITCH, 10.0, 1.5));
        if (n < 4)
            continue;
        snprintf(label, sizeof(label), "n=%d ring of hosts", n);
        braid_cost_in_t ring = setup(n, n, 1, BRAID_TOPO_RING, 10.0, 1.5);
        double          rg   = crossovers(label, ring);
        check(rg < sw,
              "n=%d: a ring of hosts does not move the "
              "oneshot/twoshot crossover down (%.0f vs %.0f)",
              n, rg, sw);
    }
    /* Ranks sharing a NIC: 8 ranks on 2 hosts against 8 hosts. */
    double shared = crossovers("n=8 2 hosts x 4, switch",
                               setup(8, 2, 4, BRAID_TOPO_SWITCH, 10.0, 1.5));
    double alone  = crossovers("n=8 8 hosts x 1, switch (again)",
                               setup(8, 8, 1, BRAID_TOPO_SWITCH, 10.0, 1.5));
    check(shared < alone,
          "ranks sharing a NIC do not move the "
          "oneshot/twoshot crossover down (%.0f vs %.0f)",
          shared, alone);
}

static void test_load(void)
{
    static const struct {
        int               n, nnodes, ppn;
        braid_topo_kind_t topo;
        double            want;
    } cases[] = {
        {1, 1, 1, BRAID_TOPO_SINGLE_HOST, 0},
        {8, 1, 8, BRAID_TOPO_SINGLE_HOST, 7},
        {8, 8, 1, BRAID_TOPO_SWITCH, 7},
        {4, 4, 1, BRAID_TOPO_RING, 4}, /* 1 + 2 + 1 */
        {3, 3, 1, BRAID_TOPO_RING, 2}, /* all adjacent: as a switch */
        {2, 2, 1, BRAID_TOPO_RING, 1},
        {8, 8, 1, BRAID_TOPO_RING, 16},   /* 1+2+3+4+3+2+1 */
        {5, 5, 1, BRAID_TOPO_RING, 6},    /* 1+2+2+1 */
        {8, 2, 4, BRAID_TOPO_SWITCH, 16}, /* 4 ranks x 4 remote ranks */
        {16, 4, 4, BRAID_TOPO_RING, 64},
        {4, 1, 4, BRAID_TOPO_RING, 3}, /* one host: no links */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        braid_cost_in_t in = setup(cases[i].n, cases[i].nnodes, cases[i].ppn,
                                   cases[i].topo, 1, 1);
        double          l  = braid_lowhop_alltoall_load(&in);
        check(l == cases[i].want,
              "all-to-all load n=%d nodes=%d ppn=%d "
              "topo=%d: %.1f, expected %.1f",
              cases[i].n, cases[i].nnodes, cases[i].ppn, (int)cases[i].topo, l,
              cases[i].want);
    }
}

static void test_caps(void)
{
    static const struct {
        double (*f)(const braid_cost_in_t *);
        size_t      cap;
        const char *name;
    } algs[] = {
        {braid_lowhop_cost_oneshot, BRAID_LOWHOP_ONESHOT_MAX_BYTES, "oneshot"},
        {braid_lowhop_cost_twoshot, BRAID_LOWHOP_TWOSHOT_MAX_BYTES, "twoshot"},
        {braid_lowhop_cost_allgather_direct, BRAID_LOWHOP_ALLGATHER_MAX_BYTES,
         "allgather direct"},
        {braid_lowhop_cost_reduce_scatter_direct,
         BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES, "reduce_scatter direct"},
    };
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        braid_cost_in_t in = setup(4, 1, 4, BRAID_TOPO_SINGLE_HOST, 0.6, 6);
        in.bytes           = algs[i].cap;
        check(algs[i].f(&in) > 0, "%s: no estimate at its cap", algs[i].name);
        in.bytes = algs[i].cap + 1;
        check(algs[i].f(&in) < 0, "%s: estimate above its cap", algs[i].name);
        in.bytes = 1024;
        double t = algs[i].f(&in);
        check(t > 0 && t == algs[i].f(&in), "%s: not positive or not pure",
              algs[i].name);
        in.link.put_beta_gbps = 0;
        check(algs[i].f(&in) < 0, "%s: estimate with a zero bandwidth",
              algs[i].name);
        in.link.put_beta_gbps = 6;
        in.link.put_alpha_us  = NAN;
        check(algs[i].f(&in) < 0, "%s: estimate with a NaN latency",
              algs[i].name);
        in       = setup(1, 1, 1, BRAID_TOPO_SINGLE_HOST, 0.6, 6);
        in.bytes = 1024;
        check(algs[i].f(&in) == 0, "%s: one rank costs something",
              algs[i].name);
        in             = setup(4, 1, 4, BRAID_TOPO_SINGLE_HOST, 0.6, 6);
        in.reduce_gbps = 0; /* unknown: communication alone */
        in.bytes       = 1024;
        check(algs[i].f(&in) > 0, "%s: no estimate without gamma",
              algs[i].name);
    }
    /* The direct one-stage collectives: one alpha against the ring's n-1. */
    braid_cost_in_t in = setup(8, 8, 1, BRAID_TOPO_SWITCH, 10, 1.5);
    in.bytes           = 64;
    check(braid_lowhop_cost_allgather_direct(&in) < 7 * 10.0 + 1,
          "allgather direct slower than the ring's latency at 64 bytes");
}

static braid_status_t no_error(braid_status_t st, const char *fmt, ...)
{
    (void)fmt;
    return st;
}

/* start() refuses above the cap before it touches the transport (tl NULL). */
static void test_start_cap(void)
{
    braid_services_t svc;
    memset(&svc, 0, sizeof(svc));
    svc.error = no_error;
    static const struct {
        const braid_algo_t *a;
        size_t              cap;
    } algs[] = {
        {&braid_lowhop_oneshot_algo, BRAID_LOWHOP_ONESHOT_MAX_BYTES},
        {&braid_lowhop_twoshot_algo, BRAID_LOWHOP_TWOSHOT_MAX_BYTES},
        {&braid_lowhop_allgather_direct_algo,
         BRAID_LOWHOP_ALLGATHER_MAX_BYTES},
        {&braid_lowhop_reduce_scatter_direct_algo,
         BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES},
    };
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        void        *state = NULL;
        braid_task_t t;
        memset(&t, 0, sizeof(t));
        t.coll       = algs[i].a->coll;
        t.count      = algs[i].cap + 1;
        t.dtype      = BRAID_U8;
        t.dtsize     = 1;
        t.size       = 4;
        t.svc        = &svc;
        t.comm_state = &state;
        braid_wait_t   wait;
        braid_status_t st = algs[i].a->start(&t, &wait);
        check(st == BRAID_ERR_NOT_SUPPORTED && t.priv == NULL && state == NULL,
              "%s: start above the cap returned %d", algs[i].a->name, (int)st);
        check(algs[i].a->needs_caps == BRAID_CAP_PUT_SIGNAL &&
                  algs[i].a->transport == NULL &&
                  algs[i].a->comm_state_free != NULL,
              "%s: descriptor", algs[i].a->name);
    }
}

/* Oversubscribed hosts: every stage pays stage_us, so one stage gains on
 * two and oneshot stays cheapest to larger sizes; the barrier costs one
 * stage whatever the byte count. */
static void test_stage(void)
{
    braid_cost_in_t in = setup(4, 1, 4, BRAID_TOPO_SINGLE_HOST, 0.1, 10);
    in.bytes           = 4096;
    double one0        = braid_lowhop_cost_oneshot(&in);
    double two0        = braid_lowhop_cost_twoshot(&in);
    double m1_0        = bisect(in, twoshot_cheaper, 0, 64.0 * 1024 * 1024);
    in.stage_us        = 2.0;
    check(fabs(braid_lowhop_cost_oneshot(&in) - one0 - 2.0) < 1e-9,
          "oneshot: one stage must add stage_us once");
    check(fabs(braid_lowhop_cost_twoshot(&in) - two0 - 4.0) < 1e-9,
          "twoshot: two stages must add stage_us twice");
    double m1_2 = bisect(in, twoshot_cheaper, 0, 64.0 * 1024 * 1024);
    check(m1_2 > 4.0 * m1_0,
          "oneshot/twoshot crossover %.0f B with stages "
          "of 2 us, %.0f B without: should move up",
          m1_2, m1_0);
    in.bytes = 1u << 30;
    check(braid_lowhop_cost_barrier_direct(&in) == in.link.put_alpha_us + 2.0,
          "barrier: one stage, no data term, at any byte count");
}

/* A stage of n-1 puts costs n-2 messages' overhead more than one of one
 * (link.put_msg_us); two ranks have no second message, and a link
 * without the figure (an older core: struct_size short of it) counts
 * none.  Where messages cost enough, oneshot's single stage of n-1 puts
 * of m loses to the ring's 2(n-1) stages of one message each sooner. */
static void test_msg(void)
{
    braid_cost_in_t in = setup(8, 1, 8, BRAID_TOPO_SINGLE_HOST, 1.0, 10);
    in.bytes            = 512;
    in.link.struct_size = sizeof(in.link);
    double one0         = braid_lowhop_cost_oneshot(&in);
    double two0        = braid_lowhop_cost_twoshot(&in);
    double ag0         = braid_lowhop_cost_allgather_direct(&in);
    double bar0        = braid_lowhop_cost_barrier_direct(&in);
    in.link.put_msg_us = 3.0;
    check(fabs(braid_lowhop_cost_oneshot(&in) - one0 - 6 * 3.0) < 1e-9,
          "oneshot on 8 ranks: 6 more messages in its stage");
    check(fabs(braid_lowhop_cost_twoshot(&in) - two0 - 2 * 6 * 3.0) < 1e-9,
          "twoshot on 8 ranks: 6 more in each of two stages");
    check(fabs(braid_lowhop_cost_allgather_direct(&in) - ag0 - 6 * 3.0) < 1e-9,
          "allgather direct: 6 more messages");
    check(fabs(braid_lowhop_cost_barrier_direct(&in) - bar0 - 6 * 3.0) < 1e-9,
          "barrier: 6 more flags");
    check(cheapest(&in) == RING,
          "8 ranks, 512 B, 3 us a message: the ring's one message a stage "
          "wins (got %s)",
          who_name[cheapest(&in)]);
    in.link.struct_size = offsetof(braid_link_t, msg_us);
    check(fabs(braid_lowhop_cost_oneshot(&in) - one0) < 1e-9,
          "a link without the figure counts no message overhead");
    braid_cost_in_t two = setup(2, 1, 2, BRAID_TOPO_SINGLE_HOST, 1.0, 10);
    two.bytes            = 512;
    two.link.struct_size = sizeof(two.link);
    double t0           = braid_lowhop_cost_twoshot(&two);
    two.link.put_msg_us = 3.0;
    check(fabs(braid_lowhop_cost_twoshot(&two) - t0) < 1e-9,
          "two ranks: one put a stage, nothing more");
}

/* With the put path's measured curve, each algorithm reads it at the
 * call's buffers plus its receive area: a block from every peer for the
 * one-stage algorithms, twoshot's two stages of pieces; an older core's
 * cost_in (no curve) keeps the link's figure. */
static void test_area(void)
{
    const double    mib = 1024.0 * 1024.0;
    braid_cost_in_t in  = setup(4, 1, 4, BRAID_TOPO_SINGLE_HOST, 0.1, 20);
    in.struct_size      = sizeof(in);
    in.put_curve        = (braid_bw_curve_t){20.0, 1 * mib, 2.0, 32 * mib};
    double m = 1 * mib, n = 4, g = 1.0 / (GAMMA_GBPS * 1e3);
    in.bytes   = (size_t)m;
    in.call_ws = 2 * m; /* all-reduce: a send and a receive buffer */
    in.link.put_beta_gbps = braid_bw_at(&in.put_curve, in.call_ws);
    double one_b = 1.0 / (braid_bw_at(&in.put_curve, 2 * m + 3 * m) * 1e3);
    double one   = 0.1 + 3 * m * one_b + 3 * m * g;
    check(fabs(braid_lowhop_cost_oneshot(&in) - one) < 1e-9 * one,
          "oneshot: the curve at the call's 2 MiB and 3 MiB of area: "
          "%g, want %g",
          braid_lowhop_cost_oneshot(&in), one);
    double two_b = 1.0 / (braid_bw_at(&in.put_curve, 2 * m + 1.5 * m) * 1e3);
    double two   = 0.2 + 2 * 3 * (m / n) * two_b +
                 (1 + BRAID_COST_COPY_OVER_REDUCE) * 0.75 * m * g;
    check(fabs(braid_lowhop_cost_twoshot(&in) - two) < 1e-9 * two,
          "twoshot: the curve at the call's 2 MiB and 1.5 MiB of pieces: "
          "%g, want %g",
          braid_lowhop_cost_twoshot(&in), two);
    in.coll     = BRAID_COLL_ALLGATHER;
    in.call_ws  = 5 * m;
    double ag_b = 1.0 / (braid_bw_at(&in.put_curve, 5 * m + 3 * m) * 1e3);
    double ag   = 0.1 + 3 * m * ag_b + 3 * m * g * BRAID_COST_COPY_OVER_REDUCE;
    in.link.put_beta_gbps = braid_bw_at(&in.put_curve, in.call_ws);
    check(fabs(braid_lowhop_cost_allgather_direct(&in) - ag) < 1e-9 * ag,
          "allgather direct: %g, want %g",
          braid_lowhop_cost_allgather_direct(&in), ag);
    double with_area = braid_lowhop_cost_allgather_direct(&in);
    in.struct_size   = offsetof(braid_cost_in_t, put_curve);
    double without   = braid_lowhop_cost_allgather_direct(&in);
    check(without < with_area,
          "an older core's cost_in: the link's figure alone (%g < %g)",
          without, with_area);
    in.struct_size = sizeof(in);
    in.put_curve   = (braid_bw_curve_t){0};
    check(braid_lowhop_cost_allgather_direct(&in) == without,
          "no curve measured: the link's figure");
}

int main(void)
{
    test_area();
    test_load();
    test_caps();
    test_start_cap();
    test_crossovers();
    test_stage();
    test_msg();
    printf("%ld checks, %ld failed\n", n_checks, n_failed);
    return n_failed == 0 ? 0 : 1;
}
