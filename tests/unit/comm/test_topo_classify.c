/* braid_topo_classify: which hop matrices are a switch, which a ring, and
 * which neither.  The matrices are those the emulated clusters of braidrun
 * --netns produce (tests/netns checks that they do), and the ones a broken
 * network could. */
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "comm/comm.h"

#define MAXN 16

/* Hops of a ring whose hosts sit at pos[h] round it, neighbours `near`
 * routers apart. */
static void ring_hops(int *hops, int n, const int *pos, int near)
{
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            int d           = abs(pos[a] - pos[b]);
            d               = d < n - d ? d : n - d;
            hops[a * n + b] = a == b ? 0 : near + d - 1;
        }
}

static void flat_hops(int *hops, int n, int h)
{
    for (int i = 0; i < n * n; i++)
        hops[i] = i / n == i % n ? 0 : h;
}

static braid_topo_kind_t classify(const int *hops, int n, int *order,
                                  int *fits, char *why)
{
    return braid_topo_classify(hops, n, order, fits, why, 160);
}

int main(void)
{
    int  hops[MAXN * MAXN] = {0}, order[MAXN], pos[MAXN], fits;
    char why[160];

    CHECK(classify(hops, 1, order, &fits, why) == BRAID_TOPO_SINGLE_HOST &&
              fits,
          "one host");

    /* A switch, and a routed fabric where every pair is one router apart. */
    for (int n = 2; n <= MAXN; n *= 2)
        for (int h = 0; h <= 1; h++) {
            flat_hops(hops, n, h);
            CHECK(classify(hops, n, order, &fits, why) == BRAID_TOPO_SWITCH &&
                      fits,
                  "%d hosts all %d apart: switch (%s)", n, h, why);
        }

    /* Rings in rank order, 4 to 16 hosts; 3 hosts are all neighbours. */
    for (int n = 3; n <= MAXN; n++) {
        for (int i = 0; i < n; i++)
            pos[i] = i;
        ring_hops(hops, n, pos, 0);
        braid_topo_kind_t k = classify(hops, n, order, &fits, why);
        if (n == 3) {
            CHECK(k == BRAID_TOPO_SWITCH && fits, "3-ring: switch (%s)", why);
            continue;
        }
        CHECK(k == BRAID_TOPO_RING && fits, "%d-ring: ring (%s)", n, why);
        int in_order = 1;
        for (int i = 0; i < n; i++)
            in_order &= order[i] == i;
        CHECK(in_order, "%d-ring: order 0..n-1", n);
    }

    /* A ring cabled out of rank order: 0 2 4 1 3 5 round it. */
    {
        int n = 6, cab[] = {0, 2, 4, 1, 3, 5};
        for (int i = 0; i < n; i++)
            pos[cab[i]] = i;
        ring_hops(hops, n, pos, 0);
        CHECK(classify(hops, n, order, &fits, why) == BRAID_TOPO_RING && fits,
              "ring out of order: ring (%s)", why);
        CHECK(memcmp(order, cab, sizeof(cab)) == 0,
              "ring order found: %d %d "
              "%d %d %d %d",
              order[0], order[1], order[2], order[3], order[4], order[5]);
    }

    /* Neighbours one router apart (hosts behind routers on a ring). */
    for (int i = 0; i < 8; i++)
        pos[i] = i;
    ring_hops(hops, 8, pos, 1);
    CHECK(classify(hops, 8, order, &fits, why) == BRAID_TOPO_RING && fits,
          "ring of routers: ring (%s)", why);

    /* A lost probe: switch assumed, and said. */
    ring_hops(hops, 8, pos, 0);
    hops[2 * 8 + 5] = -1;
    CHECK(classify(hops, 8, order, &fits, why) == BRAID_TOPO_SWITCH && !fits &&
              strstr(why, "host 2 reached host 5") != NULL,
          "lost probe: not fitting, named (%s)", why);

    /* A chain (a ring with one cable missing) is neither. */
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
            hops[a * 6 + b] = a == b ? 0 : abs(a - b) - 1;
    CHECK(classify(hops, 6, order, &fits, why) == BRAID_TOPO_SWITCH && !fits,
          "chain: neither (%s)", why);

    /* Two separate triangles joined far apart: every host has two
     * neighbours, but they form two cycles. */
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
            hops[a * 6 + b] = a == b ? 0 : (a / 3 == b / 3 ? 0 : 3);
    CHECK(classify(hops, 6, order, &fits, why) == BRAID_TOPO_SWITCH && !fits,
          "two cycles: neither (%s)", why);

    /* A ring whose far distances are wrong (one shortcut). */
    ring_hops(hops, 8, pos, 0);
    hops[0 * 8 + 4] = hops[4 * 8 + 0] = 1;
    CHECK(classify(hops, 8, order, &fits, why) == BRAID_TOPO_SWITCH && !fits,
          "ring with a shortcut: neither (%s)", why);

    /* Asymmetric neighbours: a near b but b not near a. */
    ring_hops(hops, 6, pos, 0);
    hops[1 * 6 + 0] = 2;
    CHECK(classify(hops, 6, order, &fits, why) == BRAID_TOPO_SWITCH && !fits,
          "asymmetric: neither (%s)", why);

    return check_summary("topo_classify");
}
