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
 * would then deadlock.  But only the periodic sweep over every peer does
 * that (p2p.c): a drain on behalf of a posted receive leaves a message that
 * no receive wants yet in the ring, since a pipelined algorithm posts that
 * receive a moment later and a buffer allocated per message costs page
 * faults, a second copy and heap trimming on every call. */
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

/* Gives u a buffer of at least len bytes: the smallest spare that holds
 * it, else a new one.  0 when out of memory. */
static int uxm_data(braid_shm_in_t *in, braid_shm_uxm_t *u, size_t len)
{
    int best = -1;

    for (int i = 0; i < in->nspare; i++)
        if (in->spare_cap[i] >= len &&
            (best < 0 || in->spare_cap[i] < in->spare_cap[best]))
            best = i;
    if (best < 0) {
        u->data = malloc(len);
        u->cap  = len;
        return u->data != NULL;
    }
    u->data = in->spare[best];
    u->cap  = in->spare_cap[best];
    in->spare_bytes -= u->cap;
    in->nspare--;
    in->spare[best]     = in->spare[in->nspare];
    in->spare_cap[best] = in->spare_cap[in->nspare];
    return 1;
}

/* Sets the destination of the message whose first cell this is.  Returns 0
 * when no posted receive wants it and keep_unmatched is set, or when no
 * memory was left to buffer it: the cell stays in the ring and is retried
 * by a later poll (the sender just sees a full ring). */
static int start_message(braid_shm_comm_t *comm, braid_shm_in_t *in,
                         const braid_shm_cell_t *cell, int keep_unmatched)
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
    if (keep_unmatched)
        return 0;
    u = calloc(1, sizeof(*u));
    if (u != NULL && cell->msg_len != 0 && !uxm_data(in, u, cell->msg_len)) {
        free(u);
        u = NULL;
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

static void take_cell(const braid_services_t *svc, braid_shm_in_t *in,
                      const braid_shm_cell_t *cell)
{
    size_t len = cell->len;

    if (len > in->len - in->got) {
        len = in->len - in->got; /* never past the buffer, whatever arrives */
    }
    if (in->op != NULL && len != 0) {
        svc->copy(in->op->rbuf + in->got, cell->payload, len, 0);
    } else if (in->uxm != NULL && len != 0) {
        svc->copy(in->uxm->data + in->got, cell->payload, len, 0);
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

size_t braid_shm_drain(braid_shm_comm_t *comm, int peer, int keep_unmatched)
{
    braid_shm_in_t   *in = &comm->in[peer];
    braid_shm_cell_t *cell;
    size_t            n = 0;

    while ((cell = braid_shm_ring_peek(in)) != NULL) {
        if (!in->busy && !start_message(comm, in, cell, keep_unmatched)) {
            break;
        }
        take_cell(comm->svc, in, cell);
        braid_shm_ring_pop(in);
        n++;
    }
    return n;
}

/* Frees an unexpected entry and keeps its buffer as a spare while the
 * spares stay within their bounds. */
static void uxm_free(braid_shm_in_t *in, braid_shm_uxm_t *u)
{
    if (u->data != NULL && u->cap <= BRAID_SHM_SPARE_MAX &&
        in->nspare < BRAID_SHM_SPARES &&
        in->spare_bytes + u->cap <= BRAID_SHM_SPARE_BYTES) {
        in->spare[in->nspare]     = u->data;
        in->spare_cap[in->nspare] = u->cap;
        in->spare_bytes += u->cap;
        in->nspare++;
    } else {
        free(u->data);
    }
    free(u);
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
    uxm_free(in, u);
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
        for (int i = 0; i < in->nspare; i++)
            free(in->spare[i]);
        in->nspare      = 0;
        in->spare_bytes = 0;
        in->uxm_tail    = NULL;
        in->uxm         = NULL;
        in->op          = NULL;
        in->posted_head = in->posted_tail = NULL;
    }
}
