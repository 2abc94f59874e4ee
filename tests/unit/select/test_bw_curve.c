/* The cost model's size-dependent bandwidth: the interpolation rule
 * between a path's in-cache and out-of-cache figures, a call's working
 * set, and the selector handing a candidate's estimate the figure of the
 * call's size (a put-based candidate cheaper in the caches loses to a
 * send/recv one beyond them). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../check.h"
#include "select/select.h"

#define MIB (1024.0 * 1024.0)

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

static void test_rule(void)
{
    braid_bw_curve_t c = {.in_gbps  = 20.0,
                          .in_ws    = 1 * MIB,
                          .out_gbps = 2.0,
                          .out_ws   = 64 * MIB};
    CHECK(braid_bw_at(&c, 8) == 20.0, "a small call: the in-cache figure");
    CHECK(braid_bw_at(&c, 1 * MIB) == 20.0, "at the in-cache point");
    CHECK(braid_bw_at(&c, 64 * MIB) == 2.0, "at the out-of-cache point");
    CHECK(braid_bw_at(&c, 1e12) == 2.0, "beyond it: the out-of-cache figure");
    /* Halfway on log size (8 MiB), the time per byte is the mean of the
     * two: 1 / ((1/20 + 1/2) / 2). */
    double mid = braid_bw_at(&c, 8 * MIB);
    CHECK(near(mid, 1.0 / ((1.0 / 20.0 + 1.0 / 2.0) / 2.0)),
          "halfway on log size: the mean time per byte, got %g", mid);
    /* A quarter of the way (2.83 MiB = 2^1.5 MiB). */
    double q = braid_bw_at(&c, pow(2.0, 1.5) * MIB);
    CHECK(near(q, 1.0 / (0.75 / 20.0 + 0.25 / 2.0)),
          "a quarter of the way on log size, got %g", q);
    double prev  = 1e30;
    int    falls = 1;
    for (double ws = 0.5 * MIB; ws < 128 * MIB; ws *= 1.1) {
        double b = braid_bw_at(&c, ws);
        falls &= b <= prev && b >= 2.0 && b <= 20.0;
        prev = b;
    }
    CHECK(falls, "between the figures and never rising with size");

    braid_bw_curve_t none = {0};
    CHECK(braid_bw_at(&none, 1e9) == 0.0, "nothing measured: 0");
    braid_bw_curve_t only_in = {.in_gbps = 7.0, .in_ws = MIB};
    CHECK(braid_bw_at(&only_in, 1e9) == 7.0,
          "without an out-of-cache figure the in-cache one holds");
    braid_bw_curve_t bad = c;
    bad.out_ws           = bad.in_ws;
    CHECK(braid_bw_at(&bad, 1e9) == 20.0,
          "points in the wrong order: the in-cache figure, no division by 0");
}

static void test_working_set(void)
{
    CHECK(braid_call_working_set(BRAID_COLL_ALLREDUCE, 1000, 4) == 2000,
          "all-reduce: its send and receive buffers");
    CHECK(braid_call_working_set(BRAID_COLL_ALLGATHER, 1000, 4) == 5000,
          "allgather: a piece sent, every rank's received");
    CHECK(braid_call_working_set(BRAID_COLL_REDUCE_SCATTER, 1000, 4) == 5000,
          "reduce_scatter: every rank's piece sent, one received");
    CHECK(braid_call_working_set(BRAID_COLL_BROADCAST, 1000, 4) == 1000,
          "broadcast: one buffer");
}

/* A put-based model (one step at put_beta) and a send/recv one (two steps
 * at beta), as direct and ring are built. */
static double est_put(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return (double)in->bytes / (in->link.put_beta_gbps * 1e3);
}

/* What the last est_put call was handed beyond the link. */
static braid_bw_curve_t seen_curve;
static double           seen_ws;

static double est_put_seen(const braid_algo_t *self, const braid_cost_in_t *in)
{
    seen_curve = in->put_curve;
    seen_ws    = in->call_ws;
    return est_put(self, in);
}

static double est_sr(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return 2.0 * (double)in->bytes / (in->link.beta_gbps * 1e3);
}

