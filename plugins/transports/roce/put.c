/* put_signal and test over verbs.
 *
 * The ordering guarantee.  The flag must become visible only after the data.
 * Two RDMA WRITEs on one RC QP (data, then flag) would be the obvious
 * scheme, but the InfiniBand transport rules (IBA vol. 1, ch. 9 ordering and
 * the RDMA WRITE semantics, inherited by RoCE) order the *execution* of a
 * QP's requests, not the order in which the bytes of RDMA WRITEs become
 * visible in the responder's memory: an application may not rely on the
 * content of an RDMA WRITE's target until a later event on the same QP says
 * it is there: the completion of a receive (a SEND, or an RDMA WRITE with
 * immediate) that followed the WRITE, or an ATOMIC that followed it.  Polling
 * a flag written by a second WRITE happens to work on many HCAs and on rxe,
 * but PCIe relaxed ordering or adaptive routing with out-of-order placement
 * break it.
 *
 * So a put is: an RDMA WRITE of the data (unsignaled), then on the same QP a
 * SEND of 24 bytes {area, flag_off, flag_val} (signaled).  The target's
 * receive completion for that SEND is generated only once every earlier
 * request on the QP has executed and placed its data; the target's
 * progress() polls its CQ and stores the flag itself with a release store
 * (cq.c), so a reader that acquire-loads the flag sees the data.  The ABI
 * asks a polling target to call progress, so the flag appearing only then is
 * within the contract.
 *
 * Alternatives considered: RDMA WRITE WITH IMMEDIATE gives the same guarantee
 * in one message, but its 32-bit immediate holds neither a 64-bit flag value
 * nor an arbitrary offset; an ATOMIC on the flag would need no help from the
 * target but can only add or compare-and-swap, not store a value, and not
 * every RoCE device offers atomics.
 *
 * Source buffers: the HCA reads only registered memory.  A source inside one
 * of this communicator's areas goes out zero-copy under that area's key; a
 * small other source is copied into a registered bounce slot (a copy is far
 * cheaper than a registration); a larger one is registered for the life of
 * the put.  A registration cache would save that cost for repeated large
 * sources but is only correct with hooks that see memory being unmapped; on
 * devices with on-demand paging one implicit ODP region would remove it.
 *
 * Completion: only the SEND is signaled (and, for a put too large for one
 * batch of writes, the last write of each earlier batch).  RC completes a
 * send queue in order, so the SEND's completion means the writes before it
 * are done too and src may be reused; it also returns the put's send-queue
 * slots. */
#include <errno.h>
#include <string.h>

#include "tl_roce.h"

_Static_assert(sizeof(void *) >= sizeof(uint64_t),
               "put handles are encoded in a pointer");

#define HANDLE_VALID (1ull << 63)

static void *handle_encode(int peer, uint64_t seq)
{
    return (void *)(uintptr_t)(HANDLE_VALID |
                               (uint64_t)peer << BRAID_ROCE_SEQ_BITS | seq);
}

static void handle_decode(const void *h, int *peer, uint64_t *seq)
{
    uint64_t v = (uint64_t)(uintptr_t)h;

    *peer = (int)((v >> BRAID_ROCE_SEQ_BITS) &
                  ((1ull << BRAID_ROCE_PEER_BITS) - 1));
    *seq  = v & BRAID_ROCE_SEQ_MASK;
}

/* Polls until put seq to peer has completed, bounded by the timeout. */
static braid_status_t wait_put(braid_roce_comm_t *comm, int peer, uint64_t seq,
                               const char *why_waiting)
{
    const braid_services_t *svc = comm->svc;
    braid_roce_peer_t      *p   = &comm->peers[peer];
    double                  t0  = svc->now();
    braid_status_t          st;

    while (!braid_roce_seq_done(p, seq)) {
        if ((st = braid_roce_poll(comm)) != BRAID_OK)
            return st;
        if (svc->now() - t0 > svc->timeout_s())
            return svc->error(BRAID_ERR_TIMEOUT,
                              "roce: rank %d: put_signal "
                              "to rank %d: waited %.1f s for %s (%u work "
                              "requests unacknowledged; is rank %d alive and "
                              "progressing?)",
                              comm->rank, peer, svc->now() - t0, why_waiting,
                              p->sq_used, peer);
    }
    return BRAID_OK;
}

