/* Internals of the "shm" transport: ranks of one host talk through POSIX
 * shared memory.  Algorithms never include this; they reach the transport
 * through braid_tl_t only.
 *
 * Memory of one communicator:
 *   - one "fifo" segment per rank, holding that rank's inbound rings (one per
 *     sender, the sender's own ring for self-sends included).  A receiver
 *     polls its own memory; a sender writes into the receiver's segment.
 *   - one segment per rank for every mem_alloc, mapped by every peer, which
 *     put_signal writes into directly (a single copy).
 * Every segment is unlinked from /dev/shm as soon as all ranks have mapped it,
 * so a rank that dies later leaves nothing behind. */
#ifndef BRAID_SHM_SHM_H
#define BRAID_SHM_SHM_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include <braid/plugin.h>

#define BRAID_SHM_COMPONENT "shm"
#define BRAID_SHM_CACHELINE 64
#define BRAID_SHM_NAME_LEN  56 /* "/braid-shm-<uid>-<pid>-<64 random bits>" */
#define BRAID_SHM_PREFIX    "/braid-shm-"
#define BRAID_SHM_TAG_MASK  ((UINT64_C(1) << BRAID_TAG_BITS) - 1)

/* ------------------------------------------------------------- segments */

/* One segment per rank, every rank's mapped by every rank (segment.c). */
typedef struct braid_shm_segset {
    size_t bytes; /* mapped length of each rank's segment */
    int    nranks;
    void **base; /* [nranks]; base[own rank] is this rank's own segment */
} braid_shm_segset_t;

/* Called on this rank's fresh (zeroed) segment before peers may map it. */
typedef void (*braid_shm_seg_init_fn)(void *base, size_t bytes, void *arg);

typedef struct braid_shm_comm braid_shm_comm_t;

/* Collective: creates this rank's segment of `bytes`, exchanges names through
 * the oob, maps every peer's, then unlinks every name once all ranks mapped.
 * A failure on any rank (`local`: one this rank had before the call) fails
 * every rank, and leaves no mapping, fd or name behind. */
braid_status_t braid_shm_segset_create(const braid_services_t *svc,
                                       const braid_oob_t      *oob,
                                       braid_status_t local, size_t bytes,
                                       const char           *what,
                                       braid_shm_seg_init_fn init, void *arg,
                                       braid_shm_segset_t *set);
void           braid_shm_segset_destroy(braid_shm_segset_t *set);

/* Fills name (BRAID_SHM_NAME_LEN) with a fresh unique segment name. */
braid_status_t braid_shm_seg_name(const braid_services_t *svc, char *name);
/* Length of a mapping able to hold `bytes` (page multiple, at least a page).
 */
size_t braid_shm_seg_round(size_t bytes);

/* ----------------------------------------------------------------- rings */

/* A ring carries the messages of one (sender, receiver) pair in fixed-size
 * cells.  The sender fills a cell, then publishes it by storing its sequence
 * number (release); the receiver polls the next cell's sequence number in
 * its own memory, so a small message costs one cache line moving from the
 * sender's core to the receiver's.  The receiver hands cells back through
 * `tail`, which the sender reads only when it believes the ring is full. */
#define BRAID_SHM_CELL_SIZE 16384u
#define BRAID_SHM_NCELLS    32u /* power of two */

typedef struct braid_shm_cell {
    uint64_t seq; /* ring position + 1 once the cell is full */
    uint64_t tag;
    uint64_t msg_len; /* total length of the message this cell belongs to */
    uint32_t len;     /* payload bytes in this cell */
    uint32_t first;   /* 1 on a message's first cell */
    unsigned char payload[BRAID_SHM_CELL_SIZE - 32];
} braid_shm_cell_t;

#define BRAID_SHM_CELL_PAYLOAD (sizeof(((braid_shm_cell_t *)0)->payload))

typedef struct braid_shm_ring {
    alignas(BRAID_SHM_CACHELINE) uint64_t tail; /* cells consumed (receiver) */
    alignas(BRAID_SHM_CACHELINE) braid_shm_cell_t cells[BRAID_SHM_NCELLS];
} braid_shm_ring_t;

