/* braid: plugin-based collectives.  Public API.
 *
 * Argument order follows NCCL/MPI (send buffer, receive buffer, count, dtype,
 * op, ..., communicator, then output handles) so that code written for those
 * libraries ports line by line.  Every function returns a braid_status_t; on
 * error braid_last_error() holds a message naming what failed and why.
 *
 * Threads.  Any thread may call braid, and calls on different communicators
 * run in parallel (braid_init, braid_comm_split and braid_finalize
 * included).  A communicator is used by one thread at a time, as an NCCL
 * communicator is: its calls may come from different threads one after
 * another (iallreduce on one, braid_wait on another) when the program
 * orders them, and its collectives must come in the same order on every
 * rank, as always.  A call made while another thread is inside the same
 * communicator is refused with BRAID_ERR_STATE naming both threads and
 * what each called, and does nothing (the communicator stays usable);
 * since the order across ranks is then the program's guess, treat that as
 * a bug to fix, not a condition to retry.  Two exceptions: braid_test
 * answers *done = 0 while another thread is inside (it is not done yet),
 * and braid_wait waits, up to BRAID_TIMEOUT, for the other thread to
 * leave.  braid_comm_rank, braid_comm_size and braid_comm_choice only
 * read, and may be called at any time.  The message of braid_last_error
 * is per thread. */
#ifndef BRAID_BRAID_H
#define BRAID_BRAID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_VERSION_MAJOR 0
#define BRAID_VERSION_MINOR 1
#define BRAID_VERSION_PATCH 0

typedef enum {
    BRAID_OK         = 0,
    BRAID_INPROGRESS = 1,         /* plugins: progress not finished yet.  The
                                     public API never returns it: braid_test
                                     returns BRAID_OK with *done = 0, as
                                     MPI_Test does */
    BRAID_ERR_INVALID_ARG   = -1, /* bad argument: nothing was written */
    BRAID_ERR_NO_MEMORY     = -2,
    BRAID_ERR_NOT_SUPPORTED = -3, /* no candidate can run this call */
    BRAID_ERR_NOT_FOUND     = -4,
    BRAID_ERR_UNAVAILABLE   = -5,  /* plugin/transport unavailable here */
    BRAID_ERR_ABI           = -6,  /* plugin built for another ABI version */
    BRAID_ERR_PARSE         = -7,  /* malformed environment/tuning input */
    BRAID_ERR_IO            = -8,  /* socket or file error */
    BRAID_ERR_TIMEOUT       = -9,  /* a wait exceeded BRAID_TIMEOUT */
    BRAID_ERR_PEER          = -10, /* a peer died or closed its connection */
    BRAID_ERR_AUTH      = -11, /* bootstrap peer failed the job-key proof */
    BRAID_ERR_MISMATCH  = -12, /* ranks disagree (call, count, candidate) */
    BRAID_ERR_STATE     = -13, /* communicator failed or in wrong state */
    BRAID_ERR_TRANSPORT = -14, /* transport-level failure */
    BRAID_ERR_INTERNAL  = -15,
} braid_status_t;

typedef enum {
    BRAID_F32 = 0,
    BRAID_F64,
    BRAID_F16,
    BRAID_BF16,
    BRAID_I32,
    BRAID_I64,
    BRAID_U8,
    BRAID_DTYPE_COUNT
} braid_dtype_t;

typedef enum {
    BRAID_SUM = 0,
    BRAID_PROD,
    BRAID_MIN,
    BRAID_MAX,
    /* The sum divided by the communicator size.  Floats: the sum as
     * BRAID_SUM computes it, then one division.  Integers: the exact sum
     * (accumulated in 64 bits, or 96 for i64, so it never wraps) divided
     * with C's rule, rounding toward zero (-7 / 2 = -3), as NCCL's ncclAvg;
     * the result always fits the dtype (4 ranks of INT32_MAX give
     * INT32_MAX, u8 200 200 200 200 gives 200). */
    BRAID_AVG,
    BRAID_OP_COUNT
} braid_op_t;

typedef enum {
    BRAID_COLL_ALLREDUCE = 0,
    BRAID_COLL_REDUCE_SCATTER,
    BRAID_COLL_ALLGATHER,
    BRAID_COLL_BROADCAST,
    BRAID_COLL_BARRIER,
    BRAID_COLL_COUNT
} braid_coll_t;

#define BRAID_UNDEFINED                                                       \
    (-32766) /* comm_split color: this rank joins no group */

typedef struct braid_comm    braid_comm_t;
typedef struct braid_request braid_request_t;

/* Status and errors. */
const char *braid_status_str(braid_status_t status);
/* Message of the last error raised on this thread ("" if none). */
const char *braid_last_error(void);

const char *braid_dtype_name(braid_dtype_t dtype);
size_t      braid_dtype_size(braid_dtype_t dtype); /* 0 if invalid */
const char *braid_op_name(braid_op_t op);
const char *braid_coll_name(braid_coll_t coll);

/* Communicators.
 * braid_init reads rank, size and rendezvous from the environment: braidrun's
 * BRAID_RANK/BRAID_SIZE/BRAID_ADDR, Open MPI's OMPI_COMM_WORLD_*, Slurm's
 * SLURM_PROCID/SLURM_NTASKS, or torchrun's RANK/WORLD_SIZE/MASTER_ADDR/PORT
 * (under torchrun, rank 0 publishes its address in torch's TCP store on
 * MASTER_PORT instead of listening there). */
