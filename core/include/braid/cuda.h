/* braid on CUDA device memory: stream-ordered collectives.
 *
 * The plain API (braid.h) takes device memory too: braid detects device
 * pointers, runs the call on a candidate that supports device memory (the
 * nccl plugin), after the work already queued on CUDA's legacy default
 * stream, and returns once the result is in place.
 *
 * The functions below are the same collectives enqueued on a CUDA stream,
 * as NCCL's are: they return once the work is queued on `stream`, ordered
 * after what was queued on it before and before what comes after; the
 * buffers must stay valid until the stream has run it.  Both buffers must
 * be device memory, and only candidates that can enqueue on a stream run
 * them (BRAID_ERR_NOT_SUPPORTED, with the reason, when none can).  An error
 * that happens later on the stream (a peer dies) aborts the work within
 * BRAID_TIMEOUT, so a cudaStreamSynchronize never hangs for good, and the
 * next call on the communicator reports it.
 *
 * No CUDA header is needed: cudaStream_t is declared here exactly as CUDA
 * declares it, so this header and cuda_runtime.h may be included in either
 * order. */
#ifndef BRAID_CUDA_H
#define BRAID_CUDA_H

#include <braid/braid.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef __DRIVER_TYPES_H__
typedef struct CUstream_st *cudaStream_t;
#endif

braid_status_t braid_allreduce_cuda(const void *sendbuf, void *recvbuf,
                                    size_t count, braid_dtype_t dtype,
                                    braid_op_t op, braid_comm_t *comm,
                                    cudaStream_t stream);
braid_status_t braid_reduce_scatter_cuda(const void *sendbuf, void *recvbuf,
                                         size_t recvcount, braid_dtype_t dtype,
                                         braid_op_t op, braid_comm_t *comm,
                                         cudaStream_t stream);
braid_status_t braid_allgather_cuda(const void *sendbuf, void *recvbuf,
                                    size_t sendcount, braid_dtype_t dtype,
                                    braid_comm_t *comm, cudaStream_t stream);
braid_status_t braid_broadcast_cuda(void *buf, size_t count,
                                    braid_dtype_t dtype, int root,
                                    braid_comm_t *comm, cudaStream_t stream);
/* Work queued on stream after it starts once every rank's stream got here. */
braid_status_t braid_barrier_cuda(braid_comm_t *comm, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
