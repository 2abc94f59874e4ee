/* One-sided operations of the ucx transport: collectively allocated,
 * registered areas and put-with-signal into a peer's area. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tl_ucx.h"

typedef struct braid_ucx_rmem {
    ucp_mem_h   memh;
    void       *area;
    size_t      area_len;
    uint64_t   *raddr; /* [size]: base address of each rank's area */
    ucp_rkey_h *rkeys; /* [size]: unpacked on our endpoint to that rank */
} braid_ucx_rmem_t;

static void rmem_release(braid_ucx_comm_t *comm, braid_ucx_rmem_t *rm)
{
    if (rm == NULL) {
        return;
    }
    for (int p = 0; rm->rkeys != NULL && p < comm->size; p++) {
        if (rm->rkeys[p] != NULL) {
            ucp_rkey_destroy(rm->rkeys[p]);
        }
    }
    if (rm->memh != NULL) {
        ucp_mem_unmap(comm->context, rm->memh);
    }
    free(rm->area);
    free(rm->raddr);
    free(rm->rkeys);
    free(rm);
}

/* Allocates and registers our area, packs its rkey. */
static braid_status_t map_area(braid_ucx_rmem_t **out, void **rkey,
                               size_t *rkey_len, braid_ucx_comm_t *comm,
                               size_t len)
{
    const size_t         page = (size_t)sysconf(_SC_PAGESIZE);
    braid_ucx_rmem_t    *rm;
    ucp_mem_map_params_t params;
    ucs_status_t         st;

    rm = calloc(1, sizeof(*rm));
    *out = rm;
    if (rm == NULL) {
        return comm->svc.error(BRAID_ERR_NO_MEMORY,
                               "ucx: out of memory for a registered area");
    }
    rm->raddr    = calloc((size_t)comm->size, sizeof(*rm->raddr));
    rm->rkeys    = calloc((size_t)comm->size, sizeof(*rm->rkeys));
    /* Whole pages, at least one: ucp_mem_map refuses a zero length. */
    rm->area_len = (len + page - 1) / page * page;
    if (rm->area_len == 0) {
        rm->area_len = page;
    }
    rm->area = aligned_alloc(page, rm->area_len);
    if (rm->raddr == NULL || rm->rkeys == NULL || rm->area == NULL) {
        return comm->svc.error(BRAID_ERR_NO_MEMORY,
                               "ucx: out of memory for a registered area of "
                               "%zu bytes", len);
    }
    memset(rm->area, 0, rm->area_len);

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                        UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    params.address    = rm->area;
    params.length     = rm->area_len;
    st = ucp_mem_map(comm->context, &params, &rm->memh);
    if (st != UCS_OK) {
        rm->memh = NULL;
        return comm->svc.error(braid_ucx_status(st),
                               "ucx: rank %d: ucp_mem_map of %zu bytes "
                               "failed: %s", comm->rank, rm->area_len,
                               ucs_status_string(st));
    }
    st = ucp_rkey_pack(comm->context, rm->memh, rkey, rkey_len);
    if (st != UCS_OK) {
        *rkey = NULL;
        return comm->svc.error(braid_ucx_status(st),
                               "ucx: rank %d: ucp_rkey_pack failed: %s",
                               comm->rank, ucs_status_string(st));
    }
    return BRAID_OK;
}

static braid_status_t unpack_rkeys(braid_ucx_rmem_t *rm,
                                   braid_ucx_comm_t *comm, size_t len,
                                   const braid_ucx_xchg_t *x)
{
    ucs_status_t st;

    for (int p = 0; p < comm->size; p++) {
        if (x->extra[2 * p + 1] != len) {
            return comm->svc.error(BRAID_ERR_MISMATCH,
                                   "ucx: mem_alloc: rank %d asked for %llu "
                                   "bytes, rank %d for %zu", p,
                                   (unsigned long long)x->extra[2 * p + 1],
                                   comm->rank, len);
        }
        rm->raddr[p] = x->extra[2 * p];
        st = ucp_ep_rkey_unpack(comm->peers[p].ep,
                                x->blobs + (size_t)p * x->stride,
                                &rm->rkeys[p]);
        if (st != UCS_OK) {
            rm->rkeys[p] = NULL;
            return comm->svc.error(braid_ucx_status(st),
                                   "ucx: rank %d: cannot unpack the rkey of "
                                   "rank %d: %s", comm->rank, p,
                                   ucs_status_string(st));
        }
    }
    return BRAID_OK;
}

braid_status_t braid_ucx_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem)
{
    braid_ucx_comm_t *comm     = tcomm;
    braid_ucx_rmem_t *rm       = NULL;
    void             *rkey     = NULL;
    size_t            rkey_len = 0;
    braid_ucx_xchg_t  x        = {0};
    uint64_t          extra[2];
    braid_status_t    local, st;

    memset(mem, 0, sizeof(*mem));
    local = map_area(&rm, &rkey, &rkey_len, comm, len);
    extra[0] = rm && rm->area ? (uint64_t)(uintptr_t)rm->area : 0;
    extra[1] = len;
    st = braid_ucx_oob_exchange(&x, &comm->svc, &comm->oob,
                                "exchanging rkeys", local, rkey, rkey_len,
                                extra);
    if (rkey != NULL) {
        ucp_rkey_buffer_release(rkey);
    }
    if (st != BRAID_OK) {
        goto fail;
    }
    local = unpack_rkeys(rm, comm, len, &x);
    braid_ucx_xchg_free(&x);
    st = braid_ucx_oob_agree(&comm->svc, &comm->oob, "unpacking rkeys",
                             local);
    if (st != BRAID_OK) {
        goto fail;
    }
    mem->local = rm->area;
    mem->len   = len;
    mem->impl  = rm;
    return BRAID_OK;

fail:
    rmem_release(comm, rm);
    return st;
}

