/* Internals of the "ucx" transport, shared by context.c, oob.c, link.c,
 * comm.c, transport.c, cancel.c and rma.c.  Algorithms never include this:
 * they reach the transport only through braid_tl_t, so that they run over
 * any transport. */
#ifndef BRAID_UCX_TL_UCX_H
#define BRAID_UCX_TL_UCX_H

#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include <braid/plugin.h>

#define BRAID_UCX_COMPONENT "ucx"

/* The UCX tag carries the algorithm's tag in its low BRAID_TAG_BITS bits and
 * the sender's rank above them.  A receive matches the sender's rank and the
 * tag's match bits (BRAID_UCX_RECV_MASK); test() compares the check bits of
 * the tag that arrived (plugin.h, BRAID_TAG_MATCH_MASK). */
#define BRAID_UCX_RANK_BITS (64 - BRAID_TAG_BITS)
#define BRAID_UCX_MAX_RANKS (1L << BRAID_UCX_RANK_BITS)
#define BRAID_UCX_TAG_MASK  ((UINT64_C(1) << BRAID_TAG_BITS) - 1)
#define BRAID_UCX_RECV_MASK (~BRAID_UCX_TAG_MASK | BRAID_TAG_MATCH_MASK)

typedef enum {
    BRAID_UCX_OP_SEND = 1,
    BRAID_UCX_OP_RECV,
    BRAID_UCX_OP_PUT,
} braid_ucx_op_kind_t;

/* Book-keeping of one posted operation.  Tag operations keep it in the ucp
 * request's user area (ucp_params_t.request_size), so posting allocates
 * nothing; put_signal keeps it in a braid_ucx_put_t.  Pending operations are
 * linked on their communicator so that comm_destroy can still withdraw what
 * an algorithm failed to cancel. */
typedef struct braid_ucx_op {
    braid_ucx_op_kind_t  kind;
    int                  peer;
    uint64_t             tag;
    size_t               len;
    struct braid_ucx_op *prev;
    struct braid_ucx_op *next;
} braid_ucx_op_t;

/* What travels in front of a put's data (an active message header): where
 * the target stores the data and which flag it raises afterwards. */
typedef struct braid_ucx_put_hdr {
    uint64_t area; /* id: mem_alloc order, the same on every rank */
    uint64_t dst_off;
    uint64_t flag_off;
    uint64_t flag_val;
} braid_ucx_put_hdr_t;

/* put_signal in flight: the active-message send and its header, which UCX
 * 1.13 reads until the send completes (it has no flag to copy it). */
typedef struct braid_ucx_put {
    braid_ucx_op_t      op;
    void               *req; /* the ucp request */
    braid_ucx_put_hdr_t hdr;
} braid_ucx_put_t;

/* A collectively allocated area that peers put into (rma.c). */
typedef struct braid_ucx_area {
    struct braid_ucx_area *prev;
    struct braid_ucx_area *next;
    uint64_t               id;
    void                  *base; /* zero-filled, whole pages */
    size_t                 len;  /* what the caller asked for */
} braid_ucx_area_t;

typedef struct braid_ucx_comm braid_ucx_comm_t;

typedef struct braid_ucx_peer {
    braid_ucx_comm_t *comm; /* for the error callback */
    int               rank;
    ucp_ep_h          ep;
    int               err_peer; /* created with UCP_ERR_HANDLING_MODE_PEER */
    ucs_status_t      status; /* UCS_OK until the endpoint reports an error */
} braid_ucx_peer_t;

struct braid_ucx_comm {
    const braid_services_t *svc; /* the core's, valid for the process */
    /* a copy: the caller's struct may be temporary */
    braid_oob_t       oob;
    int               rank;
    int               size;
    ucp_context_h     context;
    ucp_worker_h      worker;
    braid_ucx_peer_t *peers;       /* [size], including this rank */
    int               failed_peer; /* first rank whose endpoint failed, -1 */
    /* Set once an operation failed or was cancelled: the communicator is
     * going down, so teardown closes endpoints by force, briefly. */
    int              broken;
    braid_link_t     link;
    braid_ucx_op_t   pending;   /* list head of operations not yet retired */
    braid_ucx_area_t areas;     /* list head of live put areas */
    uint64_t         next_area; /* id of the next mem_alloc */
};

/* Active message id of put_signal (one handler per worker). */
#define BRAID_UCX_AM_PUT 7u
/* How long cancel waits for a request to finish on its own before it
 * closes the peer's endpoint by force, and how long teardown gives
 * endpoints to close; both capped by the timeout. */