static braid_status_t check_args(braid_roce_comm_t  *comm,
                                 const braid_rmem_t *mem, int peer,
                                 size_t dst_off, const void *src, size_t len,
                                 size_t flag_off)
{
    size_t area_len = mem != NULL ? mem->len : 0;

    if (mem == NULL || mem->impl == NULL || peer < 0 || peer >= comm->size ||
        (len > 0 && src == NULL) || dst_off > area_len ||
        len > area_len - dst_off || area_len < sizeof(uint64_t) ||
        flag_off > area_len - sizeof(uint64_t) ||
        flag_off % sizeof(uint64_t) != 0)
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "roce: put_signal to "
                                "rank %d of %d: %zu bytes at offset %zu and "
                                "an 8-byte flag at %zu do not fit an area of "
                                "%zu bytes (or the flag is not 8-byte "
                                "aligned, or src is NULL)",
                                peer, comm->size, len, dst_off, flag_off,
                                area_len);
    return BRAID_OK;
}

/* To ourselves: plain stores, the same ordering a remote put gives. */
static braid_status_t put_self(braid_roce_area_t *area, size_t dst_off,
                               const void *src, size_t len, size_t flag_off,
                               uint64_t flag_val, braid_treq_t *req)
{
    uint8_t *base = area->base;

    if (len > 0)
        memmove(base + dst_off, src, len);
    __atomic_store_n((uint64_t *)(base + flag_off), flag_val,
                     __ATOMIC_RELEASE);
    req->active = 1; /* no handle: test reports it complete */
    return BRAID_OK;
}

/* Local address and key the HCA reads the data from. */
static braid_status_t source_sge(braid_roce_comm_t *comm, int peer,
                                 const void *src, size_t len,
                                 struct ibv_sge *sge, struct ibv_mr **tmp_mr,
                                 int *bounce_slot)
{
    braid_roce_peer_t *p = &comm->peers[peer];
    braid_roce_area_t *a = braid_roce_area_holding(comm, src, len);
    braid_status_t     st;

    *tmp_mr      = NULL;
    *bounce_slot = -1;
    if (a != NULL) {
        sge->addr = (uint64_t)(uintptr_t)src;
        sge->lkey = a->mr->lkey;
        return BRAID_OK;
    }
    if (len <= BRAID_ROCE_BOUNCE_SIZE) {
        uint32_t slot = p->bounce_next % BRAID_ROCE_BOUNCE_SLOTS;
        st = wait_put(comm, peer, p->bounce_seq[slot], "a bounce buffer");
        if (st != BRAID_OK)
            return st;
        p->bounce_next++;
        memcpy(braid_roce_bounce(comm, peer, slot), src, len);
        sge->addr = (uint64_t)(uintptr_t)braid_roce_bounce(comm, peer, slot);
        sge->lkey = comm->bufs_mr->lkey;
        *bounce_slot = (int)slot;
        return BRAID_OK;
    }
    /* Read access only: no IBV_ACCESS_* flag needed, and const memory
     * (a read-only mapping) can be registered that way. */
    *tmp_mr = ibv_reg_mr(comm->pd, (void *)(uintptr_t)src, len, 0);
    if (*tmp_mr == NULL)
        return comm->svc->error(BRAID_ERR_TRANSPORT,
                                "roce: rank %d: "
                                "put_signal to rank %d: ibv_reg_mr of the "
                                "%zu-byte source on %s failed: %s (locked "
                                "memory limit, ulimit -l?)",
                                comm->rank, peer, len, comm->dev.name,
                                strerror(errno));
    sge->addr = (uint64_t)(uintptr_t)src;
    sge->lkey = (*tmp_mr)->lkey;
    return BRAID_OK;
}

