/* The receive area of the lowhop algorithms: creation, collective growth,
 * puts into peers' slots, request and transport progress.  slots.h has the
 * layout and the argument for why growth and bank reuse are safe. */
#include <stdlib.h>
#include <string.h>

#include "lowhop.h"
#include "slots.h"

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

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

/* The state of this (communicator, candidate), created on first use. */
static braid_status_t area_state(braid_lowhop_area_t **area,
                                 braid_task_t *task)
{
    braid_lowhop_area_t *a = *task->comm_state;

    if (a == NULL) {
        a = calloc(1, sizeof(*a));
        if (a != NULL)
            a->mate = calloc((size_t)task->size, 1);
        if (a == NULL || a->mate == NULL) {
            free(a);
            return task->svc->error(BRAID_ERR_NO_MEMORY, "lowhop: out of "
                                    "memory for the receive-area state");
        }
        a->nslots = task->size - 1;
        a->nmates = braid_lowhop_slot_mates(a->mate, task);
        *task->comm_state = a;
    }
    *area = a;
    return BRAID_OK;
}

/* Replaces the area by one whose slots hold slot_bytes.  Collective: every
 * rank calls it at the same call (slots.h). */
static braid_status_t area_resize(braid_lowhop_area_t *a, braid_task_t *task,
                                  size_t slot_bytes)
{
    const braid_tl_t *tl = task->tl;
    size_t stride = round_up(BRAID_LOWHOP_FLAG_BYTES + slot_bytes,
                             BRAID_LOWHOP_LINE);
    size_t len;

    if (__builtin_mul_overflow(stride, (size_t)(2 * a->nslots), &len))
        return task->svc->error(BRAID_ERR_NO_MEMORY, "lowhop: a receive area "
                                "of 2 x %d slots of %zu bytes overflows the "
                                "address space", a->nslots, slot_bytes);
    /* The new area first, the old one freed after: a transport's mem_free
     * may wait for peers (roce waits for its puts' signals, which need the
     * peers' receives), and a peer that grew first sits in the collective
     * mem_alloc, not progressing -- freeing first would stall both until the
     * timeout.
     * Once mem_alloc has returned, every rank is past it and progresses. */
    braid_rmem_t fresh;
    memset(&fresh, 0, sizeof(fresh));
    braid_status_t st = tl->ops->mem_alloc(tl->tcomm, len, &fresh);
    if (st != BRAID_OK) {
        /* The transport's message (why) stands; add what was asked for. */
        task->svc->log(BRAID_LOG_ERROR, BRAID_LOWHOP_COMPONENT, "rank %d: "
                       "cannot allocate a receive area of %zu bytes on %s "
                       "(2 banks x %d peers x %zu-byte slots)", task->rank,
                       len, tl->ops->name, a->nslots, slot_bytes);
        return st;
    }
    if (fresh.local == NULL || fresh.len < len) {
        tl->ops->mem_free(tl->tcomm, &fresh);
        return task->svc->error(BRAID_ERR_TRANSPORT, "lowhop: %s mem_alloc "
                                "of %zu bytes returned a smaller area",
                                tl->ops->name, len);
    }
    if (a->mem.local != NULL)
        tl->ops->mem_free(tl->tcomm, &a->mem);
    a->mem = fresh;
    a->slot_bytes = slot_bytes;
    a->stride     = stride;
    task->svc->log(BRAID_LOG_DEBUG, BRAID_LOWHOP_COMPONENT,
                   "rank %d: receive area on %s now %zu bytes (%zu-byte "
                   "slots)", task->rank, tl->ops->name, len, slot_bytes);
    return BRAID_OK;
}

braid_status_t braid_lowhop_area_get(braid_lowhop_area_t **area,
                                     braid_task_t *task, size_t need,
                                     size_t limit)
{
    braid_lowhop_area_t *a = NULL;
    braid_status_t       st = area_state(&a, task);

    if (st != BRAID_OK)
        return st;
    if (a->nslots != task->size - 1)
        return task->svc->error(BRAID_ERR_INTERNAL, "lowhop: receive area "
                                "made for %d ranks used by a %d-rank call",
                                a->nslots + 1, task->size);
    if (a->mem.local == NULL || a->slot_bytes < need) {
        braid_status_t st = area_resize(a, task, slot_size_for(need, limit));
        if (st != BRAID_OK)
            return st;
    }
    *area = a;
    return BRAID_OK;
}