/* Head of a fifo segment; the rings follow at BRAID_SHM_RINGS_OFF. */
typedef struct braid_shm_hdr {
    uint64_t magic;
    uint64_t bytes;
    int32_t  rank;
    int32_t  nranks;
    int64_t  pid;   /* owner, for the liveness check */
    uint64_t pidns; /* inode of the owner's pid namespace, 0 if unknown */
    /* Cross-memory attach check (cma.c): where this header lives in the
     * owner's address space, and a random word, which a peer reads with
     * process_vm_readv and compares with what its own mapping shows. */
    uint64_t cma_addr;
    uint64_t cma_nonce;
    /* Futex doorbell: peers bump it when they give this rank work while it
     * sleeps in wait() (wake.c); each word on its own line. */
    alignas(BRAID_SHM_CACHELINE) uint32_t doorbell;
    alignas(BRAID_SHM_CACHELINE) uint32_t sleeping;
} braid_shm_hdr_t;

#define BRAID_SHM_MAGIC     UINT64_C(0x62726169642d7368) /* "braid-sh" */
#define BRAID_SHM_RINGS_OFF ((size_t)4096)

_Static_assert(sizeof(braid_shm_hdr_t) <= BRAID_SHM_RINGS_OFF,
               "the fifo header overlaps the rings");
_Static_assert(sizeof(braid_shm_cell_t) == BRAID_SHM_CELL_SIZE,
               "cells must tile the ring exactly");
_Static_assert((BRAID_SHM_NCELLS & (BRAID_SHM_NCELLS - 1)) == 0,
               "BRAID_SHM_NCELLS must be a power of two");

/* ------------------------------------------------------------ two-sided */

typedef enum {
    BRAID_SHM_OP_SEND = 1,
    BRAID_SHM_OP_RECV,
} braid_shm_op_kind_t;

/* One posted send or receive that did not complete when posted. */
typedef struct braid_shm_op {
    struct braid_shm_op *next; /* in a send queue, a posted list, or free */
    braid_shm_op_kind_t  kind;
    int                  peer;
    int                  complete;
    braid_status_t       status; /* once complete */
    uint64_t             tag;
    size_t               len;
    size_t               done;    /* bytes pushed (send) or received (recv) */
    size_t               msg_len; /* recv: length the sender sent */
    uint64_t             msg_tag; /* recv: tag the sender sent (its check
                                     bits may differ: a mismatch) */
    const unsigned char *sbuf;
    unsigned char       *rbuf;
    unsigned             polls; /* tests since the last slow check */
    /* A send cancelled halfway: the rest of its bytes (at their offsets),
     * so that the message still ends whole without the caller's buffer.
     * The op then belongs to the transport, freed once pushed. */
    unsigned char *own;
} braid_shm_op_t;

/* A message that arrived before its receive was posted. */
typedef struct braid_shm_uxm {
    struct braid_shm_uxm *next;
    uint64_t              tag;
    size_t                len;
    size_t                got;
    unsigned char        *data;
    size_t                cap; /* bytes data holds (>= len) */
} braid_shm_uxm_t;

/* Freed unexpected buffers a peer's receiving side keeps for the next
 * unexpected messages: at most this many, of at most SPARE_MAX bytes each
 * and SPARE_BYTES in all.  Pipelined algorithms send segments well below
 * SPARE_MAX, and a sender whose messages are buffered as unexpected runs
 * ahead of its receiver by many of them. */
#define BRAID_SHM_SPARES      32
#define BRAID_SHM_SPARE_MAX   ((size_t)1 << 20)
#define BRAID_SHM_SPARE_BYTES ((size_t)8 << 20)

/* Receiving side of the ring from one peer. */
typedef struct braid_shm_in {
    braid_shm_ring_t *ring;     /* in this rank's segment */
    uint64_t          consumed; /* cells taken */
    /* The message being received (its cells are contiguous in the ring). */
    int              busy;
    size_t           got;
    size_t           len;
    braid_shm_op_t  *op;  /* destination: a matched receive, */
    braid_shm_uxm_t *uxm; /* or an unexpected entry; neither: discard */
    braid_shm_op_t  *posted_head, *posted_tail;
    braid_shm_uxm_t *uxm_head, *uxm_tail;
    /* Freed unexpected buffers kept for the next ones: a fresh allocation
     * of that size is fresh pages, faulted in on every message. */
    unsigned char *spare[BRAID_SHM_SPARES];
    size_t         spare_cap[BRAID_SHM_SPARES];
    size_t         spare_bytes; /* their sum */
    int            nspare;
} braid_shm_in_t;

