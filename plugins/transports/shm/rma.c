/* One-sided: registered areas and put with signal.
 *
 * mem_alloc gives every rank a shared segment that every peer maps, so a
 * put is a plain copy into the peer's memory followed by a release store
 * of the 8-byte flag: one copy, no intermediate buffer, no help needed from
 * the target, and the call is complete when it returns.
 *
 * Contract for readers (the algorithm polling its own area): load the flag
 * with __atomic_load_n(..., __ATOMIC_ACQUIRE) (or follow a relaxed load with
 * an acquire fence) before reading the data; that pairs with the release
 * store here, and a plain load would let the compiler or CPU read stale data.
 * The flag must be 8-byte aligned.  Where data and flag go, and how a rank
 * knows it may overwrite a slot again, is the algorithm's business.  The
 * target polls memory; nothing here wakes it (see wake.c for why). */
#include <stdlib.h>
#include <string.h>

#include "shm.h"

braid_status_t braid_shm_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem)
{
    braid_shm_comm_t  *comm = tcomm;
    braid_shm_rmem_t  *r;
    braid_shm_segset_t failed; /* for taking part when r is missing */
    braid_status_t     st;
    size_t             bytes = braid_shm_seg_round(len);

    memset(mem, 0, sizeof(*mem));
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        st = comm->svc->error(BRAID_ERR_NO_MEMORY,
                              "shm: rank %d: mem_alloc of "
                              "%zu bytes: out of memory",
                              comm->rank, len);
    } else if (bytes == 0) {
        st = comm->svc->error(BRAID_ERR_INVALID_ARG,
                              "shm: rank %d: mem_alloc "
                              "of %zu bytes: too large",
                              comm->rank, len);
    } else {
        st = BRAID_OK;
    }
    /* A local failure still takes part, so that every rank fails together. */
    st = braid_shm_segset_create(
        comm->svc, &comm->oob, st, bytes ? bytes : braid_shm_seg_round(0),
        "mem_alloc", NULL, NULL, r ? &r->set : &failed);
    if (st != BRAID_OK) {
        free(r);
        return st;
    }
    r->prev                = &comm->rmems;
    r->next                = comm->rmems.next;
    comm->rmems.next->prev = r;
    comm->rmems.next       = r;
    mem->local             = r->set.base[comm->rank];
    mem->len               = len;
    mem->impl              = r;
    return BRAID_OK;
}

static void rmem_release(braid_shm_rmem_t *r)
{
    r->prev->next = r->next;
    r->next->prev = r->prev;
    braid_shm_segset_destroy(&r->set);
    free(r);
}

void braid_shm_mem_free(void *tcomm, braid_rmem_t *mem)
{
    (void)tcomm;
    if (mem == NULL || mem->impl == NULL) {
        return;
    }
    rmem_release(mem->impl);
    memset(mem, 0, sizeof(*mem));
}

/* Areas an algorithm did not free before the communicator went away. */
void braid_shm_rmem_release_all(braid_shm_comm_t *comm)
{
    while (comm->rmems.next != NULL && comm->rmems.next != &comm->rmems) {
        rmem_release(comm->rmems.next);
    }
}

static braid_status_t put_bad_args(braid_shm_comm_t *comm, braid_rmem_t *mem,
                                   int peer, size_t dst_off, size_t len,
                                   size_t flag_off)
{
    if (mem == NULL || mem->impl == NULL) {
        return comm->svc->error(
            BRAID_ERR_INVALID_ARG,
            "shm: rank %d: "
            "put_signal to rank %d on an area that was not "
            "allocated",
            comm->rank, peer);
    }
    if (peer < 0 || peer >= comm->size) {
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "shm: rank %d: "
                                "put_signal to rank %d, but the communicator "
                                "has %d ranks",
                                comm->rank, peer, comm->size);
    }
    if (flag_off % sizeof(uint64_t) != 0) {
        return comm->svc->error(
            BRAID_ERR_INVALID_ARG,
            "shm: rank %d: "
            "put_signal to rank %d: flag offset %zu is not "
            "8-byte aligned",
            comm->rank, peer, flag_off);
    }
    return comm->svc->error(BRAID_ERR_INVALID_ARG,
                            "shm: rank %d: put_signal "
                            "to rank %d: %zu bytes at %zu or the flag at %zu "
                            "fall outside the %zu-byte area",
                            comm->rank, peer, len, dst_off, flag_off,
                            mem->len);
}

/* Up to 16 bytes in two overlapping moves: a decode step's put, without
 * a call into libc's size dispatch for a handful of bytes. */
static inline void small_copy(unsigned char *dst, const void *src, size_t len)
{
    const unsigned char *s = src;
    uint64_t             a, b;
    uint32_t             c, d;
    if (len >= 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + len - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + len - 8, &b, 8);
    } else if (len >= 4) {
        memcpy(&c, s, 4);
        memcpy(&d, s + len - 4, 4);
        memcpy(dst, &c, 4);
        memcpy(dst + len - 4, &d, 4);
    } else {
        for (size_t i = 0; i < len; i++)
            dst[i] = s[i];
    }
}

braid_status_t braid_shm_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                    size_t dst_off, const void *src,
                                    size_t len, size_t flag_off,
                                    uint64_t flag_val, braid_treq_t *req)
{
    braid_shm_comm_t *comm = tcomm;
    braid_shm_rmem_t *r;
    unsigned char    *base;

    req->handle = NULL;
    req->active = 0;
    /* One predictable branch guards every argument on the hot path. */
    if (mem == NULL || mem->impl == NULL ||
        (unsigned)peer >= (unsigned)comm->size || len > mem->len ||
        dst_off > mem->len - len || mem->len < sizeof(uint64_t) ||
        flag_off > mem->len - sizeof(uint64_t) ||
        flag_off % sizeof(uint64_t) != 0) {
        return put_bad_args(comm, mem, peer, dst_off, len, flag_off);
    }
    r    = mem->impl;
    base = r->set.base[peer];
    if (len <= 16)
        small_copy(base + dst_off, src, len);
    else
        comm->svc->copy(base + dst_off, src, len, 0);
    __atomic_store_n((uint64_t *)(void *)(base + flag_off), flag_val,
                     __ATOMIC_RELEASE);
    return BRAID_OK;
}

/* Every peer's segment is mapped here for good (segment.c), so a peer's
 * area is readable with loads as long as the area lives. */
const void *braid_shm_mem_peer(void *tcomm, const braid_rmem_t *mem, int peer)
{
    const braid_shm_comm_t *comm = tcomm;
    if (mem == NULL || mem->impl == NULL ||
        (unsigned)peer >= (unsigned)comm->size)
        return NULL;
    const braid_shm_rmem_t *r = mem->impl;
    return r->set.base[peer];
}