/* Where a put's data comes from and goes to, for post_batch. */
typedef struct put_plan {
    braid_roce_area_t *area;
    size_t             dst_off;
    struct ibv_sge     src; /* whole source: address and key */
    size_t             len;
    size_t             nchunks; /* RDMA WRITEs of at most max_write */
    uint64_t           flag_off;
    uint64_t           flag_val;
} put_plan_t;

/* Posts chunks [first, first + n) of the data and, when last, the signal;
 * the final WR is signaled, so each batch completes on its own and a put
 * larger than the send queue still drains it.  tmp_mr (or NULL) is released
 * when this batch completes. */
static braid_status_t post_batch(braid_roce_comm_t *comm, int peer,
                                 const put_plan_t *pl, size_t first, size_t n,
                                 int last, struct ibv_mr *tmp_mr,
                                 uint64_t *seq_out)
{
    braid_roce_peer_t *p    = &comm->peers[peer];
    uint32_t           need = (uint32_t)n + (last ? 1u : 0u);
    struct ibv_sge     sge[BRAID_ROCE_MAX_CHUNKS + 1];
    struct ibv_send_wr wr[BRAID_ROCE_MAX_CHUNKS + 1], *bad = NULL;
    braid_roce_sig_t  *sig;
    braid_status_t     st;
    uint64_t           seq;
    int                rc;

    /* Room in the send queue: wait for the oldest puts. */
    while (BRAID_ROCE_SQ_DEPTH - p->sq_used < need) {
        uint64_t oldest = (p->done + 1) & BRAID_ROCE_SEQ_MASK;
        if ((st = wait_put(comm, peer, oldest, "send queue room")) != BRAID_OK)
            return st;
    }
    seq = (p->posted + 1) & BRAID_ROCE_SEQ_MASK;
    memset(wr, 0, sizeof(wr));
    for (size_t i = 0; i < n; i++) {
        size_t off = (first + i) * comm->max_write;
        size_t len =
            pl->len - off < comm->max_write ? pl->len - off : comm->max_write;
        sge[i].addr   = pl->src.addr + off;
        sge[i].length = (uint32_t)len;
        sge[i].lkey   = pl->src.lkey;
        wr[i].wr_id   = braid_roce_wr_id(BRAID_ROCE_WR_DATA, peer, seq);
        wr[i].sg_list = &sge[i];
        wr[i].num_sge = 1;
        wr[i].opcode  = IBV_WR_RDMA_WRITE;
        wr[i].wr.rdma.remote_addr = pl->area->raddr[peer] + pl->dst_off + off;
        wr[i].wr.rdma.rkey        = pl->area->rkey[peer];
        wr[i].next                = &wr[i + 1];
    }
    if (last) {
        /* The outbox slot of this seq is free: at most SQ_DEPTH puts are
         * in flight, and the one that used it before has completed. */
        sig           = braid_roce_outbox(comm, peer,
                                          (uint32_t)(seq % BRAID_ROCE_SQ_DEPTH));
        sig->magic    = BRAID_ROCE_SIG_MAGIC;
        sig->area     = pl->area->id;
        sig->flag_off = pl->flag_off;
        sig->flag_val = pl->flag_val;
        sge[n].addr   = (uint64_t)(uintptr_t)sig;
        sge[n].length = sizeof(*sig);
        sge[n].lkey   = comm->bufs_mr->lkey;
        wr[n].sg_list = &sge[n];
        wr[n].num_sge = 1;
        wr[n].opcode  = IBV_WR_SEND;
        if (comm->max_inline >= sizeof(*sig))
            wr[n].send_flags = IBV_SEND_INLINE;
    }
    wr[need - 1].next  = NULL;
    wr[need - 1].wr_id = braid_roce_wr_id(BRAID_ROCE_WR_PUT, peer, seq);
    wr[need - 1].send_flags |= IBV_SEND_SIGNALED;

    rc = ibv_post_send(p->qp, &wr[0], &bad);
    if (rc != 0)
        return comm->svc->error(BRAID_ERR_TRANSPORT,
                                "roce: rank %d: "
                                "put_signal to rank %d: ibv_post_send on %s "
                                "failed: %s",
                                comm->rank, peer, comm->dev.name,
                                strerror(rc));
    if (p->sq_used == 0)
        p->active_since = comm->svc->now();
    p->sq_used += need;
    p->posted                                = seq;
    p->ops[seq % BRAID_ROCE_SQ_DEPTH].nwr    = need;
    p->ops[seq % BRAID_ROCE_SQ_DEPTH].tmp_mr = tmp_mr;
    *seq_out                                 = seq;
    return BRAID_OK;
}

