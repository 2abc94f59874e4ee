/* The one-stage exchange (exchange.h): its state, the puts to every peer,
 * the arrivals, and what it tells the core's waiting policy. */
#include <stdint.h>
#include <string.h>

#include "exchange.h"
#include "lowhop.h"

/* Arrival marks in whole words (seen is 8-byte aligned, behind the
 * pointers), so that a call clears them with a store or two instead of a
 * call to memset. */
static size_t seen_bytes(int n) { return ((size_t)n + 7) & ~(size_t)7; }

/* The arrays of an exchange's state, right behind it in one block of
 * xchg_size(n) bytes. */
static size_t xchg_size(int n)
{
    return sizeof(braid_lowhop_xchg_t) + (size_t)n * sizeof(braid_treq_t) +
           (size_t)n * sizeof(void *) + seen_bytes(n);
}

static void xchg_layout(braid_lowhop_xchg_t *x, int n)
{
    x->reqs = (braid_treq_t *)(x + 1);
    x->src  = (const void **)(x->reqs + n);
    x->seen = (unsigned char *)(x->src + n);
}

braid_status_t braid_lowhop_xchg_start(braid_task_t *task, size_t len,
                                       size_t cap, const char *what)
{
    int            n = task->size;
    int            recycled;
    braid_status_t st;

    if (len > cap)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "lowhop: %s takes at "
                                "most %zu bytes per rank, this call has %zu "
                                "(its receive area holds a whole message per "
                                "peer)",
                                what, cap, len);
    if ((st = task->svc->state_get(task, xchg_size(n), &recycled)) != BRAID_OK)
        return st;
    braid_lowhop_xchg_t *x = task->priv;
    xchg_layout(x, n);
    if (recycled) {
        /* The previous call's: all its requests ended (completed, or
         * cancelled by finish) and its sources are rewritten before they
         * are read, so only the counters and the arrival marks start again
         * from zero -- not the whole block. */
        x->posted = x->nseen = x->reduced = x->sent = 0;
        x->polls                                    = 0;
        for (size_t i = 0, end = seen_bytes(n); i < end; i += 8)
            memcpy(x->seen + i, &(uint64_t){0}, 8);
    }
    x->area = NULL;
    if ((len == 0 && task->coll != BRAID_COLL_BARRIER) || n == 1)
        return BRAID_OK; /* nothing to exchange (progress copies) */
    if ((st = braid_lowhop_area_get(&x->area, task, len, cap)) != BRAID_OK)
        return st; /* finish() gives the state back */
    x->mates_left = x->area->nmates;
    x->bank       = (int)(x->area->calls++ & 1);
    x->flag       = braid_lowhop_flag(task);
    return BRAID_OK;
}

braid_status_t braid_lowhop_xchg_post(braid_task_t        *task,
                                      braid_lowhop_xchg_t *x, const void *src,
                                      size_t len, size_t stride)
{
    int n = task->size;

    /* rank+1 first: spreads the writes so no rank is everyone's first */
    for (int i = 1, j = task->rank + 1; i < n; i++, j++) {
        if (j == n)
            j = 0;
        braid_status_t st = braid_lowhop_put(
            task, x->area, j, x->bank, (const char *)src + (size_t)j * stride,
            len, x->flag, &x->reqs[i - 1]);
        if (st != BRAID_OK)
            return st;
    }
    x->posted = 1;
    return BRAID_OK;
}

braid_status_t braid_lowhop_xchg_drive(braid_task_t        *task,
                                       braid_lowhop_xchg_t *x, const void *src,
                                       size_t len, size_t stride)
{
    braid_status_t st;

    if (!x->posted &&
        (st = braid_lowhop_xchg_post(task, x, src, len, stride)) != BRAID_OK)
        return st;
    if (!x->sent) {
        st = task->svc->reqs_test(task, x->reqs, task->size - 1, NULL);
        if (st != BRAID_OK && st != BRAID_INPROGRESS)
            return st;
        x->sent = st == BRAID_OK;
    }
    return BRAID_OK;
}

braid_status_t braid_lowhop_xchg_more(braid_task_t        *task,
                                      braid_lowhop_xchg_t *x)
{
    if ((x->polls++ & (BRAID_LOWHOP_TL_POLLS - 1)) != 0)
        return BRAID_INPROGRESS;
    braid_status_t st = braid_lowhop_tl_progress(task);
    return st != BRAID_OK ? st : BRAID_INPROGRESS;
}

int braid_lowhop_xchg_mates_in(const braid_task_t        *task,
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

braid_status_t braid_lowhop_xchg_open(braid_task_t        *task,
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
        task->svc->reqs_cancel(task, x->reqs, task->size - 1);
    task->svc->state_put(task);
}
