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
 * Completion: only the SEND is signaled.  RC completes a send queue in
 * order, so its completion means the WRITE before it is done too and src may
 * be reused; it also returns the put's send-queue slots. */
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
static braid_status_t wait_put(braid_roce_comm_t *comm, int peer,
                               uint64_t seq, const char *why_waiting)
{
    const braid_services_v1_t *svc = comm->svc;
    braid_roce_peer_t         *p   = &comm->peers[peer];
    double                     t0  = svc->now();
    braid_status_t             st;

    while (!braid_roce_seq_done(p, seq)) {
        if ((st = braid_roce_poll(comm)) != BRAID_OK)
            return st;
        if (svc->now() - t0 > svc->timeout_s())
            return svc->error(BRAID_ERR_TIMEOUT, "roce: rank %d: put_signal "
                              "to rank %d: waited %.1f s for %s (%u work "
                              "requests unacknowledged; is rank %d alive and "
                              "progressing?)", comm->rank, peer,
                              svc->now() - t0, why_waiting, p->sq_used, peer);
    }
    return BRAID_OK;
}

static braid_status_t check_args(braid_roce_comm_t *comm,
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
        return comm->svc->error(BRAID_ERR_INVALID_ARG, "roce: put_signal to "
                                "rank %d of %d: %zu bytes at offset %zu and "
                                "an 8-byte flag at %zu do not fit an area of "
                                "%zu bytes (or the flag is not 8-byte "
                                "aligned, or src is NULL)", peer, comm->size,
                                len, dst_off, flag_off, area_len);
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
        sge->addr    = (uint64_t)(uintptr_t)braid_roce_bounce(comm, peer, slot);
        sge->lkey    = comm->bufs_mr->lkey;
        *bounce_slot = (int)slot;
        return BRAID_OK;
    }
    /* Read access only: no IBV_ACCESS_* flag needed, and const memory
     * (a read-only mapping) can be registered that way. */
    *tmp_mr = ibv_reg_mr(comm->pd, (void *)(uintptr_t)src, len, 0);
    if (*tmp_mr == NULL)
        return comm->svc->error(BRAID_ERR_TRANSPORT, "roce: rank %d: "
                                "put_signal to rank %d: ibv_reg_mr of the "
                                "%zu-byte source on %s failed: %s (locked "
                                "memory limit, ulimit -l?)", comm->rank, peer,
                                len, comm->dev.name, strerror(errno));
    sge->addr = (uint64_t)(uintptr_t)src;
    sge->lkey = (*tmp_mr)->lkey;
    return BRAID_OK;
}

