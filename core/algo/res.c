/* The resources of one (communicator, candidate): created with the
 * candidate, destroyed with the communicator (res.h). */
#include <stdlib.h>
#include <string.h>

#include "algo/res.h"

braid_res_t *braid_res_create(void) { return calloc(1, sizeof(braid_res_t)); }

void braid_res_destroy(braid_res_t *res, braid_tl_t *tl)
{
    if (res == NULL)
        return;
    braid_state_release(res);
    braid_scratch_release(res);
    braid_area_release(res, tl);
    free(res);
}

void *braid_res_zalloc(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, BRAID_RES_ALIGN, size ? size : 1) != 0)
        return NULL;
    memset(p, 0, size);
    return p;
}
