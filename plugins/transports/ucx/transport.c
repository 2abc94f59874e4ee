/* The "ucx" transport: tagged send/receive, request tests and progress.
 * Communicators (worker, endpoints) live in comm.c, one-sided operations in
 * rma.c. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "tl_ucx.h"

/* ------------------------------------------------------------- helpers */

braid_status_t braid_ucx_status(ucs_status_t st)
{
    switch (st) {
    case UCS_OK: return BRAID_OK;
    case UCS_INPROGRESS: return BRAID_INPROGRESS;
    case UCS_ERR_NO_MEMORY: return BRAID_ERR_NO_MEMORY;
    case UCS_ERR_TIMED_OUT: return BRAID_ERR_TIMEOUT;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CONNECTION_RESET: return BRAID_ERR_PEER;
    default:
        if (st <= UCS_ERR_FIRST_ENDPOINT_FAILURE &&
            st >= UCS_ERR_LAST_ENDPOINT_FAILURE) {
            return BRAID_ERR_PEER;
        }
        return BRAID_ERR_TRANSPORT;
    }
}

static uint64_t ucx_tag(int sender, uint64_t tag)
{
    return ((uint64_t)sender << BRAID_TAG_BITS) | tag;
}

void braid_ucx_op_link(braid_ucx_comm_t *comm, braid_ucx_op_t *op,
                       braid_ucx_op_kind_t kind, int peer, uint64_t tag,
                       size_t len)
{
    op->kind                 = kind;
    op->peer                 = peer;
    op->tag                  = tag;
    op->len                  = len;
    op->prev                 = &comm->pending;
    op->next                 = comm->pending.next;
    comm->pending.next->prev = op;
    comm->pending.next       = op;
}

void braid_ucx_op_unlink(braid_ucx_op_t *op)
{
    op->prev->next = op->next;
    op->next->prev = op->prev;
    op->prev = op->next = op;
}

ucs_status_t braid_ucx_wait_ucp(braid_ucx_comm_t *comm, void *req,
                                double deadline)
{
    ucs_status_t st;

    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        if (comm->svc->now() > deadline) {
            st = UCS_ERR_TIMED_OUT;
            break;
        }
        if (ucp_worker_progress(comm->worker) == 0) {
            sched_yield(); /* peers may share our cores */
        }
    }
    ucp_request_free(req); /* an unfinished one is released on completion */
    return st;
}

ucs_status_t braid_ucx_flush(braid_ucx_comm_t *comm, double deadline)
{
    ucp_request_param_t param;
    ucs_status_ptr_t    req;

    memset(&param, 0, sizeof(param));
    req = ucp_worker_flush_nbx(comm->worker, &param);
    if (req == NULL) {
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(req)) {
        return UCS_PTR_STATUS(req);
    }
    return braid_ucx_wait_ucp(comm, req, deadline);
}

double braid_ucx_deadline(const braid_ucx_comm_t *comm, double s)
{
    double t = comm->svc->timeout_s();

    return comm->svc->now() + (s < t ? s : t);
}

static const char *op_verb(const braid_ucx_op_t *op)
{
    switch (op->kind) {
    case BRAID_UCX_OP_SEND: return "send to";
    case BRAID_UCX_OP_RECV: return "receive from";
    default: return "put_signal to";
    }
}

static braid_status_t op_error(braid_ucx_comm_t     *comm,
                               const braid_ucx_op_t *op, ucs_status_t st)
{
    if (op->kind == BRAID_UCX_OP_PUT) { /* tag holds the flag offset */
        return comm->svc->error(braid_ucx_status(st),
                                "ucx: rank %d: put_signal to rank %d (%zu "
                                "bytes, flag at offset %llu) failed: %s",
                                comm->rank, op->peer, op->len,
                                (unsigned long long)op->tag,
                                ucs_status_string(st));
    }
    return comm->svc->error(braid_ucx_status(st),
                            "ucx: rank %d: %s rank %d (%zu bytes, tag %#llx) "
                            "failed: %s",
                            comm->rank, op_verb(op), op->peer, op->len,
                            (unsigned long long)op->tag,
                            ucs_status_string(st));
}