static void test_estimates(void)
{
    braid_transport_t shm = {.name = "shm"};
    braid_tl_t        tl  = {.struct_size = sizeof(braid_tl_t), .ops = &shm};
    tl.link.beta_gbps     = 4.0; /* the in-cache figures, as calib sets */
    tl.link.put_beta_gbps = 20.0;
    braid_algo_t direct   = {.name     = "direct",
                             .coll     = BRAID_COLL_ALLREDUCE,
                             .estimate = est_put_seen};
    braid_algo_t ring     = {
            .name = "ring", .coll = BRAID_COLL_ALLREDUCE, .estimate = est_sr};
    const uint32_t    host    = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    braid_candidate_t cands[] = {
        {"direct@shm", &direct, &tl, "shm", BRAID_MEM_BIT(BRAID_MEM_HOST),
         NULL, NULL},
        {"ring@shm", &ring, &tl, "shm", BRAID_MEM_BIT(BRAID_MEM_HOST), NULL,
         NULL},
    };
    braid_algo_spec_t none;
    braid_tune_t      tune = {0};
    braid_algo_spec_parse(&none, NULL);
    braid_selector_t sel = {.ncands   = 2,
                            .cands    = cands,
                            .override = &none,
                            .tune     = &tune,
                            .nranks   = 4,
                            .nnodes   = 1,
                            .ppn      = 4,
                            .rank     = 1};
    braid_selector_init(&sel);
    braid_candidate_t *c;
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 64 << 20, host) ==
                  BRAID_OK &&
              c == &cands[0],
          "without curves: the link's figures at every size (direct)");
    double flat = braid_candidate_estimate(
        &sel, &cands[0], BRAID_COLL_ALLREDUCE, 64 << 20, host);
    CHECK(near(flat, (double)(64 << 20) / 20e3), "flat estimate %g", flat);

    /* put drops twentyfold beyond the caches, send/recv (pipelined pieces
     * that stay in them) hardly at all. */
    sel.nbw       = 1;
    sel.bw[0].tl  = &tl;
    sel.bw[0].sr  = (braid_bw_curve_t){4.0, 1 * MIB, 3.0, 32 * MIB};
    sel.bw[0].put = (braid_bw_curve_t){20.0, 1 * MIB, 1.0, 32 * MIB};
    braid_selector_fini(&sel);
    braid_selector_init(&sel);
    double small = braid_candidate_estimate(&sel, &cands[0],
                                            BRAID_COLL_ALLREDUCE, 4096, host);
    CHECK(near(small, 4096.0 / 20e3), "a small call: in-cache put, got %g",
          small);
    double big = braid_candidate_estimate(
        &sel, &cands[0], BRAID_COLL_ALLREDUCE, 64 << 20, host);
    CHECK(near(big, (double)(64 << 20) / 1e3),
          "a large call: out-of-cache put, got %g", big);
    CHECK(seen_curve.in_gbps == 20.0 && seen_curve.out_gbps == 1.0 &&
              seen_curve.out_ws == 32 * MIB && seen_ws == 128 * MIB,
          "the estimate is handed the put curve and the call's working set "
          "(got %g GB/s .. %g GB/s at %g, working set %g)",
          seen_curve.in_gbps, seen_curve.out_gbps, seen_curve.out_ws, seen_ws);
    double ring_big = braid_candidate_estimate(
        &sel, &cands[1], BRAID_COLL_ALLREDUCE, 64 << 20, host);
    CHECK(near(ring_big, 2.0 * (double)(64 << 20) / 3e3),
          "a large call: out-of-cache send/recv, got %g", ring_big);
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 4096, host) ==
                  BRAID_OK &&
              c == &cands[0],
          "in the caches the put-based candidate still wins");
    CHECK(braid_select(&c, &sel, BRAID_COLL_ALLREDUCE, 64 << 20, host) ==
                  BRAID_OK &&
              c == &cands[1],
          "beyond them the send/recv one does");
    CHECK(tl.link.put_beta_gbps == 20.0 && tl.link.beta_gbps == 4.0,
          "the transport's link is left as it was");

    braid_transport_t other  = {.name = "ucx"};
    braid_tl_t        tl_ucx = tl;
    tl_ucx.ops               = &other;
    cands[0].tl              = &tl_ucx;
    double ucx               = braid_candidate_estimate(
                      &sel, &cands[0], BRAID_COLL_ALLREDUCE, 64 << 20, host);
    CHECK(near(ucx, (double)(64 << 20) / 20e3),
          "a transport without curves keeps its link's figure, got %g", ucx);
    braid_selector_fini(&sel);
}

int main(void)
{
    test_rule();
    test_working_set();
    test_estimates();
    return check_summary("bw-curve");
}
