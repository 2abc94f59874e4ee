/* Where a buffer lives: the memory-type detection hook.  Every call's
 * buffers go through it, and the selector offers only candidates that take
 * the types it reports (an algorithm's mem_types).  This build knows host
 * memory only; a CUDA build asks the driver here. */
#include "comm/comm.h"

braid_mem_t braid_mem_type_of(const void *ptr)
{
    (void)ptr;
    return BRAID_MEM_HOST;
}