void braid_lowhop_area_free(void *state, braid_tl_t *tl)
{
    braid_lowhop_area_t *a = state;
    if (a == NULL)
        return;
    if (a->mem.local != NULL && tl != NULL)
        tl->ops->mem_free(tl->tcomm, &a->mem);
    free(a->spare);
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

int braid_lowhop_slot_mates(unsigned char *mate, const braid_task_t *task)
{
    int            n  = task->size;
    unsigned char *by_rank;
    int            count;

    memset(mate, 0, (size_t)(n > 1 ? n - 1 : 0));
    if (task->topo == NULL)
        return -1;
    if ((by_rank = calloc((size_t)n, 1)) == NULL)
        return -1; /* unknown: no hint, which is always correct */
    count = task->svc->cpu_mates(task->topo, task->rank, by_rank);
    for (int k = 0; count > 0 && k < n - 1; k++)
        mate[k] = by_rank[braid_lowhop_slot_source(k, task->rank, n)];
    free(by_rank);
    return count;
}

braid_status_t braid_lowhop_put(braid_task_t *task, braid_lowhop_area_t *a,
                                int peer, int bank, const void *src,
                                size_t len, uint64_t flag, braid_treq_t *req)
{
    const braid_tl_t *tl = task->tl;
    int    slot = braid_lowhop_slot_index(task->rank, peer, task->size);
    size_t off  = braid_lowhop_slot_off(a, bank, slot);

    /* A failing transport has already said what and why (svc->error);
     * re-raising here would replace its message with a vaguer one. */
    return tl->ops->put_signal(tl->tcomm, &a->mem, peer,
                               off + BRAID_LOWHOP_FLAG_BYTES, src, len, off,
                               flag, req);
}

braid_status_t braid_lowhop_reqs_test(braid_task_t *task, braid_treq_t *reqs,
                                      int n, int *ndone)
{
    const braid_tl_t *tl   = task->tl;
    braid_status_t    done = BRAID_OK;
    int               nd   = 0;

    for (int i = 0; i < n; i++) {
        if (reqs[i].active) {
            braid_status_t st = tl->ops->test(tl->tcomm, &reqs[i]);
            if (st == BRAID_INPROGRESS) {
                done = BRAID_INPROGRESS;
                continue;
            }
            if (st != BRAID_OK)
                return st; /* the transport named the peer and the cause */
            reqs[i].active = 0;
        }
        nd++;
    }
    if (ndone != NULL)
        *ndone = nd;
    return done;
}

void braid_lowhop_reqs_cancel(braid_task_t *task, braid_treq_t *reqs, int n)
{
    const braid_tl_t *tl = task->tl;

    for (int i = 0; i < n; i++)
        if (reqs[i].active)
            tl->ops->cancel(tl->tcomm, &reqs[i]);
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

braid_status_t braid_lowhop_priv_alloc(braid_task_t *task, size_t size)
{
    braid_lowhop_area_t *a = NULL;
    braid_status_t       st = area_state(&a, task);

    if (st != BRAID_OK)
        return st;
    if (a->spare != NULL && a->spare_size >= size) {
        task->priv = a->spare;
        a->spare   = NULL;
        memset(task->priv, 0, size);
        a->priv_size = a->spare_size;
        return BRAID_OK;
    }
    a->priv_size = size;
    task->priv = calloc(1, size);
    if (task->priv == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY, "lowhop: out of memory "
                                "for the state of a call on %d ranks",
                                task->size);
    return BRAID_OK;
}

braid_status_t braid_lowhop_local_result(braid_task_t *task)
{
    size_t len = task->count * task->dtsize;
    if (len > 0 && task->recvbuf != task->sendbuf)
        memcpy(task->recvbuf, task->sendbuf, len);
    return BRAID_OK;
}

void braid_lowhop_priv_free(braid_task_t *task)
{
    braid_lowhop_area_t *a = *task->comm_state;

    if (a != NULL && a->spare == NULL) {
        a->spare      = task->priv;
        a->spare_size = a->priv_size;
    } else {
        free(task->priv);
    }
    task->priv = NULL;
}

/* The arrays of an exchange's state, right behind it in one block of
 * xchg_size(n) bytes. */
static size_t xchg_size(int n)
{
    return sizeof(braid_lowhop_xchg_t) + (size_t)n * sizeof(braid_treq_t) +
           (size_t)n * sizeof(void *) + (size_t)n;
}

static void xchg_layout(braid_lowhop_xchg_t *x, int n)
{
    x->reqs = (braid_treq_t *)(x + 1);
    x->src  = (const void **)(x->reqs + n);
    x->seen = (unsigned char *)(x->src + n);
}

/* The previous call's exchange state, when it can serve this one: all its
 * requests ended (completed, or cancelled by finish) and its sources are
 * rewritten before they are read, so only the counters and the arrival
 * marks start again from zero -- not the whole block, as priv_alloc would.
 * Also the area must be in place and big enough. */
static braid_lowhop_xchg_t *xchg_reuse(braid_task_t *task, size_t size,
                                       size_t len)
{
    braid_lowhop_area_t *a = *task->comm_state;
    int                  n = task->size;

    if (a == NULL || a->spare == NULL || a->spare_size < size ||
        a->mem.local == NULL || a->slot_bytes < len || a->nslots != n - 1)
        return NULL;
    braid_lowhop_xchg_t *x = a->spare;
    a->spare     = NULL;
    a->priv_size = a->spare_size;
    x->area   = a; /* NULL in a spare from a call with nothing to send */
    xchg_layout(x, n);
    x->posted = x->nseen = x->reduced = x->sent = 0;
    x->mates_left = a->nmates;
    memset(x->seen, 0, (size_t)n);
    task->priv = x;
    return x;
}

braid_status_t braid_lowhop_xchg_start(braid_task_t *task, size_t len,
                                       size_t cap, const char *what)
{
    int            n = task->size;
    braid_status_t st;

    if (len > cap)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED, "lowhop: %s takes at "
                                "most %zu bytes per rank, this call has %zu "
                                "(its receive area holds a whole message per "
                                "peer)", what, cap, len);
    int exchange = (len != 0 || task->coll == BRAID_COLL_BARRIER) && n > 1;
    size_t size = xchg_size(n);
    braid_lowhop_xchg_t *x = exchange ? xchg_reuse(task, size, len) : NULL;
    if (x == NULL) {
        if ((st = braid_lowhop_priv_alloc(task, size)) != BRAID_OK)
            return st;
        x = task->priv;
        xchg_layout(x, n);
        if (!exchange)
            return BRAID_OK; /* nothing to exchange (progress copies) */
        st = braid_lowhop_area_get(&x->area, task, len, cap);
        if (st != BRAID_OK)
            return st; /* finish() frees the state */
        x->mates_left = x->area->nmates;
    }
    x->bank = (int)(x->area->calls++ & 1);
    x->flag = braid_lowhop_flag(task);
    return BRAID_OK;
}

braid_status_t braid_lowhop_xchg_post(braid_task_t *task,
                                      braid_lowhop_xchg_t *x, const void *src,
                                      size_t len, size_t stride)
{
    int n = task->size;

    /* rank+1 first: spreads the writes so no rank is everyone's first */
    for (int i = 1, j = task->rank + 1; i < n; i++, j++) {
        if (j == n)
            j = 0;
        braid_status_t st = braid_lowhop_put(
            task, x->area, j, x->bank,
            (const char *)src + (size_t)j * stride, len, x->flag,
            &x->reqs[i - 1]);
        if (st != BRAID_OK)
            return st;
    }
    x->posted = 1;
    return BRAID_OK;
}

braid_status_t braid_lowhop_xchg_drive(braid_task_t *task,
                                       braid_lowhop_xchg_t *x,
                                       const void *src, size_t len,
                                       size_t stride)
{
    braid_status_t st;

    if (!x->posted &&
        (st = braid_lowhop_xchg_post(task, x, src, len, stride)) != BRAID_OK)
        return st;
    if ((st = braid_lowhop_tl_progress(task)) != BRAID_OK)
        return st;
    if (!x->sent) {
        st = braid_lowhop_reqs_test(task, x->reqs, task->size - 1, NULL);
        if (st != BRAID_OK && st != BRAID_INPROGRESS)
            return st;
        x->sent = st == BRAID_OK;
    }
    return BRAID_OK;
}

int braid_lowhop_xchg_mates_in(const braid_task_t *task,
                               const braid_lowhop_xchg_t *x)
{
    const braid_lowhop_area_t *a = x->area;

    if (a == NULL || a->nmates < 0)
        return 0;
    for (int k = 0; k < task->size - 1; k++)
        if (a->mate[k] && braid_lowhop_arrived(a, x->bank, k, x->flag) <= 0)
            return 0;
    return 1;
}

braid_status_t braid_lowhop_xchg_open(braid_task_t *task,
                                      braid_lowhop_xchg_t *x, const void *src,
                                      size_t len, size_t stride,
                                      braid_wait_t *wait)
{
    braid_status_t st;

    if (x->area == NULL)
        return BRAID_OK;
    if ((st = braid_lowhop_xchg_post(task, x, src, len, stride)) != BRAID_OK)
        return st;
    /* Only the mates' flags: the other CPUs' lines are left alone until
     * the first progress (see xchg_arrived).  Without mates the report
     * would change nothing (the core has nobody to yield to), and this is
     * every small call's path: skip it. */
    if (x->area->nmates > 0 && braid_lowhop_xchg_mates_in(task, x))
        *wait = BRAID_WAIT_REMOTE;
    return BRAID_OK;
}

/* Looks at slot k's flag once: 1 (and counts it seen) when its data
 * arrived, 0 when not yet, -1 when its writer called something else. */
static inline int xchg_look(braid_lowhop_xchg_t *x, int k)
{
    int got = braid_lowhop_arrived(x->area, x->bank, k, x->flag);
    if (got < 0) {
        x->odd = k;
    } else if (got > 0) {
        x->seen[k] = 1;
        x->nseen++;
        x->mates_left -= x->area->mate[k];
    }
    return got;
}

int braid_lowhop_xchg_arrived(braid_task_t *task, braid_lowhop_xchg_t *x,
                              braid_wait_t *wait)
{
    int                        n = task->size;
    const braid_lowhop_area_t *a = x->area;

    /* While a peer on this CPU has not delivered, the call cannot finish
     * before this rank yields to it: leave the other CPUs' lines alone.
     * Reading one now only pulls it over while its writer may still be
     * about to write it, and it must come over again after the hand-off. */
    if (x->mates_left > 0) {
        for (int k = 0; k < n - 1; k++) {
            if (!a->mate[k] || x->seen[k])
                continue;
            if (xchg_look(x, k) < 0)
                return -1;
        }
        if (x->mates_left > 0)
            return 0;
    }
    for (int k = 0; k < n - 1 && x->nseen < n - 1; k++) {
        if (x->seen[k])
            continue;
        if (xchg_look(x, k) < 0)
            return -1;
    }
    if (x->nseen == n - 1)
        return 1;
    if (x->mates_left == 0)
        *wait = BRAID_WAIT_REMOTE;
    return 0;
}

void braid_lowhop_xchg_finish(braid_task_t *task)
{
    braid_lowhop_xchg_t *x = task->priv;

    /* The puts read the caller's send buffer, which is the caller's again
     * once the call returns, error or not.  (sent: all are known done.) */
    if (x != NULL && !x->sent)
        braid_lowhop_reqs_cancel(task, x->reqs, task->size - 1);
    braid_lowhop_priv_free(task);
}
