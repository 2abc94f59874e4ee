/* A stand-in for libnccl.so.2, for the tests of the NCCL plugin's probe
 * and error paths on machines without a GPU.  It runs no collective on a
 * GPU: its "device memory" is host memory (see stub_cudart.c), and it
 * behaves as told: STUB_NCCL_VERSION in the environment is the code
 * ncclGetVersion reports (default 22809), and stub_nccl_fail() names the
 * call that fails (uid, init, coll, async; "" for none).  It records the
 * arguments of the last collective for the test to read.  The plugin's
 * watchdog thread calls in too, so what both sides touch is atomic. */
#include <stdlib.h>
#include <string.h>

#include "../../plugins/backends/nccl/api.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct stub_call {
    int    coll; /* 0 allreduce, 1 reduce_scatter, 2 allgather, 3 bcast */
    size_t count;
    int    dtype, op, root;
    cudaStream_t stream;
} stub_call_t;

static stub_call_t last_call;
static int         nranks     = 1, aborts, destroys, pending_polls;
static const char *last_error = "";
static char        comm_storage;

static const char *const fail_names[] = {"", "uid", "init", "coll", "async"};
static int               fail_mode;

EXPORT void stub_nccl_fail(const char *what)
{
    int mode = 0;
    for (int i = 0; i < 5; i++)
        if (strcmp(what, fail_names[i]) == 0)
            mode = i;
    __atomic_store_n(&fail_mode, mode, __ATOMIC_SEQ_CST);
}

static int fails(const char *what)
{
    return strcmp(fail_names[__atomic_load_n(&fail_mode, __ATOMIC_SEQ_CST)],
                  what) == 0;
}

EXPORT const stub_call_t *stub_nccl_last_call(void) { return &last_call; }
EXPORT int                stub_nccl_aborts(void)
{
    return __atomic_load_n(&aborts, __ATOMIC_SEQ_CST);
}
EXPORT int stub_nccl_destroys(void) { return destroys; }

EXPORT ncclResult_t ncclGetVersion(int *version)
{
    const char *env = getenv("STUB_NCCL_VERSION");
    *version        = env != NULL ? atoi(env) : 22809;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (fails("uid")) {
        last_error = "stub: no network interface for the bootstrap";
        return ncclSystemError;
    }
    memset(id, 0x5a, sizeof(*id));
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int n, ncclUniqueId id,
                                     int rank)
{
    (void)id;
    (void)rank;
    if (fails("init")) {
        last_error = "stub: Duplicate GPU detected : rank 0 and rank 1 both "
                     "on CUDA device 1000";
        return ncclInvalidUsage;
    }
    nranks = n;
    *comm  = (ncclComm_t)&comm_storage;
    return ncclSuccess;
}

/* Non-blocking: "in progress" for two polls, as a real set-up would be. */
EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int n,
                                           ncclUniqueId id, int rank,
                                           nccl_config_t *config)
{
    if (config == NULL || config->magic != NCCL_CONFIG_MAGIC ||
        config->size < 4 * sizeof(int))
        return ncclInvalidArgument;
    ncclResult_t res = ncclCommInitRank(comm, n, id, rank);
    if (res == ncclSuccess && config->blocking == 0) {
        __atomic_store_n(&pending_polls, 2, __ATOMIC_SEQ_CST);
        return ncclInProgress;
    }
    return res;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    (void)comm;
    if (__atomic_load_n(&pending_polls, __ATOMIC_SEQ_CST) > 0) {
        __atomic_fetch_sub(&pending_polls, 1, __ATOMIC_SEQ_CST);
        *err = ncclInProgress;
    } else if (fails("async")) {
        last_error = "stub: remote process exited or there was a network "
                     "error";
        *err       = ncclRemoteError;
    } else {
        *err = ncclSuccess;
    }
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    (void)comm;
    __atomic_fetch_add(&aborts, 1, __ATOMIC_SEQ_CST);
    return ncclSuccess;
}

/* Non-blocking: in progress for two polls, like a real flush. */
EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    (void)comm;
    __atomic_store_n(&pending_polls, 2, __ATOMIC_SEQ_CST);
    return ncclInProgress;
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    (void)comm;
    destroys++;
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t res)
{
    static const char *const names[] = {
        "no error",
        "unhandled cuda error",
        "unhandled system error",
        "internal error",
        "invalid argument",
        "invalid usage",
        "remote process exited or there was a network error",
        "NCCL operation in progress"};
    return (unsigned)res < 8 ? names[res] : "unknown result code";
}

EXPORT const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}

static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

/* One rank's view of nranks equal contributions: sum multiplies by nranks,
 * avg is the identity, the rest (prod, min, max) copy, f32 only. */
static ncclResult_t record(int coll, const void *send, void *recv,
                           size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           int root, cudaStream_t stream)
{
    if (fails("coll")) {
        last_error = "stub: socket closed by peer";
        return ncclSystemError;
    }
    last_call = (stub_call_t){coll, count, (int)dt, (int)op, root, stream};
    if ((unsigned)dt >= 10)
        return ncclInvalidArgument;
    size_t bytes = count * sizes[dt];
    if (coll == 2) /* allgather: every block is ours */
        for (int r = 0; r < nranks; r++)
            memmove((char *)recv + (size_t)r * bytes, send, bytes);
    else if (coll == 1) /* reduce_scatter: our block */
        memmove(recv, send, bytes);
    else
        memmove(recv, send, bytes);
    if (coll <= 1 && op == ncclSum && dt == ncclFloat32)
        for (size_t i = 0; i < count; i++)
            ((float *)recv)[i] *= (float)nranks;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                                  ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t stream)
{
    (void)comm;
    return record(0, send, recv, count, dt, op, 0, stream);
}

EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv,
                                      size_t count, ncclDataType_t dt,
                                      ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    (void)comm;
    return record(1, send, recv, count, dt, op, 0, stream);
}

EXPORT ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                                  ncclDataType_t dt, ncclComm_t comm,
                                  cudaStream_t stream)
{
    (void)comm;
    return record(2, send, recv, count, dt, ncclSum, 0, stream);
}

#ifndef STUB_NO_BROADCAST
EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                                  ncclDataType_t dt, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    (void)comm;
    return record(3, send, recv, count, dt, ncclSum, root, stream);
}
#endif
