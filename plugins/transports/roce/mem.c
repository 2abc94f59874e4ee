/* Collectively allocated, registered areas.
 *
 * Each area is host memory (mmap: page aligned and zero-filled) registered
 * once for remote writes.  On unified-memory machines without GPUDirect
 * RDMA, host memory is what the NIC can reach; the caller copies device
 * data in and out if it has any.  Every rank numbers its areas in mem_alloc
 * order, which is the same everywhere since the call is collective: a signal
 * names its area by that number. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tl_roce.h"

/* What a rank tells the others about its area. */
typedef struct area_addr {
    uint32_t ok;
    uint32_t id;
    uint64_t len;
    uint64_t addr;
    uint32_t rkey;
    uint32_t pad;
} area_addr_t;

void braid_roce_area_release(braid_roce_area_t *area)
{
    if (area == NULL)
        return;
    if (area->mr != NULL)
        ibv_dereg_mr(area->mr);
    if (area->base != NULL)
        munmap(area->base, area->map_len);
    free(area->raddr);
    free(area->rkey);
    free(area);
}

braid_roce_area_t *braid_roce_area_holding(braid_roce_comm_t *comm,
                                           const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;

    for (uint32_t i = 0; i < comm->nareas; i++) {
        braid_roce_area_t *area = comm->areas[i];
        uintptr_t          base;
        if (area == NULL)
            continue;
        base = (uintptr_t)area->base;
        if (a >= base && a - base <= area->map_len &&
            len <= area->map_len - (a - base))
            return area;
    }
    return NULL;
}

/* Slot `id` of the area table, growing it. */
static braid_status_t table_put(braid_roce_comm_t *comm, uint32_t id,
                                braid_roce_area_t *area)
{
    if (id >= comm->areas_cap) {
        uint32_t            cap = comm->areas_cap ? comm->areas_cap * 2 : 8;
        braid_roce_area_t **t;
        while (cap <= id)
            cap *= 2;
        t = realloc(comm->areas, cap * sizeof(*t));
        if (t == NULL)
            return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                    "roce: out of "
                                    "memory for the area table");
        memset(t + comm->areas_cap, 0, (cap - comm->areas_cap) * sizeof(*t));
        comm->areas     = t;
        comm->areas_cap = cap;
    }
    comm->areas[id] = area;
    if (id >= comm->nareas)
        comm->nareas = id + 1;
    return BRAID_OK;
}

/* Allocates and registers this rank's part; the area enters the table at
 * once, since a peer may signal into it as soon as the exchange is over. */
static braid_status_t map_area(braid_roce_comm_t *comm, uint32_t id,
                               size_t len, braid_roce_area_t **out)
{
    const size_t       page = (size_t)sysconf(_SC_PAGESIZE);
    braid_roce_area_t *area = calloc(1, sizeof(*area));
    void              *base;

    *out = area;
    if (area == NULL)
        return comm->svc->error(BRAID_ERR_NO_MEMORY, "roce: out of memory");
    area->id      = id;
    area->len     = len;
    area->map_len = len > 0 ? (len + page - 1) / page * page : page;
    area->raddr   = calloc((size_t)comm->size, sizeof(*area->raddr));
    area->rkey    = calloc((size_t)comm->size, sizeof(*area->rkey));
    if (area->raddr == NULL || area->rkey == NULL || area->map_len < len)
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "roce: out of memory "
                                "for an area of %zu bytes",
                                len);
    base = mmap(NULL, area->map_len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "roce: rank %d: mmap of "
                                "a %zu-byte area failed: %s",
                                comm->rank, area->map_len, strerror(errno));
    area->base = base;
    area->mr   = ibv_reg_mr(comm->pd, base, area->map_len,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (area->mr == NULL)
        return comm->svc->error(BRAID_ERR_TRANSPORT,
                                "roce: rank %d: "
                                "ibv_reg_mr of a %zu-byte area on %s failed: "
                                "%s (locked memory limit, ulimit -l?)",
                                comm->rank, area->map_len, comm->dev.name,
                                strerror(errno));
    return table_put(comm, id, area);
}

/* Everyone's address and key, or why not (the same verdict on every rank). */
static braid_status_t check_addrs(braid_roce_comm_t *comm,
                                  braid_roce_area_t *area, uint32_t id,
                                  size_t len, const area_addr_t *all)
{
    for (int r = 0; r < comm->size; r++) {
        if (!all[r].ok)
            return comm->svc->error(BRAID_ERR_TRANSPORT,
                                    "roce: mem_alloc of "
                                    "%zu bytes: rank %d could not allocate "
                                    "or register its part (see its error)",
                                    len, r);
        if (all[r].len != len || all[r].id != id)
            return comm->svc->error(BRAID_ERR_MISMATCH,
                                    "roce: mem_alloc: "
                                    "rank %d allocates area #%u of %llu "
                                    "bytes, rank %d area #%u of %zu bytes "
                                    "(do the ranks call mem_alloc alike?)",
                                    r, all[r].id,
                                    (unsigned long long)all[r].len, comm->rank,
                                    id, len);
        area->raddr[r] = all[r].addr;
        area->rkey[r]  = all[r].rkey;
    }
    return BRAID_OK;
}

braid_status_t braid_roce_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem)
{
    braid_roce_comm_t *comm = tcomm;
    braid_roce_area_t *area = NULL;
    area_addr_t        mine = {0}, *all = NULL;
    uint32_t           id = comm->next_area++; /* in step on every rank */
    braid_status_t     local, st;

    memset(mem, 0, sizeof(*mem));
    local = map_area(comm, id, len, &area);
    if (local == BRAID_OK && comm->failed != BRAID_OK)
        local = comm->svc->error(comm->failed, "%s", comm->why);
    mine.ok   = local == BRAID_OK;
    mine.id   = id;
    mine.len  = len;
    mine.addr = area && area->base ? (uint64_t)(uintptr_t)area->base : 0;
    mine.rkey = area && area->mr ? area->mr->rkey : 0;
    /* Collective even when this rank failed, so that no peer waits. */
    all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL) {
        st = comm->svc->error(BRAID_ERR_NO_MEMORY, "roce: out of memory");
        goto fail; /* the bootstrap fails the peers' allgather by timeout */
    }
    st = comm->oob.allgather(comm->oob.ctx, &mine, all, sizeof(mine));
    if (st != BRAID_OK)
        goto fail;
    if (local != BRAID_OK) {
        st = local;
        goto fail;
    }
    if ((st = check_addrs(comm, area, id, len, all)) != BRAID_OK)
        goto fail;
    free(all);
    mem->local = area->base;
    mem->len   = len;
    mem->impl  = area;
    return BRAID_OK;

fail:
    free(all);
    if (area != NULL && id < comm->nareas && comm->areas[id] == area)
        comm->areas[id] = NULL;
    braid_roce_area_release(area);
    return st;
}

void braid_roce_mem_free(void *tcomm, braid_rmem_t *mem)
{
    braid_roce_comm_t *comm = tcomm;
    braid_roce_area_t *area;

    if (comm == NULL || mem == NULL || mem->impl == NULL)
        return;
    area = mem->impl;
    /* Our puts may still read from this area (a zero-copy source): let them
     * finish before the registration goes.  Not collective: a peer still
     * writing into our area after we free it is the caller's bug, and its
     * put fails with a remote access error rather than corrupting memory. */
    (void)braid_roce_drain(comm, "mem_free");
    if (area->id < comm->nareas && comm->areas[area->id] == area)
        comm->areas[area->id] = NULL;
    braid_roce_area_release(area);
    memset(mem, 0, sizeof(*mem));
}
