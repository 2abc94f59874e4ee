/* How far apart the hosts of a channel are, measured (probe.c). */
#ifndef BRAID_CORE_BOOTSTRAP_PROBE_H
#define BRAID_CORE_BOOTSTRAP_PROBE_H

#include "bootstrap/bootstrap.h"

/* Above this many hosts the probe is skipped (it sends nnodes^2
 * datagrams); *probed is then 0. */
#define BRAID_PROBE_MAX_NODES 64

/* Routers between every pair of hosts, from the IP TTL of UDP probes that
 * the lowest rank of each host sends to the lowest rank of every other,
 * over the interface the channel itself uses.  node_of_rank[size] numbers
 * the hosts 0..nnodes-1.  hops[a * nnodes + b]: the routers a probe from
 * host a passed on its way to host b (0 for hosts on one switch or link,
 * -1 when no probe arrived, 0 on the diagonal).  Every rank gets the same
 * matrix.  Collective; bounded by about half a second when probes are
 * lost (a firewall), by the channel's timeout otherwise. */
braid_status_t braid_bootstrap_hops(braid_bootstrap_t *bs,
                                    const int *node_of_rank, int nnodes,
                                    int *hops, int *probed);

#endif
