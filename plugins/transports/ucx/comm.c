/* Communicators of the ucx transport: a ucp worker each, endpoints to every
 * rank, and their orderly (bounded) teardown. */
#include <stdlib.h>
#include <string.h>

#include "tl_ucx.h"

/* ------------------------------------------------------------- endpoints */

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    braid_ucx_peer_t *peer = arg;

    (void)ep;
    if (peer->status == UCS_OK) {
        peer->status = status;
    }
    if (peer->comm->failed_peer < 0) {
        peer->comm->failed_peer = peer->rank;
    }
    /* Debug only: peers that finish first make this fire during teardown.
     * A failure that matters is reported by test() with its context. */
    peer->comm->svc->log(BRAID_LOG_DEBUG, BRAID_UCX_COMPONENT,
                         "rank %d: endpoint to rank %d failed: %s",
                         peer->comm->rank, peer->rank,
                         ucs_status_string(status));
}

static ucs_status_t create_ep(braid_ucx_peer_t    *peer,
                              const ucp_address_t *addr, int err_peer)
{
    ucp_ep_params_t params;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.address = addr;
    params.err_mode =
        err_peer ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (err_peer) {
        params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.err_handler.cb  = ep_error_cb;
        params.err_handler.arg = peer;
    }
    peer->err_peer = err_peer;
    return ucp_ep_create(peer->comm->worker, &params, &peer->ep);
}

/* Endpoints ask for peer-failure detection so that a dead peer is an error,
 * not a hang.  UCX 1.13 grants it only over transports that support it (TCP,
 * verbs): with UCX_TLS restricted to shared memory the endpoint is
 * unreachable in that mode, so such a peer falls back to plain endpoints and
 * relies on the timeout alone. */
static braid_status_t connect_peers(braid_ucx_comm_t       *comm,
                                    const braid_ucx_xchg_t *x)
{
    int          err_peer = 1;
    ucs_status_t st;

    comm->peers = calloc((size_t)comm->size, sizeof(*comm->peers));
    if (comm->peers == NULL) {
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "ucx: out of memory for %d endpoints",
                                comm->size);
    }
    for (int p = 0; p < comm->size; p++) {
        braid_ucx_peer_t    *peer = &comm->peers[p];
        const ucp_address_t *addr =
            (const ucp_address_t *)(x->blobs + (size_t)p * x->stride);

        peer->comm   = comm;
        peer->rank   = p;
        peer->status = UCS_OK;
        st           = create_ep(peer, addr, err_peer);
        if (st == UCS_ERR_UNREACHABLE && err_peer) {
            comm->svc->log(BRAID_LOG_WARN, BRAID_UCX_COMPONENT,
                           "rank %d: no UCX transport to rank %d detects peer "
                           "failure (%s); using endpoints without it: a dead "
                           "peer is then reported only by the timeout",
                           comm->rank, p, ucs_status_string(st));
            err_peer = 0;
            st       = create_ep(peer, addr, err_peer);
        }
        if (st != UCS_OK) {
            peer->ep = NULL;
            return comm->svc->error(braid_ucx_status(st),
                                    "ucx: rank %d: cannot create an endpoint "
                                    "to rank %d: %s",
                                    comm->rank, p, ucs_status_string(st));
        }
    }
    return BRAID_OK;
}

/* -------------------------------------------------------------- teardown */

/* Withdraws what algorithms left pending (they cancel in finish, so this is
 * only a safety net): each op is cancelled or its endpoint forced closed. */
static void retire_pending(braid_ucx_comm_t *comm)
{
    while (comm->pending.next != &comm->pending) {
        braid_ucx_op_retire(comm, comm->pending.next);
    }
}

/* Closes every endpoint, bounded.  A healthy communicator flushes them so
 * that our last messages reach the peers; a failed one closes them by
 * force at once, since a flush towards a dead or departing peer could only
 * wait.  Either way the wait is short: the peers need not progress for a
 * close to finish. */