braid_status_t braid_roce_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                     size_t dst_off, const void *src,
                                     size_t len, size_t flag_off,
                                     uint64_t flag_val, braid_treq_t *req)
{
    braid_roce_comm_t *comm   = tcomm;
    struct ibv_mr     *tmp_mr = NULL;
    put_plan_t         pl;
    uint64_t           seq         = 0;
    size_t             first       = 0;
    int                bounce_slot = -1;
    braid_status_t     st;

    req->handle = NULL;
    req->active = 0;
    st          = check_args(comm, mem, peer, dst_off, src, len, flag_off);
    if (st != BRAID_OK)
        return st;
    if (peer == comm->rank)
        return put_self(mem->impl, dst_off, src, len, flag_off, flag_val, req);
    if (comm->failed != BRAID_OK)
        return comm->svc->error(comm->failed, "%s", comm->why);

    memset(&pl, 0, sizeof(pl));
    pl.area     = mem->impl;
    pl.dst_off  = dst_off;
    pl.len      = len;
    pl.nchunks  = (len + comm->max_write - 1) / comm->max_write;
    pl.flag_off = flag_off;
    pl.flag_val = flag_val;
    if (len > 0) {
        st = source_sge(comm, peer, src, len, &pl.src, &tmp_mr, &bounce_slot);
        if (st != BRAID_OK)
            return st;
    }
    /* Batches of at most MAX_CHUNKS writes; the last one carries the
     * signal and releases the source registration when it completes. */
    do {
        size_t n    = pl.nchunks - first;
        int    last = n <= BRAID_ROCE_MAX_CHUNKS;
        if (!last)
            n = BRAID_ROCE_MAX_CHUNKS;
        st = post_batch(comm, peer, &pl, first, n, last, last ? tmp_mr : NULL,
                        &seq);
        if (st != BRAID_OK)
            break;
        first += n;
    } while (first < pl.nchunks);
    if (st != BRAID_OK && first == 0) {
        if (tmp_mr != NULL)
            ibv_dereg_mr(tmp_mr);
        return st;
    }
    if (st != BRAID_OK) {
        /* Part of the data is on its way and no signal will follow: this
         * communicator's puts to that peer are out of step for good.  The
         * batches posted still read the source, and the caller gets no
         * request to cancel: withdraw them here, as cancel would.  The
         * registration goes with the last of them, or at comm_destroy. */
        braid_treq_t posted = {handle_encode(peer, seq), 1};

        if (tmp_mr != NULL)
            comm->peers[peer].ops[seq % BRAID_ROCE_SQ_DEPTH].tmp_mr = tmp_mr;
        st =
            braid_roce_fail(comm, st,
                            "roce: rank %d: put_signal of %zu "
                            "bytes to rank %d abandoned after %zu of %zu "
                            "writes (status %d)",
                            comm->rank, len, peer, first, pl.nchunks, (int)st);
        braid_roce_cancel(comm, &posted); /* quiet: st's message stands */
        return st;
    }
    if (bounce_slot >= 0)
        comm->peers[peer].bounce_seq[bounce_slot] = seq;
    req->handle = handle_encode(peer, seq);
    req->active = 1;
    return BRAID_OK;
}