#define BRAID_UCX_CANCEL_GRACE_S 0.2
#define BRAID_UCX_CLOSE_S        2.0
#define BRAID_UCX_FAILED_CLOSE_S 0.5

extern const braid_transport_t braid_ucx_transport;

/* context.c: the process-wide ucp context. */
braid_status_t braid_ucx_context_acquire(ucp_context_h          *context,
                                         const braid_services_t *svc,
                                         ucs_status_t           *ucs_status);
void           braid_ucx_context_release(void);
/* While quiet (per thread), UCX's own log messages go to braid's debug log
 * instead of stderr: a communicator's teardown, where a peer that left
 * makes UCX print connection errors that say nothing to the user. */
void braid_ucx_log_quiet(int on);

/* link.c: declared link parameters and their environment overrides. */
/* Derives the put_signal pair from the two-sided one (link.c). */
void           braid_ucx_link_put(braid_link_t *link);
braid_status_t braid_ucx_link_declared(braid_link_t           *link,
                                       const braid_services_t *svc,
                                       int                     nnodes);

/* oob.c: agreement plus exchange of one variable-length blob per rank.
 * Every rank passes its local status; when any rank failed, every rank
 * returns an error (its own, or one naming the first failed rank). */
typedef struct braid_ucx_xchg {
    char     *blobs; /* size * stride bytes; rank r's blob at r * stride */
    size_t    stride;
    uint64_t *lens;  /* [size] */
    uint64_t *extra; /* [size * 2]: two words each rank attached */
} braid_ucx_xchg_t;

braid_status_t braid_ucx_oob_exchange(braid_ucx_xchg_t       *out,
                                      const braid_services_t *svc,
                                      const braid_oob_t *oob, const char *what,
                                      braid_status_t local, const void *blob,
                                      size_t len, const uint64_t extra[2]);
void           braid_ucx_xchg_free(braid_ucx_xchg_t *x);
/* Agreement only: BRAID_OK when every rank passed BRAID_OK. */
braid_status_t braid_ucx_oob_agree(const braid_services_t *svc,
                                   const braid_oob_t *oob, const char *what,
                                   braid_status_t local);

/* comm.c */
braid_status_t braid_ucx_comm_create(const braid_transport_t *self,
                                     const braid_services_t  *svc,
                                     const braid_oob_t       *oob,
                                     const braid_topo_t *topo, void **tcomm);
void           braid_ucx_comm_destroy(void *tcomm);
void           braid_ucx_link(void *tcomm, braid_link_t *link);

/* transport.c: shared by comm.c and rma.c. */
braid_status_t braid_ucx_status(ucs_status_t st); /* ucs -> braid code */
void           braid_ucx_op_link(braid_ucx_comm_t *comm, braid_ucx_op_t *op,
                                 braid_ucx_op_kind_t kind, int peer, uint64_t tag,
                                 size_t len);
void           braid_ucx_op_unlink(braid_ucx_op_t *op);
/* Progresses until req (a ucp request) completes or the deadline passes;
 * returns the request's status or UCS_ERR_TIMED_OUT.  Frees req. */
ucs_status_t braid_ucx_wait_ucp(braid_ucx_comm_t *comm, void *req,
                                double deadline);
/* Flushes every outstanding operation of the worker, bounded. */
ucs_status_t braid_ucx_flush(braid_ucx_comm_t *comm, double deadline);
/* The smaller of the timeout and s, from now. */
double braid_ucx_deadline(const braid_ucx_comm_t *comm, double s);

/* cancel.c: withdrawing operations. */
void braid_ucx_cancel(void *tcomm, braid_treq_t *req);
/* Withdraws a pending op (any kind), unlinks and frees it; bounded. */
void braid_ucx_op_retire(braid_ucx_comm_t *comm, braid_ucx_op_t *op);
/* Closes the endpoint to peer by force (UCX then fails whatever is
 * outstanding on it); a no-op for one without peer-failure handling. */
void braid_ucx_peer_force_close(braid_ucx_comm_t *comm, int peer,
                                const char *why);

/* rma.c */
braid_status_t braid_ucx_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem);
void           braid_ucx_mem_free(void *tcomm, braid_rmem_t *mem);
braid_status_t braid_ucx_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                    size_t dst_off, const void *src,
                                    size_t len, size_t flag_off,
                                    uint64_t flag_val, braid_treq_t *req);
/* Registers the handler that lands peers' puts on this worker. */
ucs_status_t braid_ucx_am_register(braid_ucx_comm_t *comm);
/* Areas the algorithms did not free (teardown). */
void braid_ucx_areas_release(braid_ucx_comm_t *comm);

#endif
