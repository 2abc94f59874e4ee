/* Completion processing: the one CQ of a communicator carries the completions
 * of our puts (their signaled last work request) and the receives of the
 * signals peers send us, whose flags we store here. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tl_roce.h"

#define CQ_BATCH 16

braid_status_t braid_roce_fail(braid_roce_comm_t *comm, braid_status_t status,
                               const char *fmt, ...)
{
    va_list ap;

    if (comm->failed == BRAID_OK) {
        va_start(ap, fmt);
        vsnprintf(comm->why, sizeof(comm->why), fmt, ap);
        va_end(ap);
        comm->failed = status;
    }
    if (comm->quiet)
        return comm->failed;
    return comm->svc->error(comm->failed, "%s", comm->why);
}

int braid_roce_seq_done(const braid_roce_peer_t *p, uint64_t seq)
{
    /* done is at or past seq when seq lies in the half of the sequence space
     * that ends at done.  At most SQ_DEPTH puts are in flight, far less. */
    return ((p->done - seq) & BRAID_ROCE_SEQ_MASK) <
           (1ull << (BRAID_ROCE_SEQ_BITS - 1));
}

braid_status_t braid_roce_post_recv(braid_roce_comm_t *comm, int peer,
                                    uint32_t slot)
{
    struct ibv_sge sge = {
        .addr   = (uint64_t)(uintptr_t)braid_roce_inbox(comm, peer, slot),
        .length = sizeof(braid_roce_sig_t),
        .lkey   = comm->bufs_mr->lkey,
    };
    struct ibv_recv_wr wr = {
        .wr_id   = braid_roce_wr_id(BRAID_ROCE_WR_RECV, peer, slot),
        .sg_list = &sge,
        .num_sge = 1,
    };
    struct ibv_recv_wr *bad = NULL;
    int                 rc  = ibv_post_recv(comm->peers[peer].qp, &wr, &bad);

    if (rc != 0)
        return braid_roce_fail(comm, BRAID_ERR_TRANSPORT,
                               "roce: rank %d: "
                               "ibv_post_recv on %s for rank %d failed: %s",
                               comm->rank, comm->dev.name, peer, strerror(rc));
    return BRAID_OK;
}

/* A bad completion: the QP to this peer is now in the error state and every
 * later work request on it is flushed, so the communicator is done for. */
static braid_status_t peer_failed(braid_roce_comm_t *comm, int peer,
                                  const char *what, const struct ibv_wc *wc)
{
    braid_roce_peer_t *p    = &comm->peers[peer];
    braid_status_t     st   = BRAID_ERR_TRANSPORT;
    const char        *hint = "";

    switch (wc->status) {
    case IBV_WC_RETRY_EXC_ERR:
        st   = BRAID_ERR_PEER;
        hint = " (no acknowledgement: is that rank alive and reachable?)";
        break;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        st   = BRAID_ERR_PEER;
        hint = " (that rank posts no receives: did it exit?)";
        break;
    case IBV_WC_REM_ACCESS_ERR:
        hint = " (its area was freed, or the offset is outside it)";
        break;
    default: break;
    }
    if (p->failed == BRAID_OK) {
        p->failed = st;
        snprintf(p->why, sizeof(p->why),
                 "%s (status %d, vendor error "
                 "0x%x)%s",
                 ibv_wc_status_str(wc->status), (int)wc->status,
                 wc->vendor_err, hint);
    }
    return braid_roce_fail(comm, p->failed,
                           "roce: rank %d: %s with rank %d "
                           "on %s failed: %s",
                           comm->rank, what, peer, comm->dev.name, p->why);
}

/* The signaled last WR of put `seq` completed: it and everything posted
 * before it on that QP are done (RC completes a send queue in order). */
static braid_status_t put_done(braid_roce_comm_t *comm, int peer, uint64_t seq,
                               const struct ibv_wc *wc)
{
    braid_roce_peer_t *p  = &comm->peers[peer];
    braid_roce_op_t   *op = &p->ops[seq % BRAID_ROCE_SQ_DEPTH];

    if (op->tmp_mr != NULL)
        ibv_dereg_mr(op->tmp_mr);
    op->tmp_mr = NULL;
    p->sq_used -= op->nwr;
    op->nwr         = 0;
    p->done         = seq;
    p->active_since = comm->svc->now();
    if (wc->status != IBV_WC_SUCCESS)
        return peer_failed(comm, peer, "put_signal", wc);
    return BRAID_OK;
}

/* A signal arrived.  Its receive completion is generated only after the
 * data WRITEs posted before it on the QP are placed in our memory (see
 * put.c), so storing the flag now, with release order, lets a reader that
 * acquire-loads the flag see the data. */