static void close_eps(braid_ucx_comm_t *comm)
{
    double deadline = braid_ucx_deadline(
        comm, comm->broken ? BRAID_UCX_FAILED_CLOSE_S : BRAID_UCX_CLOSE_S);
    ucs_status_ptr_t *reqs = calloc((size_t)comm->size, sizeof(*reqs));

    for (int p = 0; p < comm->size; p++) {
        braid_ucx_peer_t   *peer = &comm->peers[p];
        ucp_request_param_t param;
        ucs_status_ptr_t    req;

        if (peer->ep == NULL) {
            continue;
        }
        memset(&param, 0, sizeof(param));
        if (peer->err_peer && (comm->broken || peer->status != UCS_OK)) {
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
        }
        req      = ucp_ep_close_nbx(peer->ep, &param);
        peer->ep = NULL;
        if (req == NULL || UCS_PTR_IS_ERR(req)) {
            continue;
        }
        if (reqs != NULL) {
            reqs[p] = req;
        } else {
            (void)braid_ucx_wait_ucp(comm, req, deadline);
        }
    }
    if (reqs == NULL) {
        return;
    }
    /* Close all, then wait for all: peers close towards us concurrently.
     * One still closing at the deadline is released by worker destroy. */
    for (int p = 0; p < comm->size; p++) {
        if (reqs[p] != NULL &&
            braid_ucx_wait_ucp(comm, reqs[p], deadline) == UCS_ERR_TIMED_OUT) {
            comm->svc->log(BRAID_LOG_DEBUG, BRAID_UCX_COMPONENT,
                           "rank %d: closing the endpoint to rank %d did not "
                           "finish in time; destroying it",
                           comm->rank, p);
        }
    }
    free(reqs);
}

static void comm_teardown(braid_ucx_comm_t *comm)
{
    if (comm == NULL) {
        return;
    }
    braid_ucx_log_quiet(1);
    if (comm->worker != NULL) {
        if (comm->peers != NULL) {
            retire_pending(comm);
            if (comm->failed_peer >= 0) {
                comm->broken = 1;
            }
            /* Only a healthy communicator has anything worth flushing. */
            if (!comm->broken &&
                braid_ucx_flush(comm,
                                braid_ucx_deadline(comm, BRAID_UCX_CLOSE_S)) !=
                    UCS_OK) {
                comm->broken = 1;
            }
            close_eps(comm);
        }
        ucp_worker_destroy(comm->worker);
    }
    braid_ucx_areas_release(comm);
    if (comm->context != NULL) {
        braid_ucx_context_release();
    }
    braid_ucx_log_quiet(0);
    free(comm->peers);
    free(comm);
}

/* ----------------------------------------------------------- communicator */

static braid_status_t setup_worker(ucp_address_t **addr, size_t *addr_len,
                                   braid_ucx_comm_t *comm)
{
    ucp_worker_params_t params;
    ucs_status_t        st;

    if (braid_ucx_context_acquire(&comm->context, comm->svc, &st) !=
        BRAID_OK) {
        comm->context = NULL;
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "ucx: ucp_init failed: %s",
                                ucs_status_string(st));
    }
    /* The core drives a communicator from one thread at a time, and the
     * test harness from one thread per rank: no locking needed in ucp. */
    memset(&params, 0, sizeof(params));
    params.field_mask  = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(comm->context, &params, &comm->worker);
    if (st != UCS_OK) {
        comm->worker = NULL;
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "ucx: rank %d: ucp_worker_create failed: %s",
                                comm->rank, ucs_status_string(st));
    }
    /* Before the address leaves this rank: no put may find no handler. */
    st = braid_ucx_am_register(comm);
    if (st != UCS_OK) {
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "ucx: rank %d: cannot register the put_signal "
                                "handler: %s",
                                comm->rank, ucs_status_string(st));
    }
    st = ucp_worker_get_address(comm->worker, addr, addr_len);
    if (st != UCS_OK) {
        *addr = NULL;
        return comm->svc->error(BRAID_ERR_TRANSPORT,
                                "ucx: rank %d: ucp_worker_get_address failed: "
                                "%s",
                                comm->rank, ucs_status_string(st));
    }
    return BRAID_OK;
}

/* Link parameters travel with the addresses and rank 0's win: every rank
 * must feed the same numbers to the cost model, or ranks would pick
 * different algorithms for the same call. */
