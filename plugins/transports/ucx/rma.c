/* One-sided operations of the ucx transport: collectively allocated areas
 * and put-with-signal into a peer's area.
 *
 * Why active messages and not ucp_put_nbx.  Where UCX has no native RMA --
 * TCP, which Debian's UCX 1.13 picks even on one host once endpoints ask for
 * peer-failure detection -- ucp_put is emulated: the target's progress
 * writes the data and then sends an acknowledgement back through
 * ucp_request_send(), which calls ucs_fatal() on any error but "no
 * resource".  So a rank that receives a put from a peer whose endpoint has
 * just failed (the peer died, or closed its endpoints while tearing down)
 * aborts the whole process with "Endpoint timeout", and no error-handling
 * mode or callback on our side reaches that code.  The flush that mem_free
 * and comm_destroy needed also waited for those acknowledgements, up to the
 * timeout, when a peer was dead.
 *
 * A put is therefore one active message: a header {area, offset, flag} and
 * the data, sent eagerly (never rendezvous), so the target's handler gets
 * the whole message at once, copies it into the area and then stores the
 * flag with release order.  The target never answers, so nothing on it can
 * fail because a peer died; the sender's request completes once the data
 * left the source buffer, or fails when the endpoint fails, like a tagged
 * send.  The price is a copy on the target, which TCP's emulated put made
 * too; on a fabric with real RDMA a zero-copy put would be faster, and could
 * come back once UCX handles a failed peer in its emulation. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tl_ucx.h"

/* What every rank says about a mem_alloc: whether it got its area, and the
 * id and length it used, which must be the same everywhere. */
typedef struct area_vote {
    int64_t  status;
    uint64_t id;
    uint64_t len;
} area_vote_t;

static braid_ucx_area_t *area_find(braid_ucx_comm_t *comm, uint64_t id)
{
    for (braid_ucx_area_t *a = comm->areas.next; a != &comm->areas;
         a                   = a->next) {
        if (a->id == id) {
            return a;
        }
    }
    return NULL;
}

static void area_release(braid_ucx_area_t *a)
{
    if (a->prev != NULL) { /* linked */
        a->prev->next = a->next;
        a->next->prev = a->prev;
    }
    free(a->base);
    free(a);
}

void braid_ucx_areas_release(braid_ucx_comm_t *comm)
{
    while (comm->areas.next != NULL && comm->areas.next != &comm->areas) {
        area_release(comm->areas.next);
    }
}

/* Lands one put: called by ucp_worker_progress on the target. */
static ucs_status_t put_arrived(void *arg, const void *header,
                                size_t header_length, void *data,
                                size_t                     length,
                                const ucp_am_recv_param_t *param)
{
    braid_ucx_comm_t   *comm = arg;
    braid_ucx_put_hdr_t h;
    braid_ucx_area_t   *a;
    char               *base;

    if (header_length != sizeof(h) ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        comm->svc->log(BRAID_LOG_WARN, BRAID_UCX_COMPONENT,
                       "rank %d: dropped "
                       "a malformed put (%zu-byte header%s)",
                       comm->rank, header_length,
                       (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
                           ? ", rendezvous"
                           : "");
        /* A rendezvous descriptor returned with an error fails the sender's
         * request with it instead of completing it. */
        return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)
                   ? UCS_ERR_UNSUPPORTED
                   : UCS_OK;
    }
    memcpy(&h, header, sizeof(h)); /* the header need not be aligned */
    a = area_find(comm, h.area);
    if (a == NULL) {
        /* Only after a failure: algorithms free an area once nothing can be
         * in flight into it (plugins/algorithms/lowhop/recv_area.h). */
        comm->svc->log(BRAID_LOG_DEBUG, BRAID_UCX_COMPONENT,
                       "rank %d: dropped "
                       "a put into area %llu, which is gone",
                       comm->rank, (unsigned long long)h.area);
        return UCS_OK;
    }
    if (h.dst_off > a->len || length > a->len - h.dst_off ||
        a->len < sizeof(uint64_t) || h.flag_off > a->len - sizeof(uint64_t) ||
        h.flag_off % sizeof(uint64_t) != 0) {
        comm->svc->log(BRAID_LOG_WARN, BRAID_UCX_COMPONENT,
                       "rank %d: dropped "
                       "a put of %zu bytes at %llu, flag at %llu: outside "
                       "area %llu (%zu bytes)",
                       comm->rank, length, (unsigned long long)h.dst_off,
                       (unsigned long long)h.flag_off,
                       (unsigned long long)h.area, a->len);
        return UCS_OK;
    }
    base = a->base;
    if (length > 0) {
        memcpy(base + h.dst_off, data, length);
    }
    /* Pairs with the reader's acquire load: the data is visible first. */
    __atomic_store_n((uint64_t *)(void *)(base + h.flag_off), h.flag_val,
                     __ATOMIC_RELEASE);
    return UCS_OK;
}

