/* Withdrawing operations of the ucx transport (the ABI's cancel, and what
 * teardown finds still pending).
 *
 * UCX 1.13 can cancel only a tagged receive that has not matched a message
 * yet (ucp_request_cancel does nothing to anything else).  A matched
 * receive, a send or a put completes only when its data has moved or its
 * endpoint failed -- and a peer that is alive but no longer progressing
 * (it is tearing down after the same failure) may never let it.  So a
 * request that does not finish within a short grace period gets its peer's
 * endpoint closed by force: UCX then fails every request tracked on that
 * endpoint, receives matched to its messages included, and from then on
 * never touches their buffers.  Cancel is only ever needed on a
 * communicator that is failing, so losing the endpoint costs nothing. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "tl_ucx.h"

/* The ucp request behind an op. */
static void *op_request(braid_ucx_op_t *op)
{
    return op->kind == BRAID_UCX_OP_PUT ? ((braid_ucx_put_t *)op)->req : op;
}

/* Progresses until req completes or the deadline passes; frees nothing. */
static ucs_status_t poll_until(braid_ucx_comm_t *comm, void *req,
                               double deadline)
{
    ucs_status_t st;

    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS &&
           comm->svc->now() <= deadline) {
        if (ucp_worker_progress(comm->worker) == 0) {
            sched_yield(); /* peers may share our cores */
        }
    }
    return st;
}

void braid_ucx_peer_force_close(braid_ucx_comm_t *comm, int p, const char *why)
{
    braid_ucx_peer_t   *peer = &comm->peers[p];
    ucp_request_param_t param;
    ucs_status_ptr_t    req;

    comm->broken = 1;
    /* Forcing needs peer-failure handling on the endpoint (ucp.h). */
    if (peer->ep == NULL || !peer->err_peer) {
        return;
    }
    comm->svc->log(BRAID_LOG_DEBUG, BRAID_UCX_COMPONENT,
                   "rank %d: closing "
                   "the endpoint to rank %d by force: %s",
                   comm->rank, p, why);
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
    req                = ucp_ep_close_nbx(peer->ep, &param);
    peer->ep           = NULL;
    if (peer->status == UCS_OK) {
        peer->status = UCS_ERR_CANCELED; /* later operations refuse */
    }
    if (UCS_PTR_IS_PTR(req)) {
        (void)braid_ucx_wait_ucp(
            comm, req, braid_ucx_deadline(comm, BRAID_UCX_FAILED_CLOSE_S));
    }
}

void braid_ucx_op_retire(braid_ucx_comm_t *comm, braid_ucx_op_t *op)
{
    void          *req  = op_request(op);
    double         t0   = comm->svc->now();
    braid_ucx_op_t copy = *op; /* op may live inside req */
    ucs_status_t   st;

    comm->broken = 1;
    if (op->kind == BRAID_UCX_OP_RECV) {
        ucp_request_cancel(comm->worker, req);
    }
    st = poll_until(comm, req,
                    braid_ucx_deadline(comm, BRAID_UCX_CANCEL_GRACE_S));
    if (st == UCS_INPROGRESS) {
        braid_ucx_peer_force_close(comm, op->peer,
                                   "cancelling a request "
                                   "that does not finish");
        st = poll_until(comm, req, t0 + comm->svc->timeout_s());
    }
    if (st == UCS_INPROGRESS) {
        /* Nothing left to try: UCX releases the request when it ends. */
        comm->svc->log(BRAID_LOG_ERROR, BRAID_UCX_COMPONENT,
                       "rank %d: a "
                       "cancelled %s rank %d (%zu bytes) is still in progress "
                       "after %.1f s; UCX may still use its buffer",
                       comm->rank,
                       copy.kind == BRAID_UCX_OP_SEND   ? "send to"
                       : copy.kind == BRAID_UCX_OP_RECV ? "receive from"
                                                        : "put_signal to",
                       copy.peer, copy.len, comm->svc->now() - t0);
    }
    /* Unlinked before the request goes back to UCX, which reuses it. */
    braid_ucx_op_unlink(op);
    ucp_request_free(req);
    if (copy.kind == BRAID_UCX_OP_PUT) {
        free(op);
    }
}

void braid_ucx_cancel(void *tcomm, braid_treq_t *req)
{
    braid_ucx_comm_t *comm = tcomm;
    braid_ucx_op_t   *op   = req->handle;

    if (!req->active) {
        return;
    }
    req->active = 0;
    req->handle = NULL;
    if (op != NULL) { /* NULL: it completed when posted */
        braid_ucx_op_retire(comm, op);
    }
}
