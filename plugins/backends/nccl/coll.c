/* The collectives: braid's dtypes and ops mapped onto NCCL's, enqueued on
 * a stream, and completed.
 *
 * A plain call runs on the communicator's stream, which is ordered after
 * work on CUDA's legacy default stream (it is a blocking stream), and is
 * complete when the event recorded after it has fired: the core polls
 * braid_nccl_coll_test, so the call returns with the result in place.  A
 * stream-ordered call is enqueued on the caller's stream and is done for
 * braid once enqueued; the watchdog (comm.c) keeps it from hanging. */
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static const ncclDataType_t dtypes[BRAID_DTYPE_COUNT] = {
    [BRAID_F32] = ncclFloat32, [BRAID_F64] = ncclFloat64,
    [BRAID_F16] = ncclFloat16, [BRAID_BF16] = ncclBfloat16,
    [BRAID_I32] = ncclInt32,   [BRAID_I64] = ncclInt64,
    [BRAID_U8] = ncclUint8,
};

/* The plugin links nothing of libbraid: its own tables. */
static const size_t dtype_sizes[BRAID_DTYPE_COUNT]    = {4, 8, 2, 2, 4, 8, 1};
static const char *const coll_names[BRAID_COLL_COUNT] = {
    "allreduce", "reduce_scatter", "allgather", "broadcast", "barrier"};

static const ncclRedOp_t ops[BRAID_OP_COUNT] = {
    [BRAID_SUM] = ncclSum, [BRAID_PROD] = ncclProd, [BRAID_MIN] = ncclMin,
    [BRAID_MAX] = ncclMax, [BRAID_AVG] = ncclAvg,
};

/* BRAID_NCCL_AVG=sum runs AVG as a sum and a division, as for NCCL before
 * 2.10, on any version: it is there to test that path. */
static int avg_by_sum(const braid_nccl_lib_t *lib)
{
    const char *env = getenv("BRAID_NCCL_AVG");
    return !lib->has_avg || (env != NULL && strcmp(env, "sum") == 0);
}

/* The NCCL call itself; caller holds c->lock. */
static ncclResult_t enqueue(braid_nccl_comm_t *c, const braid_nccl_op_t *op,
                            ncclDataType_t dt, ncclRedOp_t rop,
                            cudaStream_t stream)
{
    const braid_nccl_lib_t *lib = c->lib;
    switch (op->coll) {
    case BRAID_COLL_ALLREDUCE:
        return lib->all_reduce(op->sendbuf, op->recvbuf, op->count, dt, rop,
                               c->comm, stream);
    case BRAID_COLL_REDUCE_SCATTER:
        return lib->reduce_scatter(op->sendbuf, op->recvbuf, op->count, dt,
                                   rop, c->comm, stream);
    case BRAID_COLL_ALLGATHER:
        return lib->all_gather(op->sendbuf, op->recvbuf, op->count, dt,
                               c->comm, stream);
    case BRAID_COLL_BROADCAST:
        return lib->broadcast(op->sendbuf, op->recvbuf, op->count, dt,
                              op->root, c->comm, stream);
    case BRAID_COLL_BARRIER: /* an all-reduce of one word */
        return lib->all_reduce(c->scratch, c->scratch, 1, ncclInt32, ncclSum,
                               c->comm, stream);
    default: return ncclInvalidArgument;
    }
}

/* AVG before NCCL 2.10: the sum is in recvbuf; divide it on the host. */
static braid_status_t divide_on_host(braid_nccl_comm_t     *c,
                                     const braid_nccl_op_t *op)
{
    const braid_nccl_lib_t *lib   = c->lib;
    size_t                  bytes = op->count * dtype_sizes[op->dtype];
    void                   *host  = malloc(bytes ? bytes : 1);
    if (host == NULL)
        return braid_nccl_fail(BRAID_ERR_NO_MEMORY,
                               "nccl: avg: out of memory");
    cudaError_t err =
        lib->memcpy_sync(host, op->recvbuf, bytes, cudaMemcpyDeviceToHost);
    if (err == cudaSuccess) {
        braid_nccl_host.finish_avg(host, op->count, op->dtype, BRAID_AVG,
                                   c->size);
        err =
            lib->memcpy_sync(op->recvbuf, host, bytes, cudaMemcpyHostToDevice);
    }
    free(host);
    return err == cudaSuccess ? BRAID_OK
                              : braid_nccl_cuda_error(lib, err,
                                                      "nccl: avg "
                                                      "division on the host");
}

