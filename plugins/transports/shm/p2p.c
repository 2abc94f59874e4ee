/* Tagged send and receive over the rings.
 *
 * A send is complete once its last byte is in the receiver's ring (the
 * caller's buffer is free again), so a small send to a ring with room
 * completes inside isend and allocates nothing.  Larger sends, and sends
 * behind others to the same peer, wait in a per-peer queue that every poll
 * pushes on; the receiver's polls drain the rings into receives or the
 * unexpected queue (match.c). */
#include <string.h>

#include "shm.h"

/* Polls between the checks of a waiting op for a dead peer. */
#define SLOW_CHECK_POLLS 1024u
#define UNEXPECTED_POLLS 16u /* a power of two */

static braid_status_t check_args(braid_shm_comm_t *comm, int peer,
                                 uint64_t tag, const void *buf, size_t len,
                                 const char *what)
{
    if (peer < 0 || peer >= comm->size) {
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "shm: rank %d: %s rank "
                                "%d, but the communicator has %d ranks",
                                comm->rank, what, peer, comm->size);
    }
    if (tag & ~BRAID_SHM_TAG_MASK) {
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "shm: tag %#llx uses "
                                "more than the %d bits BRAID_TAG_BITS allows",
                                (unsigned long long)tag, BRAID_TAG_BITS);
    }
    if (buf == NULL && len != 0) {
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "shm: rank %d: %s rank "
                                "%d: NULL buffer of %zu bytes",
                                comm->rank, what, peer, len);
    }
    if (comm->lost_peer >= 0) {
        return comm->svc->error(BRAID_ERR_PEER,
                                "shm: rank %d: cannot %s rank "
                                "%d: rank %d has exited",
                                comm->rank, what, peer, comm->lost_peer);
    }
    return BRAID_OK;
}

static void enqueue_send(braid_shm_comm_t *comm, braid_shm_op_t *op)
{
    braid_shm_out_t *out = &comm->out[op->peer];

    op->next = NULL;
    if (out->tail == NULL) {
        out->head = op;
        comm->nsending++;
    } else {
        out->tail->next = op;
    }
    out->tail = op;
}

braid_status_t braid_shm_isend(void *tcomm, int peer, uint64_t tag,
                               const void *buf, size_t len, braid_treq_t *req)
{
    braid_shm_comm_t *comm = tcomm;
    braid_shm_op_t    tmp, *op;
    braid_status_t    st;

    req->handle = NULL;
    req->active = 0;
    if ((st = check_args(comm, peer, tag, buf, len, "send to")) != BRAID_OK) {
        return st;
    }
    memset(&tmp, 0, sizeof(tmp));
    tmp.kind = BRAID_SHM_OP_SEND;
    tmp.peer = peer;
    tmp.tag  = tag;
    tmp.len  = len;
    tmp.sbuf = buf;
    /* A message of one cell goes in whole or not at all, so it may try
     * before it has an op; a longer one gets its op first, so that running
     * out of memory can never leave half a message in the ring. */
    if (len <= BRAID_SHM_CELL_PAYLOAD && comm->out[peer].head == NULL) {
        if (braid_shm_ring_push(comm->svc, &comm->out[peer], &tmp) != 0) {
            braid_shm_wake(comm, peer);
            return BRAID_OK;
        }
    }
    op = braid_shm_op_get(comm);
    if (op == NULL) {
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "shm: rank %d: out of "
                                "memory queueing a send of %zu bytes to rank "
                                "%d",
                                comm->rank, len, peer);
    }
    *op = tmp;
    if (comm->out[peer].head == NULL) { /* else it must queue behind */
        if (braid_shm_ring_push(comm->svc, &comm->out[peer], op) != 0) {
            braid_shm_wake(comm, peer);
        }
        if (op->complete) {
            braid_shm_op_put(comm, op);
            return BRAID_OK;
        }
    }
    enqueue_send(comm, op);
    req->handle = op;
    req->active = 1;
    return BRAID_OK;
}

braid_status_t braid_shm_irecv(void *tcomm, int peer, uint64_t tag, void *buf,
                               size_t len, braid_treq_t *req)
{
    braid_shm_comm_t *comm = tcomm;
    braid_shm_op_t   *op;
    braid_status_t    st;

    req->handle = NULL;
    req->active = 0;
    if ((st = check_args(comm, peer, tag, buf, len, "receive from")) !=
        BRAID_OK) {
        return st;
    }
    op = braid_shm_op_get(comm);
    if (op == NULL) {
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "shm: rank %d: out of "
                                "memory posting a receive from rank %d",
                                comm->rank, peer);
    }
    op->kind = BRAID_SHM_OP_RECV;
    op->peer = peer;
    op->tag  = tag;
    op->len  = len;
    op->rbuf = buf;
    /* Posted before looking at the ring, so that a message already there
     * lands in buf directly instead of going through the unexpected queue. */
    if (!braid_shm_recv_post(comm, op)) {
        if (braid_shm_drain(comm, peer, 1) != 0) {
            braid_shm_wake(comm, peer); /* its ring has room again */
        }
    }
    req->handle = op;
    req->active = 1;
    if (op->complete) {
        return braid_shm_test(comm, req);
    }
    return BRAID_OK;
}