braid_status_t braid_init(braid_comm_t **comm);
braid_status_t braid_finalize(braid_comm_t *comm);
int            braid_comm_rank(const braid_comm_t *comm);
int            braid_comm_size(const braid_comm_t *comm);
/* Rendezvous through a key-value store the caller already shares with every
 * rank (torch.distributed's Store, a job scheduler's KV service), for
 * frameworks that know rank and size themselves.  set publishes a value to
 * every rank; get blocks until the key exists (up to the store's own
 * timeout) and copies at most cap bytes, returning the value's full length,
 * or -1.  On failure either writes a message into err (errlen bytes).
 * host, if not NULL, is a host every rank reaches (the store's): rank 0
 * listens on its interface facing it; otherwise on BRAID_IFADDR, or on
 * loopback (one host).  A rendezvous reachable from other hosts needs
 * BRAID_JOB_KEY, as with braid_init. */
typedef struct braid_kv {
    void *ctx;
    int (*set)(void *ctx, const char *key, const void *value, size_t len,
               char *err, size_t errlen);
    long (*get)(void *ctx, const char *key, void *value, size_t cap, char *err,
                size_t errlen);
    const char *host;
} braid_kv_t;

/* Collective over rank 0..size-1, as braid_init, with rank and size given and
 * rank 0's address exchanged through kv, under the key "braid/rdv": give
 * each communicator a fresh store or prefix (torch gives every process
 * group its own). */
braid_status_t braid_init_kv(braid_comm_t **comm, int rank, int size,
                             const braid_kv_t *kv);

/* Collective over comm.  Ranks with the same color form a new communicator,
 * ordered by (key, old rank).  color == BRAID_UNDEFINED yields *newcomm =
 * NULL. */
braid_status_t braid_comm_split(braid_comm_t *comm, int color, int key,
                                braid_comm_t **newcomm);

/* Collectives (blocking).  In place: sendbuf == recvbuf for allreduce and
 * broadcast; for allgather sendbuf == recvbuf + rank*count*dtsize; for
 * reduce_scatter recvbuf == sendbuf + rank*recvcount*dtsize.
 * allreduce:      send count elements, receive count elements.
 * reduce_scatter: send size*recvcount elements, receive recvcount.
 * allgather:      send sendcount elements, receive size*sendcount. */
braid_status_t braid_allreduce(const void *sendbuf, void *recvbuf,
                               size_t count, braid_dtype_t dtype,
                               braid_op_t op, braid_comm_t *comm);
braid_status_t braid_reduce_scatter(const void *sendbuf, void *recvbuf,
                                    size_t recvcount, braid_dtype_t dtype,
                                    braid_op_t op, braid_comm_t *comm);
braid_status_t braid_allgather(const void *sendbuf, void *recvbuf,
                               size_t sendcount, braid_dtype_t dtype,
                               braid_comm_t *comm);
braid_status_t braid_broadcast(void *buf, size_t count, braid_dtype_t dtype,
                               int root, braid_comm_t *comm);
braid_status_t braid_barrier(braid_comm_t *comm);

/* Non-blocking all-reduce.  Collectives on one communicator complete in the
 * order they were issued; a blocking call first completes pending ones. */
braid_status_t braid_iallreduce(const void *sendbuf, void *recvbuf,
                                size_t count, braid_dtype_t dtype,
                                braid_op_t op, braid_comm_t *comm,
                                braid_request_t **req);
/* Progresses the communicator.  While the call is pending: BRAID_OK and
 * *done = 0.  Once it has completed: *done = 1, the request is freed, and
 * the call's own status is returned (BRAID_OK, or its error). */
braid_status_t braid_test(braid_request_t *req, int *done);
/* Blocks until completion; frees the request. */
braid_status_t braid_wait(braid_request_t *req);

/* Memory for collective buffers that the other ranks on this host can map
 * (as ncclMemAlloc or MPI_Alloc_mem).  Any buffer works with any call;
 * send and receive buffers from here let the shared-memory transport's
 * single-copy reads copy from the peer's pages directly, where a buffer
 * from malloc is read through the kernel (process_vm_readv), which pins
 * every page it copies (docs/performance.md, "buffers peers can map").
 * Needs no communicator; any thread.  bytes 0 gives *ptr NULL.  The
 * memory is zero-filled, in whole pages, and mapped shared: a child made
 * by fork shares it with its parent instead of getting a copy.
 * braid_mem_free takes only what braid_mem_alloc returned (NULL is
 * fine). */
braid_status_t braid_mem_alloc(size_t bytes, void **ptr);
braid_status_t braid_mem_free(void *ptr);

/* Introspection: the candidate ("algo@transport") the dispatcher picks for a
 * collective of this many bytes per rank, and why ("override", "tuning file",
 * "cost model").  Pure query; every rank returns the same answer. */
braid_status_t braid_comm_choice(braid_comm_t *comm, braid_coll_t coll,
                                 size_t bytes, char *cand, size_t cand_len,
                                 char *why, size_t why_len);

/* How braid sees the hosts of this communicator, in one line: the
 * cabling, the number of hosts and ranks per host, and how it was decided
 * ("ring of 4 hosts, up to 1 rank per host (detected from IP TTL hop
 * counts ...)").  Every rank gets the same text. */
braid_status_t braid_comm_topology(const braid_comm_t *comm, char *buf,
                                   size_t len);

#ifdef __cplusplus
}
#endif
#endif