ucs_status_t braid_ucx_am_register(braid_ucx_comm_t *comm)
{
    ucp_am_handler_param_t p;

    memset(&p, 0, sizeof(p));
    p.field_mask =
        UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
        UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id    = BRAID_UCX_AM_PUT;
    p.flags = UCP_AM_FLAG_WHOLE_MSG;
    p.cb    = put_arrived;
    p.arg   = comm;
    return ucp_worker_set_am_recv_handler(comm->worker, &p);
}

static braid_status_t area_new(braid_ucx_area_t **out, braid_ucx_comm_t *comm,
                               uint64_t id, size_t len)
{
    const size_t      page = (size_t)sysconf(_SC_PAGESIZE);
    braid_ucx_area_t *a    = calloc(1, sizeof(*a));
    size_t            bytes;

    *out = NULL;
    if (a == NULL) {
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "ucx: rank %d: out of "
                                "memory for a put area",
                                comm->rank);
    }
    if (len > SIZE_MAX - page) {
        free(a);
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "ucx: rank %d: a put "
                                "area of %zu bytes is too large",
                                comm->rank, len);
    }
    bytes   = len == 0 ? page : (len + page - 1) / page * page;
    a->base = aligned_alloc(page, bytes);
    if (a->base == NULL) {
        free(a);
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "ucx: rank %d: out of "
                                "memory for a put area of %zu bytes",
                                comm->rank, len);
    }
    memset(a->base, 0, bytes);
    a->id  = id;
    a->len = len;
    *out   = a;
    return BRAID_OK;
}

/* One round through the oob: every rank's area exists once it returns, so
 * no put can arrive before its area. */
static braid_status_t area_agree(braid_ucx_comm_t *comm, braid_status_t local,
                                 uint64_t id, size_t len)
{
    area_vote_t    mine = {local, id, len};
    area_vote_t   *all  = calloc((size_t)comm->size, sizeof(*all));
    braid_status_t st;

    if (all == NULL) {
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "ucx: rank %d: out of "
                                "memory agreeing on a put area",
                                comm->rank);
    }
    st = comm->oob.allgather(comm->oob.ctx, &mine, all, sizeof(mine));
    if (st != BRAID_OK) {
        free(all);
        return local != BRAID_OK ? local
                                 : comm->svc->error(st,
                                                    "ucx: rank %d: "
                                                    "mem_alloc: out-of-band "
                                                    "allgather failed (status "
                                                    "%d)",
                                                    comm->rank, (int)st);
    }
    st = local;
    for (int p = 0; p < comm->size && st == BRAID_OK; p++) {
        if (all[p].status != BRAID_OK) {
            st = comm->svc->error((braid_status_t)all[p].status,
                                  "ucx: rank "
                                  "%d failed to allocate its put area (status "
                                  "%d), so rank %d gives up too",
                                  p, (int)all[p].status, comm->rank);
        } else if (all[p].id != id || all[p].len != len) {
            st = comm->svc->error(BRAID_ERR_MISMATCH,
                                  "ucx: mem_alloc: rank "
                                  "%d asked for %llu bytes (area %llu), rank "
                                  "%d for %zu (area %llu)",
                                  p, (unsigned long long)all[p].len,
                                  (unsigned long long)all[p].id, comm->rank,
                                  len, (unsigned long long)id);
        }
    }
    free(all);
    return st;
}