braid_status_t braid_nccl_coll_start(braid_nccl_comm_t *c, braid_nccl_op_t *op)
{
    const braid_nccl_lib_t *lib = c->lib;
    /* First, while every rank is in step: the first call makes the NCCL
     * communicator (collective). */
    braid_status_t st = braid_nccl_comm_ready(c);
    if (st != BRAID_OK)
        return st;
    if ((unsigned)op->dtype >= BRAID_DTYPE_COUNT ||
        (unsigned)op->op >= BRAID_OP_COUNT ||
        (unsigned)op->coll >= BRAID_COLL_COUNT)
        return braid_nccl_fail(BRAID_ERR_INVALID_ARG,
                               "nccl: invalid dtype "
                               "%d, op %d or collective %d",
                               (int)op->dtype, (int)op->op, (int)op->coll);
    if (op->dtype == BRAID_BF16 && !lib->has_avg)
        return braid_nccl_fail(BRAID_ERR_NOT_SUPPORTED,
                               "nccl: bf16 needs "
                               "NCCL 2.10 or newer; this is NCCL %s (%s)",
                               lib->version, lib->path);
    ncclRedOp_t rop = ops[op->op];
    op->avg_on_host = 0;
    if (op->op == BRAID_AVG && avg_by_sum(lib) &&
        (op->coll == BRAID_COLL_ALLREDUCE ||
         op->coll == BRAID_COLL_REDUCE_SCATTER)) {
        rop             = ncclSum;
        op->avg_on_host = 1;
    }
    cudaStream_t stream = op->on_stream ? op->stream : c->stream;

    pthread_mutex_lock(&c->lock);
    if (c->failed != BRAID_OK || c->comm == NULL) {
        st = braid_nccl_fail(
            c->failed != BRAID_OK ? c->failed : BRAID_ERR_STATE, "nccl: %s",
            c->failed != BRAID_OK ? c->failed_msg : "no NCCL communicator");
        pthread_mutex_unlock(&c->lock);
        return st;
    }
    ncclResult_t res  = enqueue(c, op, dtypes[op->dtype], rop, stream);
    const char  *what = coll_names[op->coll];
    if (res == ncclInProgress) /* a non-blocking communicator's set-up */
        st = BRAID_INPROGRESS;
    else if (res != ncclSuccess)
        st = braid_nccl_error(lib, c->comm, res, what);
    pthread_mutex_unlock(&c->lock);
    if (st == BRAID_INPROGRESS) /* connections made in the background */
        st = braid_nccl_comm_settle(c, what);
    if (st != BRAID_OK) {
        braid_nccl_comm_abort(c, st, braid_nccl_last_error());
        return st;
    }
    op->enqueued = 1;

    pthread_mutex_lock(&c->lock);
    cudaError_t err = cudaSuccess;
    if (!op->on_stream)
        err = lib->event_record(c->done, c->stream);
    else if (!op->avg_on_host)
        st = braid_nccl_comm_watch(c, op->stream);
    pthread_mutex_unlock(&c->lock);
    if (err != cudaSuccess)
        st = braid_nccl_cuda_error(lib, err, "nccl: cudaEventRecord");
    if (st == BRAID_OK && op->on_stream && op->avg_on_host) {
        /* Stream order cannot be kept for a division on the host: wait. */
        err = lib->stream_synchronize(op->stream);
        st  = err == cudaSuccess ? divide_on_host(c, op)
                                 : braid_nccl_cuda_error(lib, err, what);
    }
    return st;
}

braid_status_t braid_nccl_coll_test(braid_nccl_comm_t *c, braid_nccl_op_t *op)
{
    if (op->on_stream)
        return BRAID_OK; /* enqueued: the stream completes it */
    cudaError_t err = c->lib->event_query(c->done);
    if (err == cudaErrorNotReady) {
        braid_status_t st = braid_nccl_comm_check(c);
        return st == BRAID_OK ? BRAID_INPROGRESS : st;
    }
    if (err != cudaSuccess)
        return braid_nccl_cuda_error(c->lib, err, coll_names[op->coll]);
    op->enqueued = 0;
    return op->avg_on_host ? divide_on_host(c, op) : BRAID_OK;
}

void braid_nccl_coll_cancel(braid_nccl_comm_t *c, braid_nccl_op_t *op)
{
    /* A plain call that did not complete still has a kernel waiting for
     * peers and using the buffers: only an abort stops it. */
    if (!op->on_stream && op->enqueued &&
        c->lib->event_query(c->done) != cudaSuccess)
        braid_nccl_comm_abort(c, BRAID_ERR_STATE,
                              "aborted after a collective "
                              "failed or timed out");
    op->enqueued = 0;
}
