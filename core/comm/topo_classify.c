/* What hop counts between hosts say about how the hosts are cabled.
 *
 * A switch (or one routed fabric) puts every pair of hosts the same number
 * of routers apart.  A cabled ring whose hosts forward for each other puts
 * neighbours the fewest routers apart and a host d links away d-1 more: the
 * neighbour relation is one cycle through every host, and every distance
 * follows from the positions on it.  Anything else is neither; the caller
 * then falls back to the switch model and says so.  Three hosts on a ring
 * are all neighbours, as on a switch, and cost the same, so they are a
 * switch here. */
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"

static int hop(const int *hops, int n, int a, int b)
{
    return hops[a * n + b];
}

/* Follows the neighbour relation from host 0 into order[]; 0 when it is
 * one cycle through all n hosts, each with exactly two neighbours. */
static int walk_cycle(const int *hops, int n, int near, int *order)
{
    for (int a = 0; a < n; a++) {
        int k = 0;
        for (int b = 0; b < n; b++)
            if (b != a) {
                int fwd = hop(hops, n, a, b) == near;
                if (fwd != (hop(hops, n, b, a) == near))
                    return -1; /* one way near, the other not */
                k += fwd;
            }
        if (k != 2)
            return -1;
    }
    order[0] = 0;
    int prev = -1;
    for (int i = 1; i < n; i++) {
        int cur = order[i - 1], next = -1;
        for (int b = 0; b < n && next < 0; b++)
            if (b != cur && b != prev && hop(hops, n, cur, b) == near)
                next = b;
        for (int j = 0; j < i; j++)
            if (order[j] == next)
                return -1; /* closed early: several cycles */
        order[i] = next;
        prev     = cur;
    }
    return hop(hops, n, order[n - 1], 0) == near ? 0 : -1;
}

braid_topo_kind_t braid_topo_classify(const int *hops, int n, int *order,
                                      int *fits, char *why, size_t len)
{
    *fits = 1;
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (n <= 1) {
        snprintf(why, len, "one host");
        return BRAID_TOPO_SINGLE_HOST;
    }
    int near = -1, far = -1;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            int h = hop(hops, n, a, b);
            if (a == b)
                continue;
            if (h < 0) {
                *fits = 0;
                snprintf(why, len, "no probe from host %d reached host %d", a,
                         b);
                return BRAID_TOPO_SWITCH;
            }
            near = near < 0 || h < near ? h : near;
            far  = h > far ? h : far;
        }
    if (near == far) {
        snprintf(why, len, "every pair of hosts %d router%s apart", near,
                 near == 1 ? "" : "s");
        return BRAID_TOPO_SWITCH;
    }
    int ring[BRAID_TOPO_MAX_CLASSIFY];
    if (n <= BRAID_TOPO_MAX_CLASSIFY && walk_cycle(hops, n, near, ring) == 0) {
        int ok = 1;
        int pos[BRAID_TOPO_MAX_CLASSIFY];
        for (int i = 0; i < n; i++)
            pos[ring[i]] = i;
        for (int a = 0; a < n && ok; a++)
            for (int b = 0; b < n && ok; b++) {
                int d = pos[a] > pos[b] ? pos[a] - pos[b] : pos[b] - pos[a];
                d     = d < n - d ? d : n - d;
                ok    = a == b || hop(hops, n, a, b) == near + d - 1;
            }
        if (ok) {
            memcpy(order, ring, (size_t)n * sizeof(int));
            snprintf(why, len,
                     "neighbours %d router%s apart, a host d links "
                     "away d-1 more: a ring",
                     near, near == 1 ? "" : "s");
            return BRAID_TOPO_RING;
        }
    }
    *fits = 0;
    snprintf(why, len, "hop counts %d to %d fit neither one switch nor a ring",
             near, far);
    return BRAID_TOPO_SWITCH;
}