braid_status_t braid_roce_test(void *tcomm, braid_treq_t *req)
{
    braid_roce_comm_t *comm = tcomm;
    braid_roce_peer_t *p;
    braid_status_t     st;
    uint64_t           seq;
    int                peer;

    if (!req->active)
        return BRAID_OK;
    if (req->handle == NULL) { /* completed when posted */
        req->active = 0;
        return BRAID_OK;
    }
    handle_decode(req->handle, &peer, &seq);
    p  = &comm->peers[peer];
    st = braid_roce_poll(comm);
    if (braid_roce_seq_done(p, seq)) {
        req->handle = NULL;
        req->active = 0;
        return st;
    }
    /* Still in flight, the HCA still reads src: the request stays active
     * for the caller's cancel even when the communicator failed. */
    /* A dead peer ends in an error completion (the QP's ACK retries run
     * out); a slow live one is the core's timeout to judge. */
    return st != BRAID_OK ? st : BRAID_INPROGRESS;
}

/* Cancel.  A posted RDMA WRITE reads its source until the HCA reports its
 * completion, and the only completion that says it stopped is the CQE of
 * that put (or of a later WR on the QP: RC completes in order).  Two ways
 * to get it:
 *   - wait for it.  Not bounded: the signal SEND behind the data is
 *     retried forever (rnr_retry 7, connect.c) while the target is alive but
 *     posts no receive -- precisely a survivor tearing down after the same
 *     failure -- and a dead target only shows after the ~4 s of ACK
 *     retries, longer than a cancel may take with a short BRAID_TIMEOUT.
 *   - move the QP to the error state and drain the CQ.  The HCA then stops
 *     the QP's work and completes every outstanding WR with a flush error;
 *     that CQE, like a successful one, means the HCA is done with the
 *     buffer.  (Moving to the error state alone is not enough: until the
 *     flush CQE is polled a DMA read of src may still be under way.)
 * So cancel takes the second: error state, then poll until the put's own
 * CQE, bounded by the timeout.  It costs the QP, which is fine: cancel
 * runs only on a communicator that is failing.  A put already complete is
 * simply released, leaving the QP alone. */
static void qp_to_error(braid_roce_comm_t *comm, int peer)
{
    braid_roce_peer_t *p = &comm->peers[peer];
    struct ibv_qp_attr a;
    int                rc;

    if (p->qp_error || p->qp == NULL)
        return;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    rc         = ibv_modify_qp(p->qp, &a, IBV_QP_STATE);
    if (rc != 0)
        comm->svc->log(BRAID_LOG_ERROR, BRAID_ROCE_LOG,
                       "rank %d: moving the "
                       "QP to rank %d to the error state failed: %s; "
                       "waiting for its puts instead",
                       comm->rank, peer, strerror(rc));
    p->qp_error = 1;
}

void braid_roce_cancel(void *tcomm, braid_treq_t *req)
{
    braid_roce_comm_t      *comm = tcomm;
    const braid_services_t *svc  = comm->svc;
    braid_roce_peer_t      *p;
    uint64_t                seq;
    int                     peer;
    double                  t0;

    if (!req->active)
        return;
    req->active = 0;
    if (req->handle == NULL) /* completed when posted (to self) */
        return;
    handle_decode(req->handle, &peer, &seq);
    req->handle = NULL;
    p           = &comm->peers[peer];
    t0          = svc->now();
    comm->quiet++; /* the call's error message must stay the caller's */
    (void)braid_roce_poll(comm);
    if (!braid_roce_seq_done(p, seq)) {
        (void)braid_roce_fail(comm, BRAID_ERR_STATE,
                              "roce: rank %d: a "
                              "put_signal to rank %d was cancelled; the "
                              "communicator is unusable",
                              comm->rank, peer);
        qp_to_error(comm, peer);
        while (!braid_roce_seq_done(p, seq) &&
               svc->now() - t0 <= svc->timeout_s())
            (void)braid_roce_poll(comm);
    }
    comm->quiet--;
    if (!braid_roce_seq_done(p, seq))
        svc->log(BRAID_LOG_ERROR, BRAID_ROCE_LOG,
                 "rank %d: a cancelled "
                 "put_signal to rank %d has no completion after %.1f s; the "
                 "HCA may still read its source",
                 comm->rank, peer, svc->now() - t0);
}
