/* Names and sizes of dtypes, ops and collectives. */
#include "util/names.h"
#include "util/api.h"

#include <braid/braid.h>

static const char *const dtype_names[] = {"f32", "f64", "f16", "bf16",
                                          "i32", "i64", "u8"};
const size_t braid_dtype_sizes[BRAID_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
const char *const        braid_coll_names[BRAID_COLL_COUNT] = {
           "allreduce", "reduce_scatter", "allgather", "broadcast", "barrier"};

BRAID_API const char *braid_dtype_name(braid_dtype_t dtype)
{
    return (unsigned)dtype < BRAID_DTYPE_COUNT ? dtype_names[dtype]
                                               : "invalid";
}

BRAID_API size_t braid_dtype_size(braid_dtype_t dtype)
{
    return (unsigned)dtype < BRAID_DTYPE_COUNT ? braid_dtype_sizes[dtype] : 0;
}

BRAID_API const char *braid_op_name(braid_op_t op)
{
    return (unsigned)op < BRAID_OP_COUNT ? op_names[op] : "invalid";
}

BRAID_API const char *braid_coll_name(braid_coll_t coll)
{
    return (unsigned)coll < BRAID_COLL_COUNT ? braid_coll_names[coll]
                                             : "invalid";
}
