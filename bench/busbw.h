/* Bus bandwidth, as nccl-tests define it: the algorithm bandwidth times
 * the share of the data that must cross a rank's link in the best
 * algorithm, so that figures of different rank counts compare against
 * the hardware's.  Shared by braid-bench and braid-tune. */
#ifndef BRAID_BENCH_BUSBW_H
#define BRAID_BENCH_BUSBW_H

#include <braid/braid.h>

static inline double braid_bench_bus_factor(braid_coll_t coll, int n)
{
    switch (coll) {
    case BRAID_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case BRAID_COLL_REDUCE_SCATTER:
    case BRAID_COLL_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

#endif
