/* Which candidates may run a call, from where its buffers live and
 * whether it is stream-ordered (core/include/braid/cuda.h).  Host-only
 * candidates are never handed a device pointer, and a stream-ordered call
 * goes only to candidates that queue work on a stream. */
#ifndef BRAID_CORE_CUDA_ROUTE_H
#define BRAID_CORE_CUDA_ROUTE_H

#include <braid/plugin.h>

#include "cuda/devptr.h"

typedef struct braid_route {
    braid_mem_t mem;       /* of both buffers */
    uint32_t    need;      /* what a candidate must take (select.h) */
    int         on_stream; /* a braid_*_cuda call */
    void       *stream;    /* its cudaStream_t (NULL: legacy default) */
} braid_route_t;

/* A plain call in a process that can have no device memory. */
static inline void braid_route_host(braid_route_t *route)
{
    route->mem       = BRAID_MEM_HOST;
    route->need      = BRAID_MEM_BIT(BRAID_MEM_HOST);
    route->on_stream = 0;
    route->stream    = NULL;
}

/* Fills *route for a call whose buffers are sendbuf/recvbuf (bytes: the
 * length of one rank's part, 0 for none), or returns why the call cannot
 * run: BRAID_ERR_INVALID_ARG for buffers of two kinds or a stream-ordered
 * call on host memory, or the driver's failure to tell.  A stream-ordered
 * call without buffers (a barrier) counts as device memory. */
braid_status_t braid_route_call(braid_route_t *route, braid_coll_t coll,
                                const void *sendbuf, const void *recvbuf,
                                size_t bytes, int on_stream, void *stream);

#endif
