/* BRAID_CHECK=1: every call's fingerprint (collective, count, dtype, op,
 * root, sequence number) is compared across ranks before anything is sent, so
 * a program that calls mismatched collectives gets an error naming the
 * difference instead of a hang or corrupt data.  It costs one out-of-band
 * allgather (TCP, tens of microseconds) per call: a debugging aid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/sig.h"
#include "util/log.h"

typedef struct fingerprint {
    uint64_t    seq;
    braid_sig_t sig;
    int32_t     valid; /* the rank's arguments passed validation */
    uint32_t    need;  /* memory types and stream order (cuda/route.c) */
} fingerprint_t;

static void describe(char *buf, size_t len, const fingerprint_t *f)
{
    if (!f->valid)
        snprintf(buf, len, "invalid arguments");
    else
        braid_sig_describe(buf, len, &f->sig);
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
    fingerprint_t mine;
    memset(&mine, 0, sizeof(mine)); /* compared with memcmp: padding too */
    mine.seq   = comm->seq;
    mine.sig   = braid_sig_make(coll, count, dtype, op, root);
    mine.valid = valid;
    mine.need  = need;

    fingerprint_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "BRAID_CHECK: out of memory");
    braid_status_t st =
        braid_bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
    for (int r = 0; st == BRAID_OK && r < comm->size; r++) {
        if (memcmp(&all[r], &all[0], sizeof(mine)) == 0)
            continue;
        char a[128], b[128];
        describe(a, sizeof(a), &all[0]);
        describe(b, sizeof(b), &all[r]);
        st = braid_error(BRAID_ERR_MISMATCH,
                         "BRAID_CHECK: call #%llu differs "
                         "between ranks: rank 0 calls %s, rank %d calls %s%s",
                         (unsigned long long)all[r].seq, a, r, b,
                         all[r].seq != all[0].seq ? " (and a different number "
                                                    "of earlier calls)"
                                                  : "");
    }
    free(all);
    return st;
}
