/* ABI 3, frozen: the layout of every struct of <braid/plugin.h> as it was
 * at ABI 3 (commit 6524e9a), renamed *_v3 where ABI 4 reuses the name, for
 * the adapter (adapt_v3.c).  Never edit: plugins built for ABI 3 exist.
 * Enums, BRAID_CAP_* and BRAID_TAG did not change and come from plugin.h;
 * braid_treq_t and braid_rmem_t did not either: one type serves both. */
#ifndef BRAID_LOADER_ABI3_H
#define BRAID_LOADER_ABI3_H

#include <braid/plugin.h>

#define BRAID_PLUGIN_ABI3_SYMBOL "braid_plugin_v3"

typedef braid_treq_t braid_treq_v3_t;
typedef braid_rmem_t braid_rmem_v3_t;

/* ---------------------------------------------------------------- services */

/* Handed by the core to every plugin entry point. */
typedef struct braid_services_v3 {
    /* Logging, filtered by BRAID_DEBUG.  component: "ucx", "example", ... */
    void (*log)(braid_log_level_t level, const char *component,
                const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    /* Records the message returned by braid_last_error(); returns status. */
    braid_status_t (*error)(braid_status_t status, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    /* inout[i] = inout[i] op in[i] for i < count.  AVG reduces as SUM; the
     * algorithm calls finish_avg once on the final result. */
    void (*reduce)(void *inout, const void *in, size_t count,
                   braid_dtype_t dtype, braid_op_t op);
    /* dst[i] = a[i] op b[i]  (dst may alias a or b). */
    void (*reduce2)(void *dst, const void *a, const void *b, size_t count,
                    braid_dtype_t dtype, braid_op_t op);
    /* buf[i] /= n for BRAID_AVG; no-op for other ops. */
    void (*finish_avg)(void *buf, size_t count, braid_dtype_t dtype,
                       braid_op_t op, int n);
    /* Seconds a single wait may last before it is an error (BRAID_TIMEOUT). */
    double (*timeout_s)(void);
    /* Monotonic clock in seconds. */
    double (*now)(void);
} braid_services_v3_t;

/* --------------------------------------------------------------- bootstrap */

/* Out-of-band channel of one communicator (TCP, through the core's
 * bootstrap).  Collective: every rank of the communicator calls it in the same
 * order.  Valid for the whole life of the communicator. */
typedef struct braid_oob_v3 {
    int   rank;
    int   size;
    void *ctx;
    /* recvbuf receives size*len bytes, rank r's contribution at r*len. */
    braid_status_t (*allgather)(void *ctx, const void *sendbuf, void *recvbuf,
                                size_t len);
    braid_status_t (*barrier)(void *ctx);
} braid_oob_v3_t;

/* ---------------------------------------------------------------- topology */

typedef struct braid_topo_v3 {
    braid_topo_kind_t kind;
    int               nnodes;       /* distinct hosts */
    int               ppn;          /* max ranks per host */
    const int        *node_of_rank; /* [size] host index, hosts numbered in
                                       order of their lowest rank */
    /* [size] the one CPU a rank is pinned to (braidrun's default, mpirun
     * --bind-to core), -1 when it may run on several.  Ranks on one node
     * with the same CPU >= 0 take turns on it: see task->remote_wait. */
    const int *cpu_of_rank;
} braid_topo_v3_t;

/* Link parameters of a transport on one communicator.  The two-sided and
 * one-sided paths of one transport can differ a lot (shm's send/recv copies
 * twice through bounded cells, its put copies once), so each is declared on
 * its own: algorithms built on isend/irecv read alpha/beta, algorithms built
 * on put_signal read put_alpha/put_beta.  A transport without
 * BRAID_CAP_PUT_SIGNAL leaves the put pair 0. */
typedef struct braid_link_v3 {
    double alpha_us;      /* two-sided: per-message latency, microseconds */
    double beta_gbps;     /* two-sided: bandwidth, GB/s (1e9 bytes/s) */
    double put_alpha_us;  /* put_signal: until the flag is visible */
    double put_beta_gbps; /* put_signal: bandwidth, GB/s */
} braid_link_v3_t;

/* --------------------------------------------------------------- transport */

typedef struct braid_transport_v3 {
    const char *name; /* "ucx", "shm", "roce": the part after '@' */
    uint32_t    caps; /* BRAID_CAP_* */

    /* Whether this transport can work on this machine (called once by the
     * loader after the plugin's probe).  NULL means always.  Like the plugin
     * probe: BRAID_ERR_UNAVAILABLE with a reason ("no RDMA device") is normal
     * and only removes this transport, not the plugin's algorithms. */
    braid_status_t (*probe)(const braid_services_v3_t *svc, char *why,
                            size_t why_len);

    /* Per-communicator endpoint set: connects to every peer through oob.
     * Collective.  Returns BRAID_ERR_UNAVAILABLE (with a reason) when this
     * transport cannot serve this communicator. */
    braid_status_t (*comm_create)(const braid_services_v3_t *svc,
                                  const braid_oob_v3_t      *oob,
                                  const braid_topo_v3_t *topo, void **tcomm);
    void (*comm_destroy)(void *tcomm);
    /* Link parameters for this communicator (measured or declared). */
    void (*link)(void *tcomm, braid_link_v3_t *link);

    /* Two-sided.  A message (peer, tag) matches only a receive with the same
     * (peer, tag); buffers stay owned by the caller until test says done.
     * Tags use the low BRAID_TAG_BITS bits (the transport may use the rest);
     * BRAID_TAG() builds one from the call's seq and a step number. */
    braid_status_t (*isend)(void *tcomm, int peer, uint64_t tag,
                            const void *buf, size_t len, braid_treq_v3_t *req);
    braid_status_t (*irecv)(void *tcomm, int peer, uint64_t tag, void *buf,
                            size_t len, braid_treq_v3_t *req);
    /* BRAID_OK once complete (req->active becomes 0), BRAID_INPROGRESS, or an
     * error (peer lost, truncation).  Drives progress itself. */
    braid_status_t (*test)(void *tcomm, braid_treq_v3_t *req);
    /* Drives progress without a request (needed while polling flags). */
    braid_status_t (*progress)(void *tcomm);
    /* Withdraws a request that is still active (a call that failed, or a
     * communicator torn down mid-call): when it returns, the transport will
     * never again read or write the request's buffer, so the caller may free
     * it.  req->active becomes 0.  Must not block longer than the timeout;
     * a no-op for a request that is not active. */
    void (*cancel)(void *tcomm, braid_treq_v3_t *req);

    /* One-sided (BRAID_CAP_PUT_SIGNAL; NULL otherwise).  mem_alloc is
     * collective and allocates len bytes on every rank. */
    braid_status_t (*mem_alloc)(void *tcomm, size_t len, braid_rmem_v3_t *mem);
    void (*mem_free)(void *tcomm, braid_rmem_v3_t *mem);
    /* Writes len bytes from src to peer's area at dst_off, then stores the
     * 8-byte value flag_val at flag_off of peer's area, ordered after the
     * data.  The target sees the flag with an acquire load on its local area
     * (while calling progress).  src may be reused once req completes. */
    braid_status_t (*put_signal)(void *tcomm, braid_rmem_v3_t *mem, int peer,
                                 size_t dst_off, const void *src, size_t len,
                                 size_t flag_off, uint64_t flag_val,
                                 braid_treq_v3_t *req);
} braid_transport_v3_t;

/* Handle of one transport on one communicator, handed to algorithms. */
typedef struct braid_tl_v3 {
    const braid_transport_v3_t *ops;
    void                       *tcomm;
    braid_link_v3_t             link;
} braid_tl_v3_t;

/* --------------------------------------------------------------- algorithm */

/* Inputs to an algorithm's time estimate. */
typedef struct braid_cost_in_v3 {
    braid_coll_t coll;
    size_t       bytes; /* per-rank buffer: allreduce/broadcast count,
                           allgather sendcount, reduce_scatter
                           recvcount, times dtype size */
    int               nranks;
    int               nnodes;
    int               ppn;
    braid_topo_kind_t topo;
    braid_link_v3_t   link;        /* of the transport being considered */
    double            reduce_gbps; /* local reduction throughput */
    /* Added to every stage's latency (every message of a two-sided
     * algorithm, every put round of a one-sided one): 0 while every rank has
     * a core; on a host with more ranks than cores, a stage completes only
     * once each rank of a core has been scheduled, so it costs about
     * ranks-per-core scheduler hand-offs.  The same on every rank. */
    double stage_us;
} braid_cost_in_v3_t;

/* One collective call as the algorithm sees it. */
typedef struct braid_task_v3 {
    braid_coll_t  coll;
    const void   *sendbuf; /* == recvbuf (or the rank's slot) in place */
    void         *recvbuf;
    size_t        count; /* as in the public call (see cost_in.bytes) */
    braid_dtype_t dtype;
    braid_op_t    op;
    int           root;
    size_t        dtsize;
    int           rank;
    int           size;
    uint64_t      seq; /* call number on this communicator: make
                          tags unique per call with it */
    const braid_topo_v3_t     *topo;
    braid_tl_v3_t             *tl;
    const braid_services_v3_t *svc;
    void                     **comm_state; /* persists across calls on this
                                              (communicator, candidate); freed by
                                              algo->comm_state_free */
    void *priv;                            /* the algorithm's per-call state */
    /* Set by progress when it returns BRAID_INPROGRESS (the core clears it
     * before every progress call): 1 when everything this call still waits for
     * comes from ranks that do not share this rank's CPU (topo->cpu_of_rank)
     * -- every rank pinned to this CPU has done its part.  With more ranks
     * than cores, the core then polls instead of yielding the CPU to ranks
     * that could not help, if the call is one of a stream of identical
     * calls (docs/architecture.md, "Waiting").  Leaving it 0 is always
     * correct. */
    int remote_wait;
    /* Set by the core: 1 when this call repeats the one before it on this
     * communicator (same collective, size and candidate), as in a decode
     * loop; 0 for a call on its own (after a barrier, say).  With ranks
     * taking turns on a CPU, throughput matters for the first and each
     * rank's latency for the second (architecture.md, "Waiting"). */
    int stream;
} braid_task_v3_t;

typedef struct braid_algo_v3 {
    const char  *name; /* "ring", "recdbl", "oneshot": the part before '@' */
    braid_coll_t coll;
    uint32_t     needs_caps; /* transport must have these BRAID_CAP_* bits */
    const char  *transport;  /* NULL: any transport with the caps; else only
                                this one (a backend such as nccl) */
    /* Estimated time in microseconds; negative when it cannot run these
     * inputs.  Pure: every rank must compute the same value. */
    double (*estimate)(const braid_cost_in_v3_t *in);
    /* Prepares task->priv.  BRAID_ERR_NOT_SUPPORTED if it cannot run it. */
    braid_status_t (*start)(braid_task_v3_t *task);
    /* BRAID_OK when the call is complete, BRAID_INPROGRESS, or an error. */
    braid_status_t (*progress)(braid_task_v3_t *task);
    /* Frees task->priv (called after completion and after errors). */
    void (*finish)(braid_task_v3_t *task);
    /* Frees *task->comm_state when the communicator is destroyed (may be
     * NULL when the algorithm keeps none). */
    void (*comm_state_free)(void *state, braid_tl_v3_t *tl);
} braid_algo_v3_t;

/* ------------------------------------------------------------------ plugin */

typedef struct braid_plugin_v3 {
    uint32_t    abi_version; /* BRAID_PLUGIN_ABI_VERSION: must stay first */
    uint32_t    struct_size; /* sizeof(braid_plugin_v3_t) */
    const char *name;        /* "ucx": matches BRAID_PLUGINS entries */
    const char *version;
    /* BRAID_OK when usable here; BRAID_ERR_UNAVAILABLE with a reason in why
     * ("no RDMA device", ...) otherwise.  Unavailable is normal. */
    braid_status_t (*probe)(const braid_services_v3_t *svc, char *why,
                            size_t why_len);
    int                                n_transports;
    const braid_transport_v3_t *const *transports;
    int                                n_algos;
    const braid_algo_v3_t *const      *algos;
    /* Called once before dlclose; may be NULL. */
    void (*unload)(void);
} braid_plugin_v3_t;

#endif