static braid_status_t check_peer(braid_ucx_comm_t *comm, int peer,
                                 const char *what)
{
    if (peer < 0 || peer >= comm->size) {
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "ucx: %s rank %d, but the communicator has %d "
                                "ranks",
                                what, peer, comm->size);
    }
    if (comm->peers[peer].status != UCS_OK) {
        return comm->svc->error(
            BRAID_ERR_PEER,
            "ucx: rank %d: cannot %s rank %d: its endpoint "
            "failed earlier: %s",
            comm->rank, what, peer,
            ucs_status_string(comm->peers[peer].status));
    }
    return BRAID_OK;
}

static braid_status_t check_tag(braid_ucx_comm_t *comm, uint64_t tag)
{
    if (tag & ~BRAID_UCX_TAG_MASK) {
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "ucx: tag %#llx uses more than the %d bits "
                                "BRAID_TAG_BITS allows",
                                (unsigned long long)tag, BRAID_TAG_BITS);
    }
    return BRAID_OK;
}

/* Turns what ucp returned for a tag operation into the caller's request. */
static braid_status_t track(braid_treq_t *req, braid_ucx_comm_t *comm,
                            ucs_status_ptr_t sp, braid_ucx_op_kind_t kind,
                            int peer, uint64_t tag, size_t len)
{
    braid_ucx_op_t *op;

    req->handle = NULL;
    if (sp == NULL) { /* completed immediately: test reports it */
        req->active = 1;
        return BRAID_OK;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        braid_ucx_op_t tmp = {
            .kind = kind, .peer = peer, .tag = tag, .len = len};
        req->active = 0;
        return op_error(comm, &tmp, UCS_PTR_STATUS(sp));
    }
    op = sp;
    braid_ucx_op_link(comm, op, kind, peer, tag, len);
    req->handle = op;
    req->active = 1;
    return BRAID_OK;
}

static braid_status_t ucx_isend(void *tcomm, int peer, uint64_t tag,
                                const void *buf, size_t len, braid_treq_t *req)
{
    braid_ucx_comm_t   *comm = tcomm;
    ucp_request_param_t param;
    ucs_status_ptr_t    sp;
    braid_status_t      st;

    req->handle = NULL;
    req->active = 0;
    if ((st = check_peer(comm, peer, "send to")) != BRAID_OK ||
        (st = check_tag(comm, tag)) != BRAID_OK) {
        return st;
    }
    memset(&param, 0, sizeof(param));
    sp = ucp_tag_send_nbx(comm->peers[peer].ep, buf, len,
                          ucx_tag(comm->rank, tag), &param);
    return track(req, comm, sp, BRAID_UCX_OP_SEND, peer, tag, len);
}

/* What arrived for a completed receive: the tag the sender sent (its check
 * bits may differ) and its length. */
static braid_status_t check_arrival(braid_ucx_comm_t *comm, int peer,
                                    uint64_t tag, size_t want,
                                    const ucp_tag_recv_info_t *info)
{
    uint64_t sent = info->sender_tag & BRAID_UCX_TAG_MASK;
    size_t   got  = info->length;

    if (sent != tag) {
        return comm->svc->error(
            BRAID_ERR_MISMATCH,
            "ucx: rank %d: rank %d sent tag %#llx where "
            "this receive has %#llx: the same call number "
            "and step with another signature (the ranks "
            "called different collectives, counts, dtypes, "
            "ops or roots)",
            comm->rank, peer, (unsigned long long)sent,
            (unsigned long long)tag);
    }
    if (got == want) {
        return BRAID_OK;
    }
    return comm->svc->error(BRAID_ERR_MISMATCH,
                            "ucx: rank %d: rank %d sent %zu bytes with tag "
                            "%#llx, the receive expected %zu (do the ranks "
                            "agree on the call?)",
                            comm->rank, peer, got, (unsigned long long)tag,
                            want);
}

static braid_status_t ucx_irecv(void *tcomm, int peer, uint64_t tag, void *buf,
                                size_t len, braid_treq_t *req)
{
    braid_ucx_comm_t   *comm = tcomm;
    ucp_request_param_t param;
    ucs_status_ptr_t    sp;
    braid_status_t      st;

    req->handle = NULL;
    req->active = 0;
    if ((st = check_peer(comm, peer, "receive from")) != BRAID_OK ||
        (st = check_tag(comm, tag)) != BRAID_OK) {
        return st;
    }
    /* Always a request, even when the message is already here: UCX 1.13
     * does not fill recv_info on immediate completion (despite ucp.h), and
     * the request is the only way to learn the length that arrived. */
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    sp = ucp_tag_recv_nbx(comm->worker, buf, len, ucx_tag(peer, tag),
                          BRAID_UCX_RECV_MASK, &param);
    return track(req, comm, sp, BRAID_UCX_OP_RECV, peer, tag, len);
}

