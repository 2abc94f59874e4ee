/* The core's own dtype sizes and collective names, inline: the call path
 * reads them several times per call, where the exported braid_dtype_size
 * and braid_coll_name would each cost a call through the PLT. */
#ifndef BRAID_CORE_NAMES_H
#define BRAID_CORE_NAMES_H

#include <stddef.h>

#include <braid/braid.h>

extern const size_t      braid_dtype_sizes[BRAID_DTYPE_COUNT];
extern const char *const braid_coll_names[BRAID_COLL_COUNT];

static inline size_t braid_dtsize(braid_dtype_t dtype)
{
    return (unsigned)dtype < BRAID_DTYPE_COUNT ? braid_dtype_sizes[dtype] : 0;
}

static inline const char *braid_coll_str(braid_coll_t coll)
{
    return (unsigned)coll < BRAID_COLL_COUNT ? braid_coll_names[coll]
                                             : "invalid";
}

#endif
