/* The p2p algorithms' estimates on several hosts: recursive doubling and
 * halving pay for links their partners share (ranks of a host behind one
 * switch port; hosts in between on a cabled ring), the ring algorithms do
 * not, and one host is unchanged.  The plugin is dlopen()ed from the build
 * tree, as in test_ucx_threads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../check.h"
#include "plugins.h"

#define ALPHA 10.0
#define BETA  1.5 /* GB/s: B(x) = x / 1500 us */
#define GAMMA 8.0

static const th_plugin_t *plug;

static double est(braid_coll_t coll, const char *name, int n, int nnodes,
                  int ppn, braid_topo_kind_t topo, double bytes)
{
    braid_cost_in_t in    = {0};
    in.struct_size        = sizeof(in);
    in.coll               = coll;
    in.bytes              = (size_t)bytes;
    in.nranks             = n;
    in.nnodes             = nnodes;
    in.ppn                = ppn;
    in.topo               = topo;
    in.link.struct_size   = sizeof(in.link);
    in.link.alpha_us      = ALPHA;
    in.link.beta_gbps     = BETA;
    in.link.put_alpha_us  = 3 * ALPHA;
    in.link.put_beta_gbps = BETA / 2;
    in.reduce_gbps        = GAMMA;
    const braid_algo_t *a = th_find_algo(plug, coll, name);
    return a->estimate(a, &in);
}

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b) + 1.0);
}

int main(int argc, char **argv)
{
    th_plugin_t        p;
    const braid_coll_t AR       = BRAID_COLL_ALLREDUCE,
                       RS       = BRAID_COLL_REDUCE_SCATTER,
                       AG       = BRAID_COLL_ALLGATHER;
    const braid_topo_kind_t ONE = BRAID_TOPO_SINGLE_HOST,
                            SW = BRAID_TOPO_SWITCH, RING = BRAID_TOPO_RING;
    const double m = 1e6, B = m / (BETA * 1e3), G = m / (GAMMA * 1e3);
    if (argc != 3 || th_plugin_load(&p, argv[1], argv[2]) != 0) {
        fprintf(stderr,
                "usage: %s PATH/libbraid-ucx.so PATH/libbraid-p2p.so\n",
                argv[0]);
        return 2;
    }
    plug = &p;

    /* Recursive doubling, 4 hosts of one rank: partners 1 and 2 hosts
     * away.  Switch: 2 (alpha + B + G).  Ring: the second step's partner
     * is two links away, both carrying two streams: B + 2B. */
    CHECK(near(est(AR, "recdbl", 4, 4, 1, SW, m), 2 * (ALPHA + B + G)),
          "recdbl, switch of 4: %f", est(AR, "recdbl", 4, 4, 1, SW, m));
    CHECK(near(est(AR, "recdbl", 4, 4, 1, RING, m), 2 * ALPHA + 3 * B + 2 * G),
          "recdbl, ring of 4: %f", est(AR, "recdbl", 4, 4, 1, RING, m));
    CHECK(near(est(AR, "recdbl", 4, 1, 4, ONE, m), 2 * (ALPHA + B + G)),
          "recdbl, one host: unchanged");
    /* 8 ranks on 4 hosts of 2: the first step stays on the host, the
     * others put both ranks of a host on its link (and on the ring, the
     * last one two links away): switch B + 2B + 2B, ring B + 2B + 4B. */
    CHECK(near(est(AR, "recdbl", 8, 4, 2, SW, m), 3 * (ALPHA + G) + 5 * B),
          "recdbl, switch of 4 x 2: %f", est(AR, "recdbl", 8, 4, 2, SW, m));
    CHECK(near(est(AR, "recdbl", 8, 4, 2, RING, m), 3 * (ALPHA + G) + 7 * B),
          "recdbl, ring of 4 x 2: %f", est(AR, "recdbl", 8, 4, 2, RING, m));
    /* 8 hosts on a ring: partners 1, 2, 4 links away: B + 2B + 4B. */
    CHECK(near(est(AR, "recdbl", 8, 8, 1, RING, m), 3 * (ALPHA + G) + 7 * B),
          "recdbl, ring of 8");

    /* The ring algorithm talks to neighbours only: same on every topology. */
    for (int k = 0; k < 2; k++) {
        int    ppn = k + 1;
        double sw  = est(AR, "ring", 4 * ppn, 4, ppn, SW, m);
        CHECK(near(est(AR, "ring", 4 * ppn, 4, ppn, RING, m), sw) &&
                  near(est(AR, "ring", 4 * ppn, 1, 4 * ppn, ONE, m), sw),
              "ring allreduce depends on the topology (ppn %d)", ppn);
    }

    /* Recursive halving moves the most data to the farthest partner. */
    CHECK(est(RS, "recdbl", 8, 8, 1, RING, m) >
              est(RS, "recdbl", 8, 8, 1, SW, m),
          "reduce_scatter recdbl: ring not dearer than switch");
    CHECK(near(est(RS, "recdbl", 8, 1, 8, ONE, m),
               3 * ALPHA +
                   7.0 / 8 * 8 * m * (1 / (BETA * 1e3) + 1 / (GAMMA * 1e3))),
          "reduce_scatter recdbl, one host: unchanged");
    /* Allgather: (n-1) B(m) on one host, whatever n; more on a ring. */
    CHECK(near(est(AG, "recdbl", 6, 1, 6, ONE, m), 3 * ALPHA + 5 * B),
          "allgather recdbl (Bruck), one host");
    CHECK(near(est(AG, "recdbl", 8, 8, 1, RING, m),
               3 * ALPHA + (1 + 2 * 2 + 4 * 4) * B),
          "allgather recdbl, ring of 8: %f",
          est(AG, "recdbl", 8, 8, 1, RING, m));

    /* Where the model says the choice moves: on 4 hosts of one rank the
     * ring algorithm overtakes recursive doubling at a smaller size on a
     * ring of hosts than behind a switch; and on 4 hosts than on 2. */
    double at = 65536;
    CHECK(est(AR, "recdbl", 4, 4, 1, SW, at) <
                  est(AR, "ring", 4, 4, 1, SW, at) &&
              est(AR, "ring", 4, 4, 1, RING, at) <
                  est(AR, "recdbl", 4, 4, 1, RING, at),
          "64 KiB on 4 hosts: recdbl behind a switch, ring on a ring");
    at = 131072;
    CHECK(est(AR, "recdbl", 2, 2, 1, SW, at) <
                  est(AR, "ring", 2, 2, 1, SW, at) &&
              est(AR, "ring", 4, 4, 1, SW, at) <
                  est(AR, "recdbl", 4, 4, 1, SW, at),
          "128 KiB: recdbl on 2 hosts, ring on 4");

    th_plugin_unload(&p);
    return check_summary("ucx_cost_topo");
}
