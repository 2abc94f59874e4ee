/* The NCCL backend, independent of braid's plugin ABI: the libraries
 * (lib.c), their errors (errors.c), one NCCL communicator per braid
 * communicator (comm.c), the collectives (coll.c), the links it detects
 * (links.c) and NCCL's cost model (cost.c).  plugin.c alone speaks the
 * plugin ABI and translates. */
#ifndef BRAID_NCCL_H
#define BRAID_NCCL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include <braid/plugin.h>

#include "api.h"

#define LOG_COMP "nccl"
/* NCCL versions: the oldest that has what the plugin needs (ncclCommAbort
 * and ncclCommGetAsyncError, so that a dead peer never hangs a call), and
 * the first with ncclAvg and bf16. */
#define BRAID_NCCL_MIN_CODE BRAID_NCCL_CODE(2, 4, 0)
#define BRAID_NCCL_MIN_TEXT "2.4"
#define BRAID_NCCL_AVG_CODE BRAID_NCCL_CODE(2, 10, 0)

/* What the core offers, copied from its services by plugin.c. */
typedef struct braid_nccl_host {
    void (*log)(braid_log_level_t level, const char *component,
                const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    braid_status_t (*error)(braid_status_t status, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    void (*finish_avg)(void *buf, size_t count, braid_dtype_t dtype,
                       braid_op_t op, int n);
    double (*timeout_s)(void);
    double (*now)(void);
} braid_nccl_host_t;

extern braid_nccl_host_t braid_nccl_host;

/* ------------------------------------------------------------- lib.c */

typedef struct braid_nccl_lib {
    char path[512]; /* of libnccl, as dlopen found it */
    int  code;      /* BRAID_NCCL_CODE of the library's version */
    char version[32];
    int  has_avg; /* ncclAvg and ncclBfloat16 */

    ncclResult_t (*get_version)(int *version);
    ncclResult_t (*get_unique_id)(ncclUniqueId *id);
    ncclResult_t (*comm_init_rank)(ncclComm_t *comm, int nranks,
                                   ncclUniqueId id, int rank);
    /* NULL before 2.14: then the blocking init above. */
    ncclResult_t (*comm_init_rank_config)(ncclComm_t *comm, int nranks,
                                          ncclUniqueId id, int rank,
                                          nccl_config_t *config);
    ncclResult_t (*comm_finalize)(ncclComm_t comm); /* NULL before 2.14 */
    ncclResult_t (*comm_destroy)(ncclComm_t comm);
    ncclResult_t (*comm_abort)(ncclComm_t comm);
    ncclResult_t (*comm_get_async_error)(ncclComm_t comm, ncclResult_t *err);
    const char *(*get_error_string)(ncclResult_t result);
    const char *(*get_last_error)(ncclComm_t comm); /* NULL before 2.13 */
    ncclResult_t (*all_reduce)(const void *send, void *recv, size_t count,
                               ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream);
    ncclResult_t (*reduce_scatter)(const void *send, void *recv,
                                   size_t recvcount, ncclDataType_t dt,
                                   ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream);
    ncclResult_t (*all_gather)(const void *send, void *recv, size_t sendcount,
                               ncclDataType_t dt, ncclComm_t comm,
                               cudaStream_t stream);
    ncclResult_t (*broadcast)(const void *send, void *recv, size_t count,
                              ncclDataType_t dt, int root, ncclComm_t comm,
                              cudaStream_t stream);

    char rt_path[512]; /* of the CUDA runtime */
    cudaError_t (*get_device_count)(int *count);
    cudaError_t (*get_device)(int *device);
    cudaError_t (*set_device)(int device);
    cudaError_t (*device_get_attribute)(int *value, int attr, int device);
    cudaError_t (*device_get_p2p_attribute)(int *value, int attr, int src,
                                            int dst);
    cudaError_t (*device_get_pci_bus_id)(char *bus_id, int len, int device);
    const char *(*rt_error_string)(cudaError_t err);
    cudaError_t (*stream_create)(cudaStream_t *stream);
    cudaError_t (*stream_destroy)(cudaStream_t stream);
    cudaError_t (*stream_synchronize)(cudaStream_t stream);
    cudaError_t (*event_create)(cudaEvent_t *event, unsigned flags);
    cudaError_t (*event_destroy)(cudaEvent_t event);
    cudaError_t (*event_record)(cudaEvent_t event, cudaStream_t stream);
    cudaError_t (*event_query)(cudaEvent_t event);
    cudaError_t (*event_synchronize)(cudaEvent_t event);
    cudaError_t (*malloc_dev)(void **ptr, size_t len);
    cudaError_t (*free_dev)(void *ptr);
    cudaError_t (*memcpy_sync)(void *dst, const void *src, size_t len,
                               int kind);
} braid_nccl_lib_t;

/* Opens libnccl (BRAID_NCCL_LIBRARY, else libnccl.so.2) and the CUDA
 * runtime (BRAID_CUDART_LIBRARY, else libcudart.so and its versioned
 * names), checks NCCL's version and that a CUDA device is there.  On
 * failure, BRAID_ERR_UNAVAILABLE and the reason in why: "libnccl.so.2 not
 * found", "NCCL 2.3.7 too old (need 2.4 or newer)", "CUDA driver not
 * loaded", "no CUDA device", each with details after it.  *lib stays
 * valid for the life of the process (the libraries are never closed:
 * the CUDA runtime cannot be unloaded safely). */
braid_status_t braid_nccl_lib_open(const braid_nccl_lib_t **lib, char *why,
                                   size_t why_len);
/* The library's "2.28.9", or "" before a successful open (for braid-info). */
const char *braid_nccl_lib_version(void);

/* ---------------------------------------------------------- errors.c */

/* Records the message (braid_last_error(), and braid_nccl_last_error() on
 * this thread) and returns st. */
braid_status_t braid_nccl_fail(braid_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
const char *braid_nccl_last_error(void);

/* NCCL's result as a braid status (ncclRemoteError: BRAID_ERR_PEER, ...)
 * with NCCL's own words: "what: NCCL <name>: <last error>". */
braid_status_t braid_nccl_error(const braid_nccl_lib_t *lib, ncclComm_t comm,
                                ncclResult_t res, const char *what);
/* The same for a CUDA runtime error. */
braid_status_t braid_nccl_cuda_error(const braid_nccl_lib_t *lib,
                                     cudaError_t err, const char *what);

/* ----------------------------------------------------------- links.c */

/* Link classes of NCCL's model. */
typedef enum {
    BRAID_NCCL_LINK_NVLINK = 0,
    BRAID_NCCL_LINK_PCI,
    BRAID_NCCL_LINK_NET,
    BRAID_NCCL_LINK_COUNT
} braid_nccl_link_t;

/* The parameters of NCCL's model for one communicator, the same on every
 * rank (comm.c agrees on the slowest). */
typedef struct braid_nccl_model {
    braid_nccl_link_t intra;      /* between GPUs of one node */
    double            intra_gbps; /* bus bandwidth of that link, GB/s */
    double            inter_gbps; /* of the network between nodes */
} braid_nccl_model_t;

/* This rank's GPU and NIC as the model sees them. */
void braid_nccl_links_detect(braid_nccl_model_t     *model,
                             const braid_nccl_lib_t *lib, int device);
/* The fastest active network port under sysfs ("/sys"), GB/s; 1.25 (10
 * Gb/s) when none says. */
double braid_nccl_links_net_gbps(const char *sysfs);

/* ------------------------------------------------------------ cost.c */

/* NCCL's estimate of one collective in microseconds, bytes as in
 * braid_cost_in_t (per rank), the cheapest (algorithm, protocol) of its
 * model; *choice names it ("ring/LL128") when not NULL. */
double braid_nccl_model_time(const braid_nccl_model_t *model,
                             braid_coll_t coll, size_t bytes, int nranks,
                             int nnodes, int ppn, const char **choice);

/* ------------------------------------------------------------ comm.c */

/* One braid communicator's NCCL side.  The NCCL communicator itself is
 * made at the first collective that runs on it (all ranks make that call),
 * so that programs that never pass device memory pay nothing for it. */
typedef struct braid_nccl_comm {
    const braid_nccl_lib_t *lib;
    const braid_oob_t      *oob;
    int                     rank, size, device;
    braid_nccl_model_t      model;

    ncclComm_t   comm;    /* NULL until the first collective */
    cudaStream_t stream;  /* the plain API's calls run here */
    cudaEvent_t  done;    /* recorded after each plain call */
    void        *scratch; /* 4 bytes of device memory for the barrier */
    int          nonblocking;

    pthread_mutex_t lock;   /* comm, failed, watch: the watchdog's too */
    braid_status_t  failed; /* BRAID_OK while usable */
    char            failed_msg[384];

    /* Stream-ordered calls still running, watched against BRAID_TIMEOUT
     * (comm.c's watchdog thread, started by the first such call). */
    struct braid_nccl_watch *watch;
} braid_nccl_comm_t;

/* Local part of a communicator: no NCCL call, no collective traffic but
 * one oob allgather that agrees on the model. */
braid_status_t braid_nccl_comm_create(braid_nccl_comm_t     **out,
                                      const braid_nccl_lib_t *lib,
                                      const braid_oob_t      *oob);
void           braid_nccl_comm_destroy(braid_nccl_comm_t *c);
/* Makes the NCCL communicator if it is not there yet (collective: every
 * rank's first collective call), or returns the earlier failure. */
braid_status_t braid_nccl_comm_ready(braid_nccl_comm_t *c);
/* Ends the NCCL communicator after an error or a timeout, so that nothing
 * still uses the call's buffers; later calls fail with msg. */
void braid_nccl_comm_abort(braid_nccl_comm_t *c, braid_status_t st,
                           const char *msg);
/* Waits (within BRAID_TIMEOUT) for what a non-blocking communicator does
 * in the background after a call returned ncclInProgress. */
braid_status_t braid_nccl_comm_settle(braid_nccl_comm_t *c, const char *what);
/* BRAID_OK, or the NCCL communicator's asynchronous error (aborting). */
braid_status_t braid_nccl_comm_check(braid_nccl_comm_t *c);
/* A stream-ordered call was enqueued on stream: watch it (caller holds
 * c->lock). */
braid_status_t braid_nccl_comm_watch(braid_nccl_comm_t *c,
                                     cudaStream_t       stream);

/* ------------------------------------------------------------ coll.c */

/* One collective on device memory, as the public call gave it. */
typedef struct braid_nccl_op {
    braid_coll_t  coll;
    const void   *sendbuf;
    void         *recvbuf;
    size_t        count; /* as in the public call */
    braid_dtype_t dtype;
    braid_op_t    op;
    int           root;
    int           on_stream; /* 0: the plain API (synchronous) */
    cudaStream_t  stream;    /* on_stream: the caller's (NULL is CUDA's
                                legacy default stream) */
    /* Set by start: what progress still has to do. */
    int enqueued;
    int avg_on_host; /* NCCL < 2.10: divide after the sum */
} braid_nccl_op_t;

/* Enqueues op (the plain API on the communicator's stream, a stream-ordered
 * call on the caller's); BRAID_ERR_NOT_SUPPORTED for what this NCCL cannot
 * run (bf16 before 2.10). */
braid_status_t braid_nccl_coll_start(braid_nccl_comm_t *c,
                                     braid_nccl_op_t   *op);
/* BRAID_OK once a plain call's result is in recvbuf (a stream-ordered call
 * is done once enqueued), BRAID_INPROGRESS, or an error. */
braid_status_t braid_nccl_coll_test(braid_nccl_comm_t *c, braid_nccl_op_t *op);
/* After an error or a timeout with op still running: aborts the NCCL
 * communicator (see braid_nccl_comm_abort). */
void braid_nccl_coll_cancel(braid_nccl_comm_t *c, braid_nccl_op_t *op);

#endif