/* Sending side of the ring to one peer. */
typedef struct braid_shm_out {
    braid_shm_ring_t *ring;        /* in the peer's segment */
    uint64_t          produced;    /* cells filled */
    uint64_t          tail_seen;   /* last tail read from the ring */
    braid_shm_op_t   *head, *tail; /* queued sends, in posting order */
} braid_shm_out_t;

/* Slab of ops, freed all at once by comm_destroy: an op whose request the
 * algorithm dropped after an error is not lost. */
typedef struct braid_shm_slab {
    struct braid_shm_slab *next;
    braid_shm_op_t         ops[64];
} braid_shm_slab_t;

/* A mem_alloc area; braid_rmem_t.impl points here. */
typedef struct braid_shm_rmem {
    struct braid_shm_rmem *prev, *next; /* live areas of the communicator */
    braid_shm_segset_t     set;
} braid_shm_rmem_t;

/* A peer's braid_mem_alloc file mapped here (mapped.c). */
#define BRAID_SHM_MAPS 16
typedef struct braid_shm_map {
    int         peer;
    int         fd; /* its number in the peer */
    uint64_t    ino;
    const char *base;
    size_t      len;
    uint64_t    used; /* map_clock at the last get: the oldest goes first */
} braid_shm_map_t;

struct braid_shm_comm {
    const braid_services_t *svc; /* the core's, valid for the process */
    /* a copy: the caller's struct may be temporary */
    braid_oob_t        oob;
    int                rank;
    int                size;
    braid_link_t       link;
    braid_shm_segset_t fifo;
    braid_shm_hdr_t   *hdr;      /* this rank's fifo segment */
    braid_shm_in_t    *in;       /* [size] */
    braid_shm_out_t   *out;      /* [size] */
    int                nsending; /* peers whose send queue is not empty */
    braid_shm_op_t    *free_ops;
    int                live_ops; /* taken from the slab, not yet put back */
    braid_shm_slab_t  *slabs;
    braid_shm_rmem_t   rmems; /* list head */
    /* More ranks than cores and the core's BRAID_SLEEP_POLLS on: peers
     * may sleep in wait(), so senders ring (wake.c). */
    int      wake_ok;
    uint64_t n_sleeps, n_sleep_timeouts, n_wakes; /* debug log */
    unsigned progress_calls;
    unsigned poll_calls; /* braid_shm_poll */
    double   last_live_check;
    int      lost_peer; /* first peer found dead, -1 */
    /* Single-copy reads (cma.c): whether every rank may read every peer's
     * memory with process_vm_readv, agreed by all ranks in comm_create;
     * why not, if not; the peers' pids and pidfds (-1: none). */
    int      cma_ok;
    char     cma_why[160];
    int64_t *cma_pid;   /* [size] */
    int     *cma_pidfd; /* [size] */
    /* Mapped reads of braid_mem_alloc buffers (mapped.c): whether this
     * rank may take its peers' fds (why not, if not), and the peers'
     * files it maps. */
    int             map_ok;
    char            map_why[160];
    braid_shm_map_t maps[BRAID_SHM_MAPS];
    int             nmaps;
    uint64_t        map_clock;
};

extern const braid_transport_t braid_shm_transport;

/* comm.c: whether /dev/shm works (creates, maps and removes a segment). */
braid_status_t braid_shm_probe(const braid_transport_t *self,
                               const braid_services_t *svc, char *why,
                               size_t why_len);

/* ring.c: one ring's cells.  push copies as much of op as fits and returns
 * the number of cells it filled; op->complete once all of it is in. */
size_t braid_shm_ring_push(const braid_services_t *svc, braid_shm_out_t *out,
                           braid_shm_op_t *op);
/* Returns the next full cell, or NULL. */
braid_shm_cell_t *braid_shm_ring_peek(braid_shm_in_t *in);
void              braid_shm_ring_pop(braid_shm_in_t *in);

/* ops.c: op pool. */
braid_shm_op_t *braid_shm_op_get(braid_shm_comm_t *comm);
void            braid_shm_op_put(braid_shm_comm_t *comm, braid_shm_op_t *op);
void            braid_shm_ops_release(braid_shm_comm_t *comm);

/* match.c: the receive side. */
/* Takes the full cells of peer's inbound ring; returns cells taken.  With
 * keep_unmatched, stops at a new message no posted receive wants (it stays
 * in the ring for the receive about to be posted); else buffers it as
 * unexpected. */
