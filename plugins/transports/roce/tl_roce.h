/* Internals of the RoCE (verbs) transport.
 *
 * One RC queue pair per peer, one completion queue for all of them, host
 * memory registered once per area.  put_signal is an RDMA WRITE of the data
 * followed, on the same QP, by a small SEND that carries the flag; the
 * target's progress() stores the flag when that SEND's receive completes
 * (put.c explains why the flag is not simply a second RDMA WRITE). */
#ifndef BRAID_ROCE_TL_ROCE_H
#define BRAID_ROCE_TL_ROCE_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include "roce.h"

#define BRAID_ROCE_LOG "roce"

/* Send work requests in flight per QP.  A put takes one per RDMA WRITE of
 * its data (usually one) and one for its signal. */
#define BRAID_ROCE_SQ_DEPTH 256u
/* Receives posted per QP: signals that may arrive before progress() runs.
 * More than that is not an error: the sender's HCA retries (RNR NAK). */
#define BRAID_ROCE_RQ_DEPTH 128u
/* Unregistered sources up to this size are copied into a registered bounce
 * slot (cheaper than registering them); larger ones are registered for the
 * duration of the put. */
#define BRAID_ROCE_BOUNCE_SIZE  8192u
#define BRAID_ROCE_BOUNCE_SLOTS 8u
/* A put's data goes out in RDMA WRITEs of at most max_write bytes (the
 * port's max_msg_sz, 8 MiB on rxe, at most 1 GiB), posted in batches of at
 * most this many. */
#define BRAID_ROCE_MAX_CHUNKS 16
#define BRAID_ROCE_MAX_WRITE  ((size_t)1 << 30)

/* Declared link of a 200 Gb/s RoCE NIC (see link() in transport.c). */
#define BRAID_ROCE_DEFAULT_ALPHA_US 3.0
#define BRAID_ROCE_DEFAULT_GBPS     20.0

/* Work request ids: kind in the top bits, then the peer, then a number. */
#define BRAID_ROCE_WR_PUT  1ull /* signaled last WR of a batch: n = seq */
#define BRAID_ROCE_WR_DATA 2ull /* unsignaled WRITE: completes on error only  \
                                 */
#define BRAID_ROCE_WR_RECV   3ull /* receive of a signal: n = slot */
#define BRAID_ROCE_PEER_BITS 20
#define BRAID_ROCE_SEQ_BITS  42
#define BRAID_ROCE_SEQ_MASK  ((1ull << BRAID_ROCE_SEQ_BITS) - 1)
#define BRAID_ROCE_MAX_RANKS (1 << BRAID_ROCE_PEER_BITS)

/* The message that follows a put's data: where to store which flag. */
typedef struct braid_roce_sig {
    uint32_t magic; /* BRAID_ROCE_SIG_MAGIC: catches a stray message */
    uint32_t area;  /* area id, the same on every rank (mem_alloc order) */
    uint64_t flag_off;
    uint64_t flag_val;
} braid_roce_sig_t;

#define BRAID_ROCE_SIG_MAGIC 0x62726f63u /* "broc" */

/* Resources held by one posted put until its completion. */
typedef struct braid_roce_op {
    struct ibv_mr *tmp_mr; /* registration of an unregistered source */
    uint32_t       nwr;    /* send WRs it used */
} braid_roce_op_t;

typedef struct braid_roce_peer {
    struct ibv_qp  *qp;
    uint32_t        psn;          /* our initial send PSN on this QP */
    uint64_t        posted;       /* seq of the last put posted (mod 2^42) */
    uint64_t        done;         /* seq of the last put completed */
    uint32_t        sq_used;      /* send WRs not yet known complete */
    double          active_since; /* last completion, or first post */
    braid_roce_op_t ops[BRAID_ROCE_SQ_DEPTH]; /* by seq % SQ_DEPTH */
    uint64_t        bounce_seq[BRAID_ROCE_BOUNCE_SLOTS]; /* put using it */
    uint32_t        bounce_next;
    braid_status_t  failed; /* BRAID_OK until a completion error */
    char            why[160];
    int             qp_error; /* moved to the error state by cancel */
} braid_roce_peer_t;

struct braid_roce_comm;

/* One collectively allocated area. */
typedef struct braid_roce_area {
    uint32_t       id;
    void          *base;    /* mmap'ed, page aligned, zero-filled */
    size_t         map_len; /* whole pages, at least one */
    size_t         len;     /* what the caller asked for */
    struct ibv_mr *mr;
    uint64_t      *raddr; /* [size] each rank's base address */
    uint32_t      *rkey;  /* [size] */
} braid_roce_area_t;

/* Device, port and address chosen on this host. */
typedef struct braid_roce_dev {
    struct ibv_context *ctx;
    char                name[IBV_SYSFS_NAME_MAX];
    uint8_t             port;
    uint8_t             link_layer; /* IBV_LINK_LAYER_* */
    uint16_t            lid;
    enum ibv_mtu        mtu;        /* active MTU of the port */
    uint32_t            max_msg_sz; /* largest message of the port */
    int                 gid_index;  /* -1: no GRH (InfiniBand, LID routed) */
    union ibv_gid       gid;
    char                gid_desc[64]; /* "3 (RoCE v2, ::ffff:10.0.0.1)" */
} braid_roce_dev_t;