static void agree_link(braid_ucx_comm_t *comm, const braid_link_t *mine,
                       const braid_ucx_xchg_t *x)
{
    memcpy(&comm->link.alpha_us, &x->extra[0], sizeof(double));
    memcpy(&comm->link.beta_gbps, &x->extra[1], sizeof(double));
    braid_ucx_link_put(&comm->link);
    if (comm->link.alpha_us != mine->alpha_us ||
        comm->link.beta_gbps != mine->beta_gbps) {
        comm->svc->log(
            BRAID_LOG_WARN, BRAID_UCX_COMPONENT,
            "rank %d: BRAID_UCX_ALPHA_US/BRAID_UCX_GBPS differ from "
            "rank 0's; using rank 0's (%g us, %g GB/s)",
            comm->rank, comm->link.alpha_us, comm->link.beta_gbps);
    }
}

braid_status_t braid_ucx_comm_create(const braid_transport_t *self,
                                     const braid_services_t  *svc,
                                     const braid_oob_t       *oob,
                                     const braid_topo_t *topo, void **tcomm)
{
    braid_ucx_comm_t *comm     = NULL;
    ucp_address_t    *addr     = NULL;
    size_t            addr_len = 0;
    braid_ucx_xchg_t  x        = {0};
    braid_link_t      link     = {.struct_size = sizeof(braid_link_t)};
    uint64_t          extra[2];
    braid_status_t    local, st;

    (void)self;
    if (svc == NULL || oob == NULL || tcomm == NULL || oob->size < 1 ||
        oob->rank < 0 || oob->rank >= oob->size) {
        return svc ? svc->error(BRAID_ERR_INVALID_ARG,
                                "ucx: comm_create: bad arguments")
                   : BRAID_ERR_INVALID_ARG;
    }
    *tcomm = NULL;
    if ((long)oob->size > BRAID_UCX_MAX_RANKS) {
        return svc->error(BRAID_ERR_UNAVAILABLE,
                          "ucx: %d ranks exceed the %ld a UCX tag can name",
                          oob->size, BRAID_UCX_MAX_RANKS);
    }

    /* Local setup; a failure is still carried through the exchange so that
     * every rank fails together. */
    local = braid_ucx_link_declared(&link, svc, topo ? topo->nnodes : 1);
    if (local == BRAID_OK) {
        comm = calloc(1, sizeof(*comm));
        if (comm == NULL) {
            local = svc->error(BRAID_ERR_NO_MEMORY,
                               "ucx: out of memory for a communicator");
        }
    }
    if (comm != NULL) {
        comm->svc          = svc;
        comm->oob          = *oob;
        comm->rank         = oob->rank;
        comm->size         = oob->size;
        comm->failed_peer  = -1;
        comm->pending.prev = comm->pending.next = &comm->pending;
        comm->areas.prev = comm->areas.next = &comm->areas;
        local = setup_worker(&addr, &addr_len, comm);
    }

    memcpy(&extra[0], &link.alpha_us, sizeof(double));
    memcpy(&extra[1], &link.beta_gbps, sizeof(double));
    st = braid_ucx_oob_exchange(&x, svc, oob, "exchanging worker addresses",
                                local, addr, addr_len, extra);
    if (addr != NULL) {
        ucp_worker_release_address(comm->worker, addr);
    }
    if (st != BRAID_OK) {
        goto fail;
    }
    agree_link(comm, &link, &x);
    local = connect_peers(comm, &x);
    braid_ucx_xchg_free(&x);
    /* Doubles as the final barrier: nobody sends before every endpoint
     * exists, and nobody keeps a communicator another rank gave up on. */
    st = braid_ucx_oob_agree(svc, oob, "connecting endpoints", local);
    if (st != BRAID_OK) {
        goto fail;
    }
    *tcomm = comm;
    return BRAID_OK;

fail:
    comm_teardown(comm);
    return st;
}

void braid_ucx_comm_destroy(void *tcomm) { comm_teardown(tcomm); }

void braid_ucx_link(void *tcomm, braid_link_t *link)
{
    const braid_link_t *mine = &((braid_ucx_comm_t *)tcomm)->link;
    link->alpha_us           = mine->alpha_us;
    link->beta_gbps          = mine->beta_gbps;
    link->put_alpha_us       = mine->put_alpha_us;
    link->put_beta_gbps      = mine->put_beta_gbps;
}