size_t braid_shm_poll(braid_shm_comm_t *comm)
{
    size_t moved = 0;
    /* A peer with a receive waiting for it (or a message half taken) has
     * its ring read on every poll.  The others only every UNEXPECTED_POLLS
     * polls: their messages are unexpected, and taking them early only lets
     * a sender's isend complete before its receive is posted (which it must,
     * eventually: a sender may wait for that before posting its own
     * receive).  Reading each peer's ring head is a line shared with that
     * peer, and on a host with more ranks than cores those misses were a
     * good part of a flag-polling wait's cost.
     * With no send or receive in flight at all (a one-sided algorithm
     * polling its flags), no peer needs a look before the next full one; a
     * message half taken as unexpected then continues at that one. */
    int all = (++comm->poll_calls & (UNEXPECTED_POLLS - 1)) == 0;

    if (!all && comm->live_ops == 0) {
        return 0;
    }

    for (int p = 0; p < comm->size; p++) {
        if (!all && comm->in[p].posted_head == NULL && !comm->in[p].busy)
            continue;
        size_t n = braid_shm_drain(comm, p, !all);
        if (n != 0) {
            braid_shm_wake(comm, p);
            moved += n;
        }
    }
    for (int p = 0; p < comm->size && comm->nsending > 0; p++) {
        braid_shm_out_t *out = &comm->out[p];
        size_t           n   = 0;

        while (out->head != NULL) {
            braid_shm_op_t *op = out->head;
            n += braid_shm_ring_push(comm->svc, out, op);
            if (!op->complete) {
                break; /* ring full */
            }
            out->head = op->next;
            op->next  = NULL;
            if (out->head == NULL) {
                out->tail = NULL;
                comm->nsending--;
            }
            if (op->own != NULL) {
                braid_shm_op_put(comm, op); /* cancelled: nobody tests it */
            }
        }
        if (n != 0) {
            braid_shm_wake(comm, p);
            moved += n;
        }
    }
    return moved;
}

static braid_status_t op_done(braid_shm_comm_t *comm, braid_treq_t *req,
                              braid_shm_op_t *op)
{
    braid_status_t st = op->status;

    if (st == BRAID_ERR_MISMATCH && op->msg_tag != op->tag) {
        st = comm->svc->error(st,
                              "shm: rank %d: rank %d sent tag %#llx "
                              "where this receive has %#llx: the same call "
                              "number and step with another signature (the "
                              "ranks called different collectives, counts, "
                              "dtypes, ops or roots)",
                              comm->rank, op->peer,
                              (unsigned long long)op->msg_tag,
                              (unsigned long long)op->tag);
    } else if (st == BRAID_ERR_MISMATCH) {
        st = comm->svc->error(st,
                              "shm: rank %d: rank %d sent %zu bytes with "
                              "tag %#llx, the receive expected %zu (do the "
                              "ranks agree on the call?)",
                              comm->rank, op->peer, op->msg_len,
                              (unsigned long long)op->tag, op->len);
    }
    braid_shm_op_put(comm, op);
    req->handle = NULL;
    req->active = 0;
    return st;
}

braid_status_t braid_shm_test(void *tcomm, braid_treq_t *req)
{
    braid_shm_comm_t *comm = tcomm;
    braid_shm_op_t   *op   = req->handle;
    braid_status_t    st;

    if (!req->active) {
        return BRAID_OK;
    }
    if (op == NULL) {
        req->active = 0;
        return BRAID_OK;
    }
    if (op->complete) {
        return op_done(comm, req, op);
    }
    braid_shm_poll(comm);
    if (op->complete) {
        return op_done(comm, req, op);
    }
    /* A dead peer never completes the op: look now and then.  The op stays
     * posted until the caller's cancel (or comm_destroy) takes it back.  A
     * slow live peer is the core's timeout to judge, not this one's. */
    if (++op->polls >= SLOW_CHECK_POLLS) {
        op->polls = 0;
        if ((st = braid_shm_live_check(comm)) != BRAID_OK) {
            return st;
        }
    }
    return BRAID_INPROGRESS;
}

braid_status_t braid_shm_progress(void *tcomm)
{
    braid_shm_comm_t *comm = tcomm;

    braid_shm_poll(comm);
    /* Whoever polls flags instead of requests learns of a dead peer here. */
    if ((++comm->progress_calls & (SLOW_CHECK_POLLS * 16 - 1)) == 0) {
        return braid_shm_live_check(comm);
    }
    return comm->lost_peer >= 0 ? braid_shm_live_check(comm) : BRAID_OK;
}