typedef struct braid_roce_comm {
    const braid_services_t *svc;
    braid_oob_t             oob;
    int                     rank;
    int                     size;
    braid_roce_dev_t        dev;
    struct ibv_pd          *pd;
    struct ibv_cq          *cq;
    braid_roce_peer_t      *peers;      /* [size]; ours has no QP */
    uint32_t                max_inline; /* of our QPs */
    size_t                  max_write;  /* bytes per RDMA WRITE */
    /* One registration holds inbox [size][RQ_DEPTH] (received signals),
     * outbox [size][SQ_DEPTH] (signals being sent) and bounce
     * [size][BOUNCE_SLOTS][BOUNCE_SIZE] (copies of small sources). */
    void               *bufs;
    size_t              bufs_len;
    struct ibv_mr      *bufs_mr;
    braid_roce_sig_t   *inbox;
    braid_roce_sig_t   *outbox;
    uint8_t            *bounce;
    braid_roce_area_t **areas;     /* by id; NULL once freed */
    uint32_t            next_area; /* id of the next mem_alloc */
    uint32_t            nareas;    /* ids below this are in areas */
    uint32_t            areas_cap;
    braid_link_t        link;
    braid_status_t      failed; /* sticky: first fatal error */
    char                why[256];
    /* While set (cancel), failures are recorded but not reported through
     * svc->error: the core reads the call's error message after finish,
     * which cancels, so reporting there would replace the real cause. */
    int quiet;
} braid_roce_comm_t;

/* env.c: BRAID_ROCE_* parsing.  Errors are BRAID_ERR_PARSE with position. */
braid_status_t braid_roce_env_link(const braid_services_t *svc,
                                   braid_link_t *link, char *why,
                                   size_t why_len);
braid_status_t braid_roce_env_dev(const braid_services_t *svc, char *name,
                                  size_t name_len, int *port, char *why,
                                  size_t why_len);
braid_status_t braid_roce_env_max_write(const braid_services_t *svc,
                                        size_t *bytes, char *why,
                                        size_t why_len);
braid_status_t braid_roce_env_gid_index(const braid_services_t *svc,
                                        int *index, char *why, size_t why_len);

/* device.c: picks device, port and GID; *why says why not (for probe). */
braid_status_t braid_roce_dev_open(const braid_services_t *svc,
                                   braid_roce_dev_t *dev, char *why,
                                   size_t why_len);
void           braid_roce_dev_close(braid_roce_dev_t *dev);

/* connect.c */
braid_status_t braid_roce_comm_create(const braid_transport_t *self,
                                      const braid_services_t  *svc,
                                      const braid_oob_t       *oob,
                                      const braid_topo_t *topo, void **tcomm);
void           braid_roce_comm_destroy(void *tcomm);
/* All of this rank's puts complete (or failed), bounded by the timeout. */
braid_status_t braid_roce_drain(braid_roce_comm_t *comm, const char *what);

/* cq.c */
braid_status_t braid_roce_poll(braid_roce_comm_t *comm);
braid_status_t braid_roce_post_recv(braid_roce_comm_t *comm, int peer,
                                    uint32_t slot);
/* Whether put seq of peer has completed (sequence numbers wrap). */
int braid_roce_seq_done(const braid_roce_peer_t *p, uint64_t seq);

static inline uint64_t braid_roce_wr_id(uint64_t kind, int peer, uint64_t n)
{
    return kind << (BRAID_ROCE_PEER_BITS + BRAID_ROCE_SEQ_BITS) |
           (uint64_t)peer << BRAID_ROCE_SEQ_BITS | (n & BRAID_ROCE_SEQ_MASK);
}

static inline braid_roce_sig_t *braid_roce_inbox(braid_roce_comm_t *comm,
                                                 int peer, uint32_t slot)
{
    return &comm->inbox[(size_t)peer * BRAID_ROCE_RQ_DEPTH + slot];
}

static inline braid_roce_sig_t *braid_roce_outbox(braid_roce_comm_t *comm,
                                                  int peer, uint32_t slot)
{
    return &comm->outbox[(size_t)peer * BRAID_ROCE_SQ_DEPTH + slot];
}

static inline uint8_t *braid_roce_bounce(braid_roce_comm_t *comm, int peer,
                                         uint32_t slot)
{
    return comm->bounce + ((size_t)peer * BRAID_ROCE_BOUNCE_SLOTS + slot) *
                              BRAID_ROCE_BOUNCE_SIZE;
}

/* mem.c */
braid_status_t braid_roce_mem_alloc(void *tcomm, size_t len,
                                    braid_rmem_t *mem);
void           braid_roce_mem_free(void *tcomm, braid_rmem_t *mem);
void           braid_roce_area_release(braid_roce_area_t *area);
/* The area whose local copy holds [p, p+len), or NULL. */
braid_roce_area_t *braid_roce_area_holding(braid_roce_comm_t *comm,
                                           const void *p, size_t len);

/* put.c */
braid_status_t braid_roce_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                     size_t dst_off, const void *src,
                                     size_t len, size_t flag_off,
                                     uint64_t flag_val, braid_treq_t *req);
braid_status_t braid_roce_test(void *tcomm, braid_treq_t *req);
void           braid_roce_cancel(void *tcomm, braid_treq_t *req);

/* Records the first fatal error of the communicator (and returns status). */
braid_status_t braid_roce_fail(braid_roce_comm_t *comm, braid_status_t status,
                               const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
