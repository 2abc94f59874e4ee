/* Rank-order reduction of n contributions, shared by every lowhop algorithm.
 *
 * Floating-point reduction is not associative, so the result's bits depend on
 * the order of the combinations.  Every rank folds left in rank order,
 *     ((src[0] op src[1]) op src[2]) ... op src[n-1],
 * whoever it is and whenever the contributions arrived: all ranks holding
 * this fold get the same bits.
 *
 * The fold runs block by block, all n sources over one block before the
 * next, so the accumulator stays in L1 instead of streaming through memory
 * n-1 times. */
#include <string.h>

#include "lowhop.h"

/* A multiple of every dtype size; small enough for L1 with the sources. */
#define FOLD_BLOCK_BYTES 16384

/* Folds block [first, first + cnt) of the sources into acc (which may be
 * src[0] or src[1], never src[2..]). */
static void fold_block(const braid_task_t *task, void *acc,
                       const void *const *src, int n, size_t first, size_t cnt)
{
    const braid_services_t *svc = task->svc;
    size_t                  off = first * task->dtsize;

    svc->reduce2(acc, (const char *)src[0] + off, (const char *)src[1] + off,
                 cnt, task->dtype, task->op);
    for (int i = 2; i < n; i++)
        svc->reduce(acc, (const char *)src[i] + off, cnt, task->dtype,
                    task->op);
}

/* The in-place case of a later rank: each block is built aside and copied
 * over.  Out of line so that the common path carries no 16 KiB frame (a
 * decode step's fold is a few elements; touching stack pages it does not
 * need costs it more than the arithmetic). */
static __attribute__((noinline)) void fold_aside(const braid_task_t *task,
                                                 void               *dst,
                                                 const void *const *src, int n,
                                                 size_t count)
{
    size_t dts = task->dtsize;
    size_t blk = FOLD_BLOCK_BYTES / dts;

    _Alignas(64) unsigned char tmp[FOLD_BLOCK_BYTES];
    for (size_t first = 0; first < count; first += blk) {
        size_t cnt = count - first < blk ? count - first : blk;
        fold_block(task, tmp, src, n, first, cnt);
        memcpy((char *)dst + first * dts, tmp, cnt * dts);
    }
}

void braid_lowhop_fold(const braid_task_t *task, void *dst,
                       const void *const *src, int n, size_t count)
{
    size_t dts = task->dtsize;
    size_t blk = FOLD_BLOCK_BYTES / dts;

    if (count == 0)
        return;
    if (n == 1) {
        if (dst != src[0])
            memcpy(dst, src[0], count * dts);
        return;
    }
    /* In place, dst is this rank's own contribution.  For ranks 0 and 1
     * reduce2 may write it directly (it reads both operands first); for a
     * later rank the accumulator would overwrite the contribution before it
     * is folded in, so the block is built aside and copied. */
    for (int i = 2; i < n; i++)
        if (src[i] == dst) {
            fold_aside(task, dst, src, n, count);
            return;
        }
    for (size_t first = 0; first < count; first += blk) {
        size_t cnt = count - first < blk ? count - first : blk;
        fold_block(task, (char *)dst + first * dts, src, n, first, cnt);
    }
}

braid_status_t braid_lowhop_local_result(braid_task_t *task)
{
    size_t len = task->count * task->dtsize;
    if (len > 0 && task->recvbuf != task->sendbuf)
        memcpy(task->recvbuf, task->sendbuf, len);
    return BRAID_OK;
}