static braid_status_t ucx_test(void *tcomm, braid_treq_t *req)
{
    braid_ucx_comm_t   *comm = tcomm;
    braid_ucx_op_t     *op   = req->handle;
    ucp_tag_recv_info_t info = {0};
    ucs_status_t        st;

    if (!req->active) {
        return BRAID_OK;
    }
    ucp_worker_progress(comm->worker);
    if (op == NULL) {
        req->active = 0;
        return BRAID_OK;
    }
    switch (op->kind) {
    case BRAID_UCX_OP_RECV: st = ucp_tag_recv_request_test(op, &info); break;
    case BRAID_UCX_OP_PUT:
        st = ucp_request_check_status(((braid_ucx_put_t *)op)->req);
        break;
    default: st = ucp_request_check_status(op); break;
    }

    if (st == UCS_INPROGRESS) {
        /* A receive is not tied to an endpoint, so a dead sender never
         * completes it: look at the sender's endpoint instead.  The request
         * stays active for the caller's cancel. */
        if (comm->peers[op->peer].status != UCS_OK) {
            comm->broken = 1;
            return op_error(comm, op, comm->peers[op->peer].status);
        }
        return BRAID_INPROGRESS; /* a slow peer: the core's timeout judges */
    }

    braid_ucx_op_unlink(op);
    req->handle = NULL;
    req->active = 0;
    if (st != UCS_OK) {
        comm->broken = 1;
    }
    if (op->kind == BRAID_UCX_OP_PUT) {
        braid_ucx_put_t *put  = (braid_ucx_put_t *)op;
        braid_ucx_op_t   copy = *op;
        ucp_request_free(put->req);
        free(put);
        return st == UCS_OK ? BRAID_OK : op_error(comm, &copy, st);
    }
    {
        braid_ucx_op_t copy = *op; /* op lives in the request */
        ucp_request_free(op);
        if (st == UCS_ERR_MESSAGE_TRUNCATED &&
            copy.kind == BRAID_UCX_OP_RECV) {
            return comm->svc->error(BRAID_ERR_MISMATCH,
                                    "ucx: rank %d: rank %d sent more than the "
                                    "%zu bytes the receive with tag %#llx "
                                    "expected (do the ranks agree on the "
                                    "call?)",
                                    comm->rank, copy.peer, copy.len,
                                    (unsigned long long)copy.tag);
        }
        if (st != UCS_OK) {
            return op_error(comm, &copy, st);
        }
        if (copy.kind == BRAID_UCX_OP_RECV) {
            return check_arrival(comm, copy.peer, copy.tag, copy.len, &info);
        }
    }
    return BRAID_OK;
}

static braid_status_t ucx_progress(void *tcomm)
{
    braid_ucx_comm_t *comm = tcomm;

    int p;

    ucp_worker_progress(comm->worker);
    /* Whoever polls flags instead of requests learns of a dead peer here. */
    p = comm->failed_peer;
    if (p >= 0) {
        comm->broken = 1;
        return comm->svc->error(
            BRAID_ERR_PEER, "ucx: rank %d: endpoint to rank %d failed: %s",
            comm->rank, p, ucs_status_string(comm->peers[p].status));
    }
    return BRAID_OK;
}

const braid_transport_t braid_ucx_transport = {
    .struct_size  = sizeof(braid_transport_t),
    .name         = "ucx",
    .caps         = BRAID_CAP_SENDRECV | BRAID_CAP_PUT_SIGNAL,
    .mem_types    = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .comm_create  = braid_ucx_comm_create,
    .comm_destroy = braid_ucx_comm_destroy,
    .link         = braid_ucx_link,
    .isend        = ucx_isend,
    .irecv        = ucx_irecv,
    .test         = ucx_test,
    .progress     = ucx_progress,
    .cancel       = braid_ucx_cancel,
    .mem_alloc    = braid_ucx_mem_alloc,
    .mem_free     = braid_ucx_mem_free,
    .put_signal   = braid_ucx_put_signal,
};
