/* How the bw engines cut a collective's data into slices and chunks
 * (bw.h has the layout); pure arithmetic, unit-tested in tests/unit/bw. */
#include "bw.h"

static size_t largest_slice(const braid_bw_plan_t *p)
{
    return braid_bw_slice_len(p, 0); /* slice 0 is a longest one */
}

void braid_bw_plan(braid_bw_plan_t *plan, braid_coll_t coll, int n,
                   size_t count, size_t dtsize, size_t chunk_bytes)
{
    plan->coll  = coll;
    plan->n     = n > 0 ? n : 1;
    plan->count = count;
    plan->chunk =
        dtsize > 0 && chunk_bytes / dtsize > 0 ? chunk_bytes / dtsize : 1;
    /* A slice's chunk count travels in 24 bits: fewer, larger chunks for
     * slices that would need more. */
    size_t most = largest_slice(plan);
    if (most / plan->chunk >= BRAID_BW_MAX_CHUNKS)
        plan->chunk = most / BRAID_BW_MAX_CHUNKS + 1;
}

size_t braid_bw_slice_off(const braid_bw_plan_t *p, int j)
{
    if (p->coll != BRAID_COLL_ALLREDUCE)
        return (size_t)j * p->count;
    size_t q = p->count / (size_t)p->n, rem = p->count % (size_t)p->n;
    return (size_t)j * q + ((size_t)j < rem ? (size_t)j : rem);
}

size_t braid_bw_slice_len(const braid_bw_plan_t *p, int j)
{
    if (p->coll != BRAID_COLL_ALLREDUCE)
        return p->count;
    return p->count / (size_t)p->n +
           ((size_t)j < p->count % (size_t)p->n ? 1 : 0);
}

size_t braid_bw_nchunks(const braid_bw_plan_t *p, int j)
{
    size_t len = braid_bw_slice_len(p, j);
    return len / p->chunk + (len % p->chunk != 0);
}

size_t braid_bw_chunk_off(const braid_bw_plan_t *p, size_t c)
{
    return c * p->chunk;
}

size_t braid_bw_chunk_len(const braid_bw_plan_t *p, int j, size_t c)
{
    size_t len = braid_bw_slice_len(p, j), off = c * p->chunk;
    if (off >= len)
        return 0;
    return len - off < p->chunk ? len - off : p->chunk;
}

size_t braid_bw_max_chunks(const braid_bw_plan_t *p)
{
    return braid_bw_nchunks(p, 0);
}
