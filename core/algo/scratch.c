/* Scratch memory (svc->scratch_get, scratch_put): one buffer per
 * (communicator, candidate), grown to the largest call so far and kept, so
 * that calls do not allocate.  Its contents do not survive a growth: what
 * an algorithm keeps between calls belongs in its comm_state. */
#include <stdlib.h>

#include "algo/res.h"

static void *alloc_aligned(size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, BRAID_RES_ALIGN, bytes ? bytes : 1) == 0 ? p
                                                                       : NULL;
}

braid_status_t braid_scratch_get(braid_task_t *task, size_t bytes, void **buf)
{
    braid_res_t *r = task->res;

    *buf = NULL;
    if (bytes == 0)
        return BRAID_OK;
    if (r == NULL || r->scratch_busy) {
        *buf = alloc_aligned(bytes);
    } else {
        if (r->scratch_cap < bytes) {
            void *grown = alloc_aligned(bytes);
            if (grown != NULL) {
                free(r->scratch);
                r->scratch     = grown;
                r->scratch_cap = bytes;
            }
        }
        if (r->scratch_cap >= bytes) {
            r->scratch_busy = 1;
            *buf            = r->scratch;
        }
    }
    if (*buf == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY,
                                "out of memory for "
                                "%zu bytes of scratch",
                                bytes);
    return BRAID_OK;
}

void braid_scratch_put(braid_task_t *task, void *buf)
{
    braid_res_t *r = task->res;

    if (buf == NULL)
        return;
    if (r != NULL && buf == r->scratch)
        r->scratch_busy = 0;
    else
        free(buf);
}

void braid_scratch_release(braid_res_t *res)
{
    free(res->scratch);
    res->scratch     = NULL;
    res->scratch_cap = 0;
}
