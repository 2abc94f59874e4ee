/* NCCL's own cost model (its published tuning model, src/graph/tuning.cc),
 * reduced to what braid can know without NCCL's topology search: for each
 * algorithm (ring; tree for all-reduce) and protocol (LL, LL128, Simple)
 *
 *   time = base latency + steps x per-step latency of the links crossed
 *          + NCCL's byte count / algorithm bandwidth
 *
 * and the cheapest pair wins, as in NCCL.  Per-step latencies depend on the
 * link class (NVLink, PCIe, network); the bus bandwidth is the intra-node
 * link's on one node and the network's across nodes; each protocol gets
 * its share of it (LL moves 8 data bytes per 16, LL128 120 per 128).  The
 * model is pure: every rank computes the same value from the same agreed
 * inputs.  The constants are NCCL's. */
#include <math.h>

#include "nccl.h"

enum { LL = 0, LL128, SIMPLE, NPROTO };
enum { TREE = 0, RING, NALGO };

static const char *const names[NALGO][NPROTO] = {
    {"tree/LL", "tree/LL128", "tree/Simple"},
    {"ring/LL", "ring/LL128", "ring/Simple"},
};

/* Microseconds: fixed cost per call, and per step over each link class. */
static const double base_us[NALGO][NPROTO] = {{6.8, 14.0, 8.4},
                                              {6.6, 14.0, 8.4}};
static const double hw_us[BRAID_NCCL_LINK_COUNT][NALGO][NPROTO] = {
    [BRAID_NCCL_LINK_NVLINK] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}},
    [BRAID_NCCL_LINK_PCI]    = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}},
    [BRAID_NCCL_LINK_NET]    = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}},
};
/* LL's bandwidth ceiling (GB/s) on one node, two nodes, more. */
static const double ll_max_gbps[3] = {39.0, 39.0, 20.4};

static int log2i(int n)
{
    int l = 0;
    while (n > 1) {
        n >>= 1;
        l++;
    }
    return l;
}

/* Latency of one (algorithm, protocol), us. */
static double latency(const braid_nccl_model_t *m, int algo, int proto,
                      braid_coll_t coll, int nranks, int nnodes, int ppn)
{
    double intra_us = hw_us[m->intra][algo][proto];
    /* With one rank per node every step crosses the network, and NCCL
     * charges the tree's network latency even to rings. */
    double inter_us =
        hw_us[BRAID_NCCL_LINK_NET][ppn == 1 ? TREE : algo][proto];
    if (algo == TREE)
        return base_us[algo][proto] +
               2.0 * ((ppn - 1) * intra_us + log2i(nnodes) * inter_us);
    int allreduce   = coll == BRAID_COLL_ALLREDUCE;
    int steps       = allreduce                      ? 2 * (nranks - 1)
                      : coll == BRAID_COLL_BROADCAST ? nranks
                                                     : nranks - 1;
    int inter_steps = nnodes > 1 ? (allreduce ? 2 : 1) * (nnodes - 1) : 0;
    return base_us[algo][proto] + (steps - inter_steps) * intra_us +
           inter_steps * inter_us;
}

/* Algorithm bandwidth of one (algorithm, protocol), GB/s; 0: not run. */
static double bandwidth(const braid_nccl_model_t *m, int algo, int proto,
                        braid_coll_t coll, int nranks, int nnodes)
{
    double bus    = nnodes > 1 ? m->inter_gbps : m->intra_gbps;
    double ll_max = ll_max_gbps[nnodes > 2 ? 2 : nnodes - 1];
    /* LL128 relies on NVLink's 128-byte store atomicity. */
    if (proto == LL128 && m->intra != BRAID_NCCL_LINK_NVLINK)
        return 0;
    if (algo == TREE) {
        double bw =
            proto == LL ? fmin(bus / 3.8, ll_max)
            : proto == LL128
                ? 0.92 * bus * (nnodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0)
                : 0.92 * bus;
        return bw * 0.5;
    }
    double bw        = proto == LL      ? fmin(ll_max, 0.5 * bus)
                       : proto == LL128 ? 0.92 * bus
                                        : bus;
    int    allreduce = coll == BRAID_COLL_ALLREDUCE;
    int    steps     = allreduce                      ? 2 * (nranks - 1)
                       : coll == BRAID_COLL_BROADCAST ? nranks
                                                      : nranks - 1;
    return bw * nranks / steps;
}

double braid_nccl_model_time(const braid_nccl_model_t *m, braid_coll_t coll,
                             size_t bytes, int nranks, int nnodes, int ppn,
                             const char **choice)
{
    /* A barrier is an all-reduce of one word; NCCL moves whole buffers in
     * reduce-scatter and all-gather, braid's bytes are one rank's part. */
    if (coll == BRAID_COLL_BARRIER) {
        coll  = BRAID_COLL_ALLREDUCE;
        bytes = 4;
    }
    double nbytes = (double)bytes;
    if (coll == BRAID_COLL_REDUCE_SCATTER || coll == BRAID_COLL_ALLGATHER)
        nbytes *= nranks;
    if (nnodes < 1)
        nnodes = 1;
    if (ppn < 1)
        ppn = 1;
    if (nranks < 2) { /* a local copy */
        if (choice)
            *choice = "copy";
        return base_us[RING][SIMPLE] + nbytes / (1e3 * m->intra_gbps);
    }
    double best = -1;
    for (int algo = 0; algo < NALGO; algo++) {
        if (algo == TREE && coll != BRAID_COLL_ALLREDUCE)
            continue;
        for (int proto = 0; proto < NPROTO; proto++) {
            double bw = bandwidth(m, algo, proto, coll, nranks, nnodes);
            if (bw <= 0)
                continue;
            double t = latency(m, algo, proto, coll, nranks, nnodes, ppn) +
                       nbytes / (1e3 * bw);
            if (best < 0 || t < best) {
                best = t;
                if (choice)
                    *choice = names[algo][proto];
            }
        }
    }
    return best;
}
