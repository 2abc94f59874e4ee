/* Routing by memory kind (see route.h).  The selector then offers a call
 * only to candidates whose mem_types take route->need. */
#include "cuda/route.h"
#include "select/select.h"
#include "util/log.h"

braid_status_t braid_route_call(braid_route_t *route, braid_coll_t coll,
                                const void *sendbuf, const void *recvbuf,
                                size_t bytes, int on_stream, void *stream)
{
    const char      *fn   = braid_coll_name(coll);
    braid_mem_kind_t kind = BRAID_MEM_KIND_HOST;
    braid_status_t   st;
    braid_route_host(route);
    route->on_stream = on_stream;
    route->stream    = stream;
    if (bytes > 0 &&
        (st = braid_devptr_buffers(&kind, sendbuf, recvbuf, fn)) != BRAID_OK)
        return st;
    if (on_stream && bytes > 0 && kind != BRAID_MEM_KIND_DEVICE)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s_cuda: the buffers are "
                           "host memory; a stream-ordered call takes CUDA "
                           "device memory (use braid_%s for host memory)",
                           fn, fn);
    if (kind == BRAID_MEM_KIND_DEVICE || on_stream) {
        route->mem  = BRAID_MEM_CUDA;
        route->need = BRAID_MEM_BIT(BRAID_MEM_CUDA) |
                      (on_stream ? BRAID_NEED_STREAM : 0);
    }
    return BRAID_OK;
}
