/* Withdrawing send and receive requests (the ABI's cancel).
 *
 * Nothing here waits: every pending op is transport state this rank alone
 * owns, so it can always be taken back at once.
 *   - A receive still posted is unlinked; one that a message is halfway
 *     into is detached, and the rest of that message is discarded as it
 *     arrives (match.c takes cells with no destination).
 *   - A send not started is unlinked from its peer's queue.  One whose
 *     first cells are already in the ring cannot be: the receiver would take
 *     the next message's cells for its rest.  Its remaining bytes are copied
 *     into memory of its own instead, so the message still ends whole
 *     without reading the caller's buffer again; the op then belongs to the
 *     transport (p2p.c frees it once pushed, comm_destroy if never).
 *   - put_signal completes inside the call: nothing is ever pending. */
#include <stdlib.h>
#include <string.h>

#include "shm.h"

static void unlink_posted(braid_shm_in_t *in, braid_shm_op_t *op)
{
    braid_shm_op_t *prev = NULL;

    for (braid_shm_op_t *o = in->posted_head; o != NULL; o = o->next) {
        if (o == op) {
            if (prev == NULL) {
                in->posted_head = o->next;
            } else {
                prev->next = o->next;
            }
            if (in->posted_tail == o) {
                in->posted_tail = prev;
            }
            o->next = NULL;
            return;
        }
        prev = o;
    }
}

static void cancel_recv(braid_shm_comm_t *comm, braid_shm_op_t *op)
{
    braid_shm_in_t *in = &comm->in[op->peer];

    if (in->op == op) {
        in->op = NULL; /* the message's remaining cells are dropped */
    } else {
        unlink_posted(in, op);
    }
    braid_shm_op_put(comm, op);
}

static void unlink_send(braid_shm_comm_t *comm, braid_shm_op_t *op)
{
    braid_shm_out_t *out  = &comm->out[op->peer];
    braid_shm_op_t  *prev = NULL;

    for (braid_shm_op_t *o = out->head; o != NULL; o = o->next) {
        if (o == op) {
            if (prev == NULL) {
                out->head = o->next;
            } else {
                prev->next = o->next;
            }
            if (out->tail == o) {
                out->tail = prev;
            }
            if (out->head == NULL) {
                comm->nsending--;
            }
            o->next = NULL;
            return;
        }
        prev = o;
    }
}

static void cancel_send(braid_shm_comm_t *comm, braid_shm_op_t *op)
{
    if (op->done == 0) {
        unlink_send(comm, op);
        braid_shm_op_put(comm, op);
        return;
    }
    /* Only the head of the queue is ever partly pushed. */
    op->own = malloc(op->len);
    if (op->own == NULL) {
        /* Dropped cut short: the receiver of this ring is lost in it, but
         * the communicator is failing (nothing else cancels) and sends no
         * more.  The caller's buffer is safe either way. */
        comm->svc->log(BRAID_LOG_ERROR, BRAID_SHM_COMPONENT,
                       "rank %d: out of "
                       "memory finishing a cancelled send to rank %d; the "
                       "ring to it is out of step",
                       comm->rank, op->peer);
        unlink_send(comm, op);
        braid_shm_op_put(comm, op);
        return;
    }
    memcpy(op->own + op->done, op->sbuf + op->done, op->len - op->done);
    op->sbuf = op->own;
}

void braid_shm_cancel(void *tcomm, braid_treq_t *req)
{
    braid_shm_comm_t *comm = tcomm;
    braid_shm_op_t   *op   = req->handle;

    if (!req->active) {
        return;
    }
    req->active = 0;
    req->handle = NULL;
    if (op == NULL) {
        return; /* it completed when posted */
    }
    if (op->complete) { /* done, just not tested yet */
        braid_shm_op_put(comm, op);
    } else if (op->kind == BRAID_SHM_OP_RECV) {
        cancel_recv(comm, op);
    } else {
        cancel_send(comm, op);
    }
}