braid_status_t braid_ucx_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem)
{
    braid_ucx_comm_t *comm = tcomm;
    braid_ucx_area_t *a    = NULL;
    uint64_t          id   = comm->next_area++; /* in step on every rank */
    braid_status_t    st;

    memset(mem, 0, sizeof(*mem));
    st = area_new(&a, comm, id, len);
    if (a != NULL) { /* findable before any peer can put into it */
        a->prev                = &comm->areas;
        a->next                = comm->areas.next;
        comm->areas.next->prev = a;
        comm->areas.next       = a;
    }
    /* Collective even when this rank failed, so that no peer waits. */
    st = area_agree(comm, st, id, len);
    if (st != BRAID_OK) {
        if (a != NULL) {
            area_release(a);
        }
        return st;
    }
    mem->local = a->base;
    mem->len   = len;
    mem->impl  = a;
    return BRAID_OK;
}

void braid_ucx_mem_free(void *tcomm, braid_rmem_t *mem)
{
    (void)tcomm;
    if (mem == NULL || mem->impl == NULL) {
        return;
    }
    /* Nothing to wait for: our puts read their sources, not this area, and
     * a put that still arrives for it finds no area and is dropped. */
    area_release(mem->impl);
    memset(mem, 0, sizeof(*mem));
}

braid_status_t braid_ucx_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                    size_t dst_off, const void *src,
                                    size_t len, size_t flag_off,
                                    uint64_t flag_val, braid_treq_t *req)
{
    braid_ucx_comm_t   *comm = tcomm;
    braid_ucx_area_t   *a    = mem ? mem->impl : NULL;
    braid_ucx_put_t    *put;
    ucp_request_param_t param;
    ucs_status_ptr_t    sp;

    req->handle = NULL;
    req->active = 0;
    if (a == NULL || peer < 0 || peer >= comm->size || dst_off > mem->len ||
        len > mem->len - dst_off || flag_off > mem->len ||
        mem->len - flag_off < sizeof(uint64_t) ||
        flag_off % sizeof(uint64_t) != 0 || (len > 0 && src == NULL)) {
        return comm->svc->error(
            BRAID_ERR_INVALID_ARG,
            "ucx: put_signal to rank %d: %zu bytes at %zu, "
            "flag at %zu do not fit an area of %zu bytes "
            "(or the flag is not 8-byte aligned, or src "
            "is NULL)",
            peer, len, dst_off, flag_off, mem ? mem->len : 0);
    }
    if (comm->peers[peer].status != UCS_OK) {
        return comm->svc->error(BRAID_ERR_PEER,
                                "ucx: rank %d: put_signal to "
                                "rank %d: its endpoint failed earlier: %s",
                                comm->rank, peer,
                                ucs_status_string(comm->peers[peer].status));
    }
    put = calloc(1, sizeof(*put));
    if (put == NULL) {
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "ucx: out of memory for a put_signal");
    }
    put->hdr.area     = a->id;
    put->hdr.dst_off  = dst_off;
    put->hdr.flag_off = flag_off;
    put->hdr.flag_val = flag_val;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags        = UCP_AM_SEND_FLAG_EAGER; /* see the top of the file */
    sp = ucp_am_send_nbx(comm->peers[peer].ep, BRAID_UCX_AM_PUT, &put->hdr,
                         sizeof(put->hdr), src, len, &param);
    if (UCS_PTR_IS_ERR(sp)) {
        ucs_status_t st = UCS_PTR_STATUS(sp);
        free(put);
        return comm->svc->error(
            braid_ucx_status(st),
            "ucx: rank %d: "
            "put_signal of %zu bytes to rank %d failed: %s",
            comm->rank, len, peer, ucs_status_string(st));
    }
    req->active = 1;
    if (sp == NULL) {
        free(put); /* sent at once: test reports it complete */
        return BRAID_OK;
    }
    put->req = sp;
    braid_ucx_op_link(comm, &put->op, BRAID_UCX_OP_PUT, peer, flag_off, len);
    req->handle = put;
    return BRAID_OK;
}
