/* The stream-ordered collectives (core/include/braid/cuda.h): the same
 * path as the plain ones, with the call marked stream-ordered, so that
 * only candidates that enqueue on a stream run it; such a candidate
 * completes the call as soon as the work is queued. */
#include <braid/cuda.h>

#include "comm/comm.h"
#include "util/api.h"
#include "util/log.h"

/* The public call's name for the thread guard (comm/entry.c): a stream
 * call enters the communicator as its plain form does. */
static braid_api_t api_of(braid_coll_t coll)
{
    switch (coll) {
    case BRAID_COLL_ALLREDUCE: return BRAID_API_ALLREDUCE;
    case BRAID_COLL_REDUCE_SCATTER: return BRAID_API_REDUCE_SCATTER;
    case BRAID_COLL_ALLGATHER: return BRAID_API_ALLGATHER;
    case BRAID_COLL_BROADCAST: return BRAID_API_BROADCAST;
    default: return BRAID_API_BARRIER;
    }
}

static braid_status_t run_on_stream(braid_comm_t *comm, braid_coll_t coll,
                                    const void *sendbuf, void *recvbuf,
                                    size_t count, braid_dtype_t dtype,
                                    braid_op_t op, int root,
                                    cudaStream_t stream)
{
    return braid_coll_run(comm, api_of(coll), coll, sendbuf, recvbuf, count,
                          dtype, op, root, 1, stream);
}

BRAID_API braid_status_t braid_allreduce_cuda(
    const void *sendbuf, void *recvbuf, size_t count, braid_dtype_t dtype,
    braid_op_t op, braid_comm_t *comm, cudaStream_t stream)
{
    return run_on_stream(comm, BRAID_COLL_ALLREDUCE, sendbuf, recvbuf, count,
                         dtype, op, 0, stream);
}

BRAID_API braid_status_t braid_reduce_scatter_cuda(
    const void *sendbuf, void *recvbuf, size_t recvcount, braid_dtype_t dtype,
    braid_op_t op, braid_comm_t *comm, cudaStream_t stream)
{
    return run_on_stream(comm, BRAID_COLL_REDUCE_SCATTER, sendbuf, recvbuf,
                         recvcount, dtype, op, 0, stream);
}

BRAID_API braid_status_t braid_allgather_cuda(const void *sendbuf,
                                              void *recvbuf, size_t sendcount,
                                              braid_dtype_t dtype,
                                              braid_comm_t *comm,
                                              cudaStream_t  stream)
{
    return run_on_stream(comm, BRAID_COLL_ALLGATHER, sendbuf, recvbuf,
                         sendcount, dtype, BRAID_SUM, 0, stream);
}

BRAID_API braid_status_t braid_broadcast_cuda(void *buf, size_t count,
                                              braid_dtype_t dtype, int root,
                                              braid_comm_t *comm,
                                              cudaStream_t  stream)
{
    return run_on_stream(comm, BRAID_COLL_BROADCAST, buf, buf, count, dtype,
                         BRAID_SUM, root, stream);
}

BRAID_API braid_status_t braid_barrier_cuda(braid_comm_t *comm,
                                            cudaStream_t  stream)
{
    return run_on_stream(comm, BRAID_COLL_BARRIER, NULL, NULL, 0, BRAID_U8,
                         BRAID_SUM, 0, stream);
}
