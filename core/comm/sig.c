/* Call signatures and progress records (sig.h). */
#include <stdio.h>
#include <string.h>

#include "comm/sig.h"

braid_sig_t braid_sig_unpack(uint64_t count, uint64_t packed)
{
    braid_sig_t s = {0};
    s.count       = count;
    s.coll        = (uint8_t)packed;
    s.dtype       = (uint8_t)(packed >> 8);
    s.op          = (uint8_t)(packed >> 16);
    s.root        = (int32_t)(uint32_t)(packed >> 32);
    return s;
}

int braid_sig_equal(const braid_sig_t *a, const braid_sig_t *b)
{
    return a->count == b->count && a->root == b->root && a->coll == b->coll &&
           a->dtype == b->dtype && a->op == b->op;
}

void braid_sig_describe(char *buf, size_t len, const braid_sig_t *s)
{
    braid_coll_t c  = (braid_coll_t)s->coll;
    const char  *dt = braid_dtype_name((braid_dtype_t)s->dtype);
    if (c == BRAID_COLL_BARRIER)
        snprintf(buf, len, "barrier");
    else if (c == BRAID_COLL_BROADCAST)
        snprintf(buf, len, "broadcast(count %llu, %s, root %d)",
                 (unsigned long long)s->count, dt, s->root);
    else if (c == BRAID_COLL_ALLGATHER)
        snprintf(buf, len, "allgather(count %llu, %s)",
                 (unsigned long long)s->count, dt);
    else
        snprintf(buf, len, "%s(count %llu, %s, %s)", braid_coll_name(c),
                 (unsigned long long)s->count, dt,
                 braid_op_name((braid_op_t)s->op));
}

void braid_progress_read(braid_progress_snap_t *out, braid_progress_t *p)
{
    memset(out, 0, sizeof(*out));
    out->entered   = atomic_load_explicit(&p->entered, memory_order_acquire);
    out->completed = atomic_load_explicit(&p->completed, memory_order_acquire);
    out->pid       = atomic_load_explicit(&p->pid, memory_order_relaxed);
    out->failed    = atomic_load_explicit(&p->failed, memory_order_relaxed);
    for (int i = 0; i < BRAID_HIST; i++) {
        braid_hist_t *h = &p->hist[i];
        uint64_t s1     = atomic_load_explicit(&h->seq1, memory_order_acquire);
        uint64_t c  = atomic_load_explicit(&h->count, memory_order_relaxed);
        uint64_t pk = atomic_load_explicit(&h->packed, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        /* Rewritten while we read: leave the entry out. */
        if (atomic_load_explicit(&h->seq1, memory_order_relaxed) != s1)
            continue;
        out->hist[i] = (braid_hist_snap_t){s1, c, pk};
    }
}

int braid_progress_sig(braid_sig_t *out, const braid_progress_snap_t *p,
                       uint64_t seq)
{
    const braid_hist_snap_t *h = &p->hist[seq & (BRAID_HIST - 1)];
    if (h->seq1 != seq + 1)
        return 0;
    *out = braid_sig_unpack(h->count, h->packed);
    return 1;
}
