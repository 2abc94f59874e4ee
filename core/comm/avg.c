/* Integer BRAID_AVG without wraparound.
 *
 * The algorithms combine in the element type, so an i32 average of four
 * ranks of INT32_MAX would wrap before the division.  The core therefore
 * hands integer AVG to them as a SUM of 64-bit integers: each element is
 * widened into a scratch buffer, the collective runs in place on it, and
 * the exact sum divided by the communicator size (C's division, toward
 * zero, as NCCL's ncclAvg) is written to the caller's receive buffer once
 * the call has completed.  i32 and u8 take one i64 lane per element; i64
 * takes two, the high half (signed) and the low 32 bits (unsigned), whose
 * sums cannot overflow for fewer than 2^31 ranks and combine into the exact
 * 96-bit sum.  Every rank converts the same way, so results stay bitwise
 * identical; the candidate is the one chosen for the wider size.  It costs
 * a scratch allocation and two passes per call, for integer AVG only. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/log.h"

struct braid_widen {
    int64_t      *wide;      /* elements x lanes (x size for reduce_scatter) */
    void         *user_recv; /* where the result goes */
    braid_dtype_t dtype;     /* the caller's */
    size_t        count;     /* result elements */
    size_t        first;     /* reduce_scatter: this rank's first element */
    int           lanes;
};

int braid_avg_needs_widen(braid_coll_t coll, size_t count, braid_dtype_t dtype,
                          braid_op_t op, int size)
{
    return op == BRAID_AVG && size > 1 && count > 0 &&
           (dtype == BRAID_I32 || dtype == BRAID_I64 || dtype == BRAID_U8) &&
           (coll == BRAID_COLL_ALLREDUCE || coll == BRAID_COLL_REDUCE_SCATTER);
}

static void widen_elems(int64_t *w, const void *src, size_t n,
                        braid_dtype_t dtype)
{
    switch (dtype) {
    case BRAID_I32: {
        const int32_t *s = src;
        for (size_t i = 0; i < n; i++)
            w[i] = s[i];
        break;
    }
    case BRAID_U8: {
        const uint8_t *s = src;
        for (size_t i = 0; i < n; i++)
            w[i] = s[i];
        break;
    }
    default: { /* i64: [high half, low 32 bits] */
        const int64_t *s = src;
        for (size_t i = 0; i < n; i++) {
            w[2 * i]     = s[i] >> 32; /* arithmetic: GCC and clang */
            w[2 * i + 1] = (int64_t)((uint64_t)s[i] & 0xffffffffu);
        }
        break;
    }
    }
}

braid_status_t braid_avg_widen(braid_call_t *call, braid_comm_t *comm,
                               const char *fn, braid_coll_t coll,
                               const void **sendbuf, void **recvbuf,
                               size_t *count, braid_dtype_t *dtype,
                               braid_op_t *op)
{
    int    lanes  = *dtype == BRAID_I64 ? 2 : 1;
    size_t blocks = coll == BRAID_COLL_REDUCE_SCATTER ? (size_t)comm->size : 1;
    size_t elems, bytes, wide_count;
    if (__builtin_mul_overflow(*count, blocks, &elems) ||
        __builtin_mul_overflow(*count, (size_t)lanes, &wide_count) ||
        __builtin_mul_overflow(elems, sizeof(int64_t) * (size_t)lanes, &bytes))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s: count %zu is too large "
                           "for an integer average, which is computed in "
                           "64-bit integers",
                           fn, *count);
    braid_widen_t *w   = calloc(1, sizeof(*w));
    int64_t       *buf = malloc(bytes);
    if (w == NULL || buf == NULL) {
        free(w);
        free(buf);
        return braid_error(BRAID_ERR_NO_MEMORY,
                           "%s: out of memory for the "
                           "%zu-byte buffer of an integer average",
                           fn, bytes);
    }
    widen_elems(buf, *sendbuf, elems, *dtype);
    w->wide      = buf;
    w->user_recv = *recvbuf;
    w->dtype     = *dtype;
    w->count     = *count;
    w->lanes     = lanes;
    w->first     = blocks > 1 ? (size_t)comm->rank * *count : 0;
    call->widen  = w;
    /* In place on the scratch buffer: reduce_scatter's in-place form puts
     * this rank's block at rank * recvcount. */
    *sendbuf = buf;
    *recvbuf = buf + w->first * (size_t)lanes;
    *count   = wide_count;
    *dtype   = BRAID_I64;
    *op      = BRAID_SUM;
    return BRAID_OK;
}

void braid_avg_finish(braid_call_t *call, int size, braid_status_t st)
{
    braid_widen_t *w = call->widen;
    if (w == NULL)
        return;
    call->widen        = NULL;
    const int64_t *sum = w->wide + w->first * (size_t)w->lanes;
    for (size_t i = 0; st == BRAID_OK && i < w->count; i++) {
        switch (w->dtype) {
        case BRAID_I32:
            ((int32_t *)w->user_recv)[i] = (int32_t)(sum[i] / size);
            break;
        case BRAID_U8:
            ((uint8_t *)w->user_recv)[i] = (uint8_t)(sum[i] / size);
            break;
        default: {
            __int128 s =
                (__int128)sum[2 * i] * ((__int128)1 << 32) + sum[2 * i + 1];
            ((int64_t *)w->user_recv)[i] = (int64_t)(s / size);
            break;
        }
        }
    }
    free(w->wide);
    free(w);
}