static braid_status_t signal_arrived(braid_roce_comm_t *comm, int peer,
                                     uint32_t slot, const struct ibv_wc *wc)
{
    braid_roce_sig_t   sig;
    braid_roce_area_t *area;

    if (wc->status != IBV_WC_SUCCESS)
        return peer_failed(comm, peer, "receiving a signal", wc);
    memcpy(&sig, braid_roce_inbox(comm, peer, slot), sizeof(sig));
    if (wc->opcode != IBV_WC_RECV || wc->byte_len != sizeof(sig) ||
        sig.magic != BRAID_ROCE_SIG_MAGIC)
        return braid_roce_fail(comm, BRAID_ERR_TRANSPORT,
                               "roce: rank %d: "
                               "malformed signal from rank %d (opcode %d, %u "
                               "bytes, magic %#x)",
                               comm->rank, peer, (int)wc->opcode, wc->byte_len,
                               sig.magic);
    area = sig.area < comm->nareas ? comm->areas[sig.area] : NULL;
    if (area == NULL)
        return braid_roce_fail(comm, BRAID_ERR_TRANSPORT,
                               "roce: rank %d: "
                               "rank %d signalled area %u, which this rank "
                               "has %s",
                               comm->rank, peer, sig.area,
                               sig.area < comm->nareas ? "freed"
                                                       : "not allocated");
    if (sig.flag_off % sizeof(uint64_t) != 0 || area->len < sizeof(uint64_t) ||
        sig.flag_off > area->len - sizeof(uint64_t))
        return braid_roce_fail(comm, BRAID_ERR_TRANSPORT,
                               "roce: rank %d: "
                               "rank %d signalled flag offset %llu outside "
                               "area %u (%zu bytes)",
                               comm->rank, peer,
                               (unsigned long long)sig.flag_off, sig.area,
                               area->len);
    __atomic_store_n((uint64_t *)((uint8_t *)area->base + sig.flag_off),
                     sig.flag_val, __ATOMIC_RELEASE);
    return braid_roce_post_recv(comm, peer, slot);
}

static braid_status_t completion(braid_roce_comm_t   *comm,
                                 const struct ibv_wc *wc)
{
    uint64_t kind = wc->wr_id >> (BRAID_ROCE_PEER_BITS + BRAID_ROCE_SEQ_BITS);
    int      peer = (int)((wc->wr_id >> BRAID_ROCE_SEQ_BITS) &
                     ((1ull << BRAID_ROCE_PEER_BITS) - 1));
    uint64_t n    = wc->wr_id & BRAID_ROCE_SEQ_MASK;

    if (peer >= comm->size || peer == comm->rank)
        return braid_roce_fail(comm, BRAID_ERR_INTERNAL,
                               "roce: rank %d: "
                               "completion with unknown wr_id %#llx",
                               comm->rank, (unsigned long long)wc->wr_id);
    switch (kind) {
    case BRAID_ROCE_WR_PUT: return put_done(comm, peer, n, wc);
    case BRAID_ROCE_WR_DATA: /* unsignaled: only errors complete */
        return peer_failed(comm, peer, "put_signal data write", wc);
    case BRAID_ROCE_WR_RECV:
        return signal_arrived(comm, peer, (uint32_t)n, wc);
    default:
        return braid_roce_fail(comm, BRAID_ERR_INTERNAL,
                               "roce: rank %d: "
                               "completion with unknown wr_id %#llx",
                               comm->rank, (unsigned long long)wc->wr_id);
    }
}

braid_status_t braid_roce_poll(braid_roce_comm_t *comm)
{
    struct ibv_wc  wc[CQ_BATCH];
    braid_status_t first = BRAID_OK;
    int            n;

    do {
        n = ibv_poll_cq(comm->cq, CQ_BATCH, wc);
        if (n < 0)
            return braid_roce_fail(comm, BRAID_ERR_TRANSPORT,
                                   "roce: rank %d: "
                                   "ibv_poll_cq on %s failed (%d)",
                                   comm->rank, comm->dev.name, n);
        /* Every completion is accounted for, even after an error: each
         * releases the resources of its put. */
        for (int i = 0; i < n; i++) {
            braid_status_t st = completion(comm, &wc[i]);
            if (first == BRAID_OK)
                first = st;
        }
    } while (n == CQ_BATCH);
    if (first == BRAID_OK && comm->failed != BRAID_OK)
        return comm->quiet ? comm->failed
                           : comm->svc->error(comm->failed, "%s", comm->why);
    return first;
}
