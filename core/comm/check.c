/* BRAID_CHECK=1: every call's fingerprint (collective, count, dtype, op,
 * root, sequence number) is compared across ranks before anything is sent, so
 * a program that calls mismatched collectives gets an error naming the
 * difference instead of a hang or corrupt data.  It costs one out-of-band
 * allgather (TCP, tens of microseconds) per call: a debugging aid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/log.h"

typedef struct fingerprint {
    uint64_t seq;
    uint64_t count;
    int32_t  coll, dtype, op, root;
    int32_t  valid; /* the rank's arguments passed validation */
    uint32_t need;  /* memory types and stream order (cuda/route.c) */
} fingerprint_t;

static void describe(char *buf, size_t len, const fingerprint_t *f)
{
    if (!f->valid) {
        snprintf(buf, len, "invalid arguments");
        return;
    }
    braid_coll_t c = (braid_coll_t)f->coll;
    if (c == BRAID_COLL_BARRIER)
        snprintf(buf, len, "barrier");
    else if (c == BRAID_COLL_BROADCAST)
        snprintf(buf, len, "broadcast(count %llu, %s, root %d)",
                 (unsigned long long)f->count,
                 braid_dtype_name((braid_dtype_t)f->dtype), f->root);
    else if (c == BRAID_COLL_ALLGATHER)
        snprintf(buf, len, "allgather(count %llu, %s)",
                 (unsigned long long)f->count,
                 braid_dtype_name((braid_dtype_t)f->dtype));
    else
        snprintf(buf, len, "%s(count %llu, %s, %s)", braid_coll_name(c),
                 (unsigned long long)f->count,
                 braid_dtype_name((braid_dtype_t)f->dtype),
                 braid_op_name((braid_op_t)f->op));
    size_t o = strlen(buf);
    if (f->need & BRAID_NEED_STREAM)
        snprintf(buf + o, len - o, " stream-ordered");
    else if (f->need & BRAID_MEM_BIT(BRAID_MEM_CUDA))
        snprintf(buf + o, len - o, " on device memory");
}

braid_status_t braid_check_call(braid_comm_t *comm, braid_coll_t coll,
                                size_t count, braid_dtype_t dtype,
                                braid_op_t op, int root, uint32_t need,
                                int valid)
{
    fingerprint_t mine = {0};
    mine.seq   = comm->seq;
    mine.count = count;
    mine.coll  = (int32_t)coll;
    /* Fields a collective ignores must not cause false alarms. */
    mine.dtype = coll == BRAID_COLL_BARRIER ? 0 : (int32_t)dtype;
    mine.op    = coll == BRAID_COLL_ALLREDUCE || coll == BRAID_COLL_REDUCE_SCATTER
                     ? (int32_t)op : 0;
    mine.root  = coll == BRAID_COLL_BROADCAST ? root : 0;
    mine.valid = valid;
    mine.need  = need;

    fingerprint_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "BRAID_CHECK: out of memory");
    braid_status_t st = braid_bootstrap_allgather(comm->bs, &mine, all,
                                                  sizeof(mine));
    for (int r = 0; st == BRAID_OK && r < comm->size; r++) {
        if (memcmp(&all[r], &all[0], sizeof(mine)) == 0)
            continue;
        char a[128], b[128];
        describe(a, sizeof(a), &all[0]);
        describe(b, sizeof(b), &all[r]);
        st = braid_error(BRAID_ERR_MISMATCH, "BRAID_CHECK: call #%llu differs "
                         "between ranks: rank 0 calls %s, rank %d calls %s%s",
                         (unsigned long long)all[r].seq, a, r, b,
                         all[r].seq != all[0].seq ? " (and a different number "
                         "of earlier calls)" : "");
    }
    free(all);
    return st;
}
