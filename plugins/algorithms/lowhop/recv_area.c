/* The receive area of the lowhop algorithms: its layout on the core's
 * registered area (grown collectively, recv_area.h says why that is safe),
 * which slots CPU mates write, and the puts into peers' slots. */
#include <stdlib.h>
#include <string.h>

#include "lowhop.h"
#include "recv_area.h"

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* Slot size to allocate for need bytes: a power of two (so a run of slowly
 * growing calls reallocates only log-many times), at least the minimum slot,
 * and not past limit when need fits under it. */
static size_t slot_size_for(size_t need, size_t limit)
{
    size_t s = BRAID_LOWHOP_MIN_SLOT + BRAID_LOWHOP_FLAG_BYTES;
    while (s - BRAID_LOWHOP_FLAG_BYTES < need && s <= SIZE_MAX / 2)
        s *= 2;
    s -= BRAID_LOWHOP_FLAG_BYTES;
    if (s > limit && need <= limit)
        s = limit;
    return s < need ? need : s;
}

int braid_lowhop_slot_mates(unsigned char *mate, const braid_task_t *task)
{
    const braid_topo_t *t = task->topo;
    int                 n = task->size;

    memset(mate, 0, (size_t)(n > 1 ? n - 1 : 0));
    if (t == NULL || !BRAID_HAS(t, braid_topo_t, nmates) || t->mates == NULL)
        return -1; /* unknown: no hint, which is always correct */
    for (int k = 0; t->nmates > 0 && k < n - 1; k++)
        mate[k] = t->mates[braid_lowhop_slot_source(k, task->rank, n)];
    return t->nmates;
}

/* The layout of this (communicator, candidate), created on first use. */
static braid_status_t area_state(braid_lowhop_area_t **area,
                                 braid_task_t         *task)
{
    braid_lowhop_area_t *a = *task->comm_state;

    if (a == NULL) {
        a = calloc(1, sizeof(*a));
        if (a != NULL)
            a->mate = calloc((size_t)task->size, 1);
        if (a == NULL || a->mate == NULL) {
            free(a);
            return task->svc->error(BRAID_ERR_NO_MEMORY,
                                    "lowhop: out of "
                                    "memory for the receive-area state");
        }
        a->nslots         = task->size - 1;
        a->nmates         = braid_lowhop_slot_mates(a->mate, task);
        *task->comm_state = a;
    }
    *area = a;
    return BRAID_OK;
}

/* Replaces the area by one whose slots hold slot_bytes.  Collective: every
 * rank calls it at the same call (recv_area.h). */
static braid_status_t area_resize(braid_lowhop_area_t *a, braid_task_t *task,
                                  size_t slot_bytes)
{
    size_t stride =
        round_up(BRAID_LOWHOP_FLAG_BYTES + slot_bytes, BRAID_LOWHOP_LINE);
    size_t len;

    if (__builtin_mul_overflow(stride, (size_t)(2 * a->nslots), &len))
        return task->svc->error(BRAID_ERR_NO_MEMORY,
                                "lowhop: a receive area "
                                "of 2 x %d slots of %zu bytes overflows the "
                                "address space",
                                a->nslots, slot_bytes);
    braid_status_t st = task->svc->area_get(task, len, &a->mem, NULL);
    if (st != BRAID_OK)
        return st; /* the core's message says what and why */
    a->base       = a->mem->local;
    a->slot_bytes = slot_bytes;
    a->stride     = stride;
    task->svc->log(BRAID_LOG_DEBUG, BRAID_LOWHOP_COMPONENT,
                   "rank %d: receive area now 2 banks x %d slots of %zu "
                   "bytes",
                   task->rank, a->nslots, slot_bytes);
    return BRAID_OK;
}

braid_status_t braid_lowhop_area_get_slow(braid_lowhop_area_t **area,
                                          braid_task_t *task, size_t need,
                                          size_t limit)
{
    braid_lowhop_area_t *a  = NULL;
    braid_status_t       st = area_state(&a, task);

    if (st != BRAID_OK)
        return st;
    if (a->nslots != task->size - 1)
        return task->svc->error(BRAID_ERR_INTERNAL,
                                "lowhop: receive area "
                                "made for %d ranks used by a %d-rank call",
                                a->nslots + 1, task->size);
    if (a->mem == NULL || a->slot_bytes < need) {
        st = area_resize(a, task, slot_size_for(need, limit));
        if (st != BRAID_OK)
            return st;
    }
    *area = a;
    return BRAID_OK;
}

void braid_lowhop_area_free(void *state, braid_tl_t *tl)
{
    braid_lowhop_area_t *a = state;
    (void)tl; /* the registered area is the core's */
    if (a == NULL)
        return;
    free(a->mate);
    free(a);
}

int braid_lowhop_mates_in(const braid_lowhop_area_t *a,
                          const unsigned char *got, int n)
{
    if (a->nmates <= 0)
        return a->nmates == 0;
    for (int k = 0; k < n - 1; k++)
        if (a->mate[k] && !got[k])
            return 0;
    return 1;
}

braid_status_t braid_lowhop_tl_progress(braid_task_t *task)
{
    const braid_tl_t *tl = task->tl;
    if (tl->ops->progress == NULL)
        return BRAID_OK;
    braid_status_t st = tl->ops->progress(tl->tcomm);
    return st == BRAID_INPROGRESS ? BRAID_OK : st; /* errors: the transport's
                                                      message stands */
}
