/* The receiving side: cells to receives, by (peer, tag).
 *
 * Messages of one sender arrive in order, so matching is per peer: a new
 * message takes the oldest posted receive with its tag's match bits
 * (BRAID_TAG_MATCH_MASK), else it is copied into an unexpected entry; a new
 * receive takes the oldest unexpected message with its match bits, else it
 * is posted.  Both lists are FIFO, which keeps messages with the same
 * (peer, match bits) in the order they were sent.  A matched pair whose
 * other tag bits (the check bits: the calls' signatures) or lengths differ
 * completes the receive with BRAID_ERR_MISMATCH and drops the message.
 *
 * Unexpected messages are buffered in full (malloc) rather than left in the
 * ring: an algorithm may wait for a later message of the same peer before it
 * posts the receive of an earlier one, and a ring blocked by the earlier one
 * would then deadlock. */
#include <stdlib.h>
#include <string.h>

#include "shm.h"

static int tags_match(uint64_t a, uint64_t b)
{
    return ((a ^ b) & BRAID_TAG_MATCH_MASK) == 0;
}

static braid_shm_op_t *take_posted(braid_shm_in_t *in, uint64_t tag)
{
    braid_shm_op_t *prev = NULL;

    for (braid_shm_op_t *op = in->posted_head; op != NULL; op = op->next) {
        if (tags_match(op->tag, tag)) {
            if (prev == NULL) {
                in->posted_head = op->next;
            } else {
                prev->next = op->next;
            }
            if (in->posted_tail == op) {
                in->posted_tail = prev;
            }
            op->next = NULL;
            return op;
        }
        prev = op;
    }
    return NULL;
}

static braid_shm_uxm_t *take_unexpected(braid_shm_in_t *in, uint64_t tag)
{
    braid_shm_uxm_t *prev = NULL;

    for (braid_shm_uxm_t *u = in->uxm_head; u != NULL; u = u->next) {
        if (tags_match(u->tag, tag)) {
            if (prev == NULL) {
                in->uxm_head = u->next;
            } else {
                prev->next = u->next;
            }
            if (in->uxm_tail == u) {
                in->uxm_tail = prev;
            }
            u->next = NULL;
            return u;
        }
        prev = u;
    }
    return NULL;
}

static void complete(braid_shm_op_t *op, braid_status_t status)
{
    op->status   = status;
    op->complete = 1;
}

/* Sets the destination of the message whose first cell this is.  Returns 0
 * when no memory was left to buffer it: the cell stays in the ring and is
 * retried by the next poll (the sender just sees a full ring). */
static int start_message(braid_shm_comm_t *comm, braid_shm_in_t *in,
                         const braid_shm_cell_t *cell)
{
    braid_shm_op_t  *op = take_posted(in, cell->tag);
    braid_shm_uxm_t *u;

    in->got = 0;
    in->len = cell->msg_len;
    in->op  = NULL;
    in->uxm = NULL;
    if (op != NULL) {
        op->msg_len = cell->msg_len;
        op->msg_tag = cell->tag;
        if (op->len == cell->msg_len && op->tag == cell->tag) {
            in->op = op;
        } else {
            complete(op, BRAID_ERR_MISMATCH); /* the rest is discarded */
        }
        in->busy = 1;
        return 1;
    }
    u = calloc(1, sizeof(*u));
    if (u != NULL && cell->msg_len != 0) {
        u->data = malloc(cell->msg_len);
        if (u->data == NULL) {
            free(u);
            u = NULL;
        }
    }
    if (u == NULL) {
        comm->svc->log(BRAID_LOG_WARN, BRAID_SHM_COMPONENT,
                       "rank %d: no memory "
                       "to buffer an unexpected message of %llu bytes; will "
                       "retry",
                       comm->rank, (unsigned long long)cell->msg_len);
        return 0;
    }
    u->tag = cell->tag;
    u->len = cell->msg_len;
    if (in->uxm_tail == NULL) {
        in->uxm_head = u;
    } else {
        in->uxm_tail->next = u;
    }
    in->uxm_tail = u;
    in->uxm      = u;
    in->busy     = 1;
    return 1;
}

static void take_cell(braid_shm_in_t *in, const braid_shm_cell_t *cell)
{
    size_t len = cell->len;

    if (len > in->len - in->got) {
        len = in->len - in->got; /* never past the buffer, whatever arrives */
    }
    if (in->op != NULL && len != 0) {
        memcpy(in->op->rbuf + in->got, cell->payload, len);
    } else if (in->uxm != NULL && len != 0) {
        memcpy(in->uxm->data + in->got, cell->payload, len);
    }
    in->got += len;
    if (in->uxm != NULL) {
        in->uxm->got = in->got;
    }
    if (in->op != NULL) {
        in->op->done = in->got;
    }
    if (in->got == in->len) {
        if (in->op != NULL) {
            complete(in->op, BRAID_OK);
        }
        in->busy = 0;
        in->op   = NULL;
        in->uxm  = NULL;
    }
}

size_t braid_shm_drain(braid_shm_comm_t *comm, int peer)
{
    braid_shm_in_t   *in = &comm->in[peer];
    braid_shm_cell_t *cell;
    size_t            n = 0;

    while ((cell = braid_shm_ring_peek(in)) != NULL) {
        if (!in->busy && !start_message(comm, in, cell)) {
            break;
        }
        take_cell(in, cell);
        braid_shm_ring_pop(in);
        n++;
    }
    return n;
}

int braid_shm_recv_post(braid_shm_comm_t *comm, braid_shm_op_t *op)
{
    braid_shm_in_t  *in = &comm->in[op->peer];
    braid_shm_uxm_t *u  = take_unexpected(in, op->tag);

    if (u == NULL) {
        op->next = NULL;
        if (in->posted_tail == NULL) {
            in->posted_head = op;
        } else {
            in->posted_tail->next = op;
        }
        in->posted_tail = op;
        return 0;
    }
    op->msg_len = u->len;
    op->msg_tag = u->tag;
    if (u->len != op->len || u->tag != op->tag) {
        complete(op, BRAID_ERR_MISMATCH);
        if (in->uxm == u) {
            in->uxm = NULL; /* still arriving: discard the rest */
        }
    } else {
        if (u->got != 0) {
            memcpy(op->rbuf, u->data, u->got);
        }
        op->done = u->got;
        if (u->got == u->len) {
            complete(op, BRAID_OK);
        } else {
            in->op  = op; /* the rest goes straight to the receive buffer */
            in->uxm = NULL;
        }
    }
    free(u->data);
    free(u);
    return op->complete;
}

void braid_shm_recv_release(braid_shm_comm_t *comm)
{
    if (comm->in == NULL) {
        return;
    }
    for (int p = 0; p < comm->size; p++) {
        braid_shm_in_t *in = &comm->in[p];
        while (in->uxm_head != NULL) {
            braid_shm_uxm_t *u = in->uxm_head;
            in->uxm_head       = u->next;
            free(u->data);
            free(u);
        }
        in->uxm_tail    = NULL;
        in->uxm         = NULL;
        in->op          = NULL;
        in->posted_head = in->posted_tail = NULL;
    }
}