void braid_ucx_mem_free(void *tcomm, braid_rmem_t *mem)
{
    braid_ucx_comm_t *comm = tcomm;

    if (mem == NULL || mem->impl == NULL) {
        return;
    }
    /* Our puts through these rkeys must be done before they go away.  Not
     * collective: peers still writing into our area is the caller's bug. */
    (void)braid_ucx_flush(comm, comm->svc.now() + comm->svc.timeout_s());
    rmem_release(comm, mem->impl);
    memset(mem, 0, sizeof(*mem));
}

ucs_status_t braid_ucx_put_status(braid_ucx_put_t *put)
{
    int pending = 0;

    for (int i = 0; i < 2; i++) {
        ucs_status_t st;

        if (put->reqs[i] == NULL) {
            continue;
        }
        st = ucp_request_check_status(put->reqs[i]);
        if (st == UCS_INPROGRESS) {
            pending = 1;
            continue;
        }
        ucp_request_free(put->reqs[i]);
        put->reqs[i] = NULL;
        if (put->err == UCS_OK) {
            put->err = st;
        }
    }
    /* The flag word lives in *put: report nothing until both are done. */
    return pending ? UCS_INPROGRESS : put->err;
}

void braid_ucx_put_abandon(braid_ucx_put_t *put)
{
    for (int i = 0; i < 2; i++) {
        if (put->reqs[i] != NULL) {
            ucp_request_free(put->reqs[i]);
            put->reqs[i] = NULL;
        }
    }
}

static braid_status_t put_failed(braid_ucx_comm_t *comm, int peer,
                                 const char *what, ucs_status_t st)
{
    return comm->svc.error(braid_ucx_status(st),
                           "ucx: rank %d: put_signal to rank %d: %s failed: "
                           "%s", comm->rank, peer, what,
                           ucs_status_string(st));
}

braid_status_t braid_ucx_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                    size_t dst_off, const void *src,
                                    size_t len, size_t flag_off,
                                    uint64_t flag_val, braid_treq_t *req)
{
    braid_ucx_comm_t   *comm = tcomm;
    braid_ucx_rmem_t   *rm   = mem ? mem->impl : NULL;
    braid_ucx_put_t    *put;
    ucp_request_param_t param;
    ucs_status_ptr_t    sp;
    ucs_status_t        st;
    ucp_ep_h            ep;

    req->handle = NULL;
    req->active = 0;
    if (rm == NULL || peer < 0 || peer >= comm->size ||
        dst_off > mem->len || len > mem->len - dst_off ||
        flag_off > mem->len || mem->len - flag_off < sizeof(uint64_t) ||
        flag_off % sizeof(uint64_t) != 0) {
        return comm->svc.error(BRAID_ERR_INVALID_ARG,
                               "ucx: put_signal to rank %d: %zu bytes at %zu, "
                               "flag at %zu do not fit an area of %zu bytes "
                               "(or the flag is not 8-byte aligned)", peer,
                               len, dst_off, flag_off, mem ? mem->len : 0);
    }
    if (comm->peers[peer].status != UCS_OK) {
        return put_failed(comm, peer, "its endpoint",
                          comm->peers[peer].status);
    }
    put = calloc(1, sizeof(*put));
    if (put == NULL) {
        return comm->svc.error(BRAID_ERR_NO_MEMORY,
                               "ucx: out of memory for a put_signal");
    }
    put->flag = flag_val;
    ep        = comm->peers[peer].ep;
    memset(&param, 0, sizeof(param));

    if (len > 0) {
        sp = ucp_put_nbx(ep, src, len, rm->raddr[peer] + dst_off,
                         rm->rkeys[peer], &param);
        if (UCS_PTR_IS_ERR(sp)) {
            free(put);
            return put_failed(comm, peer, "data put", UCS_PTR_STATUS(sp));
        }
        put->reqs[0] = sp;
    }
    /* The flag must not land before the data it announces. */
    st = ucp_worker_fence(comm->worker);
    if (st != UCS_OK) {
        braid_ucx_put_abandon(put);
        free(put);
        return put_failed(comm, peer, "fence", st);
    }
    sp = ucp_put_nbx(ep, &put->flag, sizeof(put->flag),
                     rm->raddr[peer] + flag_off, rm->rkeys[peer], &param);
    if (UCS_PTR_IS_ERR(sp)) {
        braid_ucx_put_abandon(put); /* the data put reads src, not *put */
        free(put);
        return put_failed(comm, peer, "flag put", UCS_PTR_STATUS(sp));
    }
    put->reqs[1] = sp;

    req->active = 1;
    if (put->reqs[0] == NULL && put->reqs[1] == NULL) {
        free(put); /* both completed immediately */
        return BRAID_OK;
    }
    braid_ucx_op_link(comm, &put->op, BRAID_UCX_OP_PUT, peer, flag_off, len);
    req->handle = put;
    return BRAID_OK;
}