braid_status_t braid_roce_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                     size_t dst_off, const void *src,
                                     size_t len, size_t flag_off,
                                     uint64_t flag_val, braid_treq_t *req)
{
    braid_roce_comm_t  *comm = tcomm;
    braid_roce_area_t  *area;
    braid_roce_peer_t  *p;
    braid_roce_sig_t   *sig;
    struct ibv_mr      *tmp_mr = NULL;
    struct ibv_sge      src_sge = {0}, data_sge[BRAID_ROCE_MAX_CHUNKS], sig_sge;
    struct ibv_send_wr  data_wr[BRAID_ROCE_MAX_CHUNKS], sig_wr, *bad = NULL;
    size_t              nchunks = (len + comm->max_write - 1) / comm->max_write;
    uint32_t            need;
    uint64_t            seq;
    int                 bounce_slot = -1, rc;
    braid_status_t      st;

    req->handle = NULL;
    req->active = 0;
    st = check_args(comm, mem, peer, dst_off, src, len, flag_off);
    if (st != BRAID_OK)
        return st;
    area = mem->impl;
    if (peer == comm->rank)
        return put_self(area, dst_off, src, len, flag_off, flag_val, req);
    if (comm->failed != BRAID_OK)
        return comm->svc->error(comm->failed, "%s", comm->why);
    if (nchunks > BRAID_ROCE_MAX_CHUNKS)
        return comm->svc->error(BRAID_ERR_INVALID_ARG, "roce: put_signal to "
                                "rank %d: %zu bytes is more than %d writes of "
                                "%zu bytes (the most %s takes in one)", peer,
                                len, BRAID_ROCE_MAX_CHUNKS, comm->max_write,
                                comm->dev.name);
    need = (uint32_t)nchunks + 1;
    p = &comm->peers[peer];
    /* Room for our WRs in the send queue: wait for the oldest puts. */
    while (BRAID_ROCE_SQ_DEPTH - p->sq_used < need) {
        uint64_t oldest = (p->done + 1) & BRAID_ROCE_SEQ_MASK;
        if ((st = wait_put(comm, peer, oldest, "send queue room")) != BRAID_OK)
            return st;
    }
    seq = (p->posted + 1) & BRAID_ROCE_SEQ_MASK;

    memset(data_wr, 0, sizeof(data_wr));
    memset(&sig_wr, 0, sizeof(sig_wr));
    if (len > 0) {
        st = source_sge(comm, peer, src, len, &src_sge, &tmp_mr,
                        &bounce_slot);
        if (st != BRAID_OK)
            return st;
    }
    /* The data, in writes of at most max_write bytes, chained before the
     * signal and posted with it in one call. */
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * comm->max_write;
        size_t n   = len - off < comm->max_write ? len - off : comm->max_write;
        data_sge[c].addr   = src_sge.addr + off;
        data_sge[c].length = (uint32_t)n;
        data_sge[c].lkey   = src_sge.lkey;
        data_wr[c].wr_id   = braid_roce_wr_id(BRAID_ROCE_WR_DATA, peer, seq);
        data_wr[c].sg_list = &data_sge[c];
        data_wr[c].num_sge = 1;
        data_wr[c].opcode  = IBV_WR_RDMA_WRITE;
        data_wr[c].wr.rdma.remote_addr = area->raddr[peer] + dst_off + off;
        data_wr[c].wr.rdma.rkey        = area->rkey[peer];
        data_wr[c].next    = c + 1 < nchunks ? &data_wr[c + 1] : &sig_wr;
    }

    /* The outbox slot of this seq is free: at most SQ_DEPTH puts are in
     * flight, and the one that used it last has completed. */
    sig = braid_roce_outbox(comm, peer, (uint32_t)(seq % BRAID_ROCE_SQ_DEPTH));
    sig->magic    = BRAID_ROCE_SIG_MAGIC;
    sig->area     = area->id;
    sig->flag_off = flag_off;
    sig->flag_val = flag_val;
    sig_sge.addr   = (uint64_t)(uintptr_t)sig;
    sig_sge.length = sizeof(*sig);
    sig_sge.lkey   = comm->bufs_mr->lkey;
    sig_wr.wr_id      = braid_roce_wr_id(BRAID_ROCE_WR_PUT, peer, seq);
    sig_wr.sg_list    = &sig_sge;
    sig_wr.num_sge    = 1;
    sig_wr.opcode     = IBV_WR_SEND;
    sig_wr.send_flags = IBV_SEND_SIGNALED;
    if (comm->max_inline >= sizeof(*sig))
        sig_wr.send_flags |= IBV_SEND_INLINE;

    rc = ibv_post_send(p->qp, nchunks > 0 ? &data_wr[0] : &sig_wr, &bad);
    if (rc != 0) {
        if (tmp_mr != NULL)
            ibv_dereg_mr(tmp_mr);
        return comm->svc->error(BRAID_ERR_TRANSPORT, "roce: rank %d: "
                                "put_signal to rank %d: ibv_post_send on %s "
                                "failed: %s", comm->rank, peer,
                                comm->dev.name, strerror(rc));
    }
    if (p->sq_used == 0)
        p->active_since = comm->svc->now();
    p->sq_used += need;
    p->posted = seq;
    p->ops[seq % BRAID_ROCE_SQ_DEPTH].nwr    = need;
    p->ops[seq % BRAID_ROCE_SQ_DEPTH].tmp_mr = tmp_mr;
    if (bounce_slot >= 0)
        p->bounce_seq[bounce_slot] = seq;
    req->handle = handle_encode(peer, seq);
    req->active = 1;
    return BRAID_OK;
}

braid_status_t braid_roce_test(void *tcomm, braid_treq_t *req)
{
    braid_roce_comm_t         *comm = tcomm;
    const braid_services_v1_t *svc  = comm->svc;
    braid_roce_peer_t         *p;
    braid_status_t             st;
    uint64_t                   seq;
    int                        peer;
    double                     idle;

    if (!req->active)
        return BRAID_OK;
    if (req->handle == NULL) { /* completed when posted */
        req->active = 0;
        return BRAID_OK;
    }
    handle_decode(req->handle, &peer, &seq);
    p  = &comm->peers[peer];
    st = braid_roce_poll(comm);
    if (st == BRAID_OK && braid_roce_seq_done(p, seq)) {
        req->handle = NULL;
        req->active = 0;
        return BRAID_OK;
    }
    if (st != BRAID_OK) {
        req->handle = NULL;
        req->active = 0;
        return st;
    }
    /* Timed from the last sign of life of that QP, not from the post: a
     * long queue of puts to a live peer is not a timeout. */
    idle = svc->now() - p->active_since;
    if (idle > svc->timeout_s())
        return svc->error(BRAID_ERR_TIMEOUT, "roce: rank %d: put_signal to "
                          "rank %d not complete: no completion from that QP "
                          "for %.1f s (%u work requests outstanding; is rank "
                          "%d alive?)", comm->rank, peer, idle, p->sq_used,
                          peer);
    return BRAID_INPROGRESS;
}