size_t braid_shm_drain(braid_shm_comm_t *comm, int peer, int keep_unmatched);
/* Matches a new receive against unexpected messages, else posts it.
 * Returns 1 when it completed at once. */
int  braid_shm_recv_post(braid_shm_comm_t *comm, braid_shm_op_t *op);
void braid_shm_recv_release(braid_shm_comm_t *comm);

/* p2p.c */
braid_status_t braid_shm_isend(void *tcomm, int peer, uint64_t tag,
                               const void *buf, size_t len, braid_treq_t *req);
braid_status_t braid_shm_irecv(void *tcomm, int peer, uint64_t tag, void *buf,
                               size_t len, braid_treq_t *req);
braid_status_t braid_shm_test(void *tcomm, braid_treq_t *req);
braid_status_t braid_shm_progress(void *tcomm);
/* cancel.c */
void braid_shm_cancel(void *tcomm, braid_treq_t *req);
/* Pushes queued sends and drains inbound rings; returns cells moved. */
size_t braid_shm_poll(braid_shm_comm_t *comm);

/* live.c: whether a peer process still exists. */
void           braid_shm_live_init(braid_shm_hdr_t *hdr);
braid_status_t braid_shm_live_check(braid_shm_comm_t *comm);

/* wake.c: futex doorbell for send/recv waits on an oversubscribed host. */
void braid_shm_wake_peer(braid_shm_comm_t *comm, int peer);
/* The transport's wait(): sleeps until a peer rings or max_s passes. */
void braid_shm_wait(void *tcomm, double max_s);

/* After giving peer work (cells to read, or room to write): wakes it if it
 * sleeps.  Free when no rank of the communicator may sleep. */
static inline void braid_shm_wake(braid_shm_comm_t *comm, int peer)
{
    if (comm->wake_ok && peer != comm->rank) {
        braid_shm_wake_peer(comm, peer);
    }
}

/* cma.c: single-copy reads through cross-memory attach. */
/* Collective (one oob allgather): decides comm->cma_ok on every rank alike
 * from BRAID_SHM_CMA and a test read of every peer.  Fails only on an oob
 * failure, a malformed BRAID_SHM_CMA, or BRAID_SHM_CMA=on without the path. */
braid_status_t braid_shm_cma_setup(braid_shm_comm_t *comm);
void           braid_shm_cma_release(braid_shm_comm_t *comm);
braid_status_t braid_shm_get_link(void *tcomm, double *alpha_us,
                                  double *beta_gbps, char *why,
                                  size_t why_len);
braid_status_t braid_shm_mem_expose(void *tcomm, const void *buf, size_t len,
                                    braid_rkey_t *key, void **handle);
void           braid_shm_mem_unexpose(void *tcomm, void *handle);
braid_status_t braid_shm_get(void *tcomm, int peer, const braid_rkey_t *key,
                             size_t off, void *dst, size_t len,
                             braid_treq_t *req);

/* mapped.c: single-copy reads of braid_mem_alloc buffers from a mapping. */
/* 1 when this rank may take every peer's fds (pidfd_getfd), else 0 and why;
 * after braid_shm_cma_setup found the cma path. */
int  braid_shm_map_probe(braid_shm_comm_t *comm, char *why, size_t why_len);
void braid_shm_map_release(braid_shm_comm_t *comm);
/* Marks *key (already filled for process_vm_readv) mappable when buf lies
 * in a braid_mem_alloc allocation. */
void braid_shm_map_key(braid_shm_comm_t *comm, const void *buf, size_t len,
                       braid_rkey_t *key);
/* Reads as get does from a mappable key: 1 when it did (or failed, *st),
 * 0 when the key is not mappable here (read it through the kernel). */
int braid_shm_map_get(braid_shm_comm_t *comm, int peer,
                      const braid_rkey_t *key, size_t off, void *dst,
                      size_t len, braid_status_t *st);

/* rma.c */
braid_status_t braid_shm_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem);
void           braid_shm_mem_free(void *tcomm, braid_rmem_t *mem);
const void *braid_shm_mem_peer(void *tcomm, const braid_rmem_t *mem, int peer);
braid_status_t braid_shm_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                    size_t dst_off, const void *src,
                                    size_t len, size_t flag_off,
                                    uint64_t flag_val, braid_treq_t *req);
void           braid_shm_rmem_release_all(braid_shm_comm_t *comm);

#endif
