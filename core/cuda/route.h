/* Which candidates may run a call, from where its buffers live and
 * whether it is stream-ordered (core/include/braid/cuda.h).  Host-only
 * candidates are never handed a device pointer, and a stream-ordered call
 * goes only to candidates that enqueue on a stream. */
#ifndef BRAID_CORE_CUDA_ROUTE_H
#define BRAID_CORE_CUDA_ROUTE_H

#include "cuda/devptr.h"

struct braid_comm;

typedef struct braid_route {
    braid_mem_kind_t mem;       /* of both buffers */
    int              on_stream; /* a braid_*_cuda call */
    void            *stream;    /* its cudaStream_t (NULL: legacy default) */
} braid_route_t;

/* Fills *route for a call whose buffers are sendbuf/recvbuf (bytes: the
 * larger one's length, 0 for none), or returns why the call cannot run:
 * BRAID_ERR_INVALID_ARG for buffers of two kinds or a stream-ordered call
 * on host memory, BRAID_ERR_NOT_SUPPORTED when no candidate of comm takes
 * such a call.  Pure argument checking: every rank of a correct program
 * gets the same answer. */
braid_status_t braid_route_call(braid_route_t *route,
                                const struct braid_comm *comm,
                                braid_coll_t coll, const void *sendbuf,
                                const void *recvbuf, size_t bytes,
                                int on_stream, void *stream);

#endif
