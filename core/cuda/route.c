/* Routing by memory kind.
 *
 * Plugin ABI 3 has no memory types: no candidate can say that it takes
 * device memory or enqueues on a stream, so every such call is refused
 * here with the reason, before a host algorithm could touch a device
 * pointer.  ABI 4's memory types (an algorithm's mem_types mask, the
 * task's send_mem/recv_mem) replace the refusal with a filter in the
 * selection. */
#include "comm/comm.h"
#include "cuda/route.h"
#include "util/log.h"

braid_status_t braid_route_call(braid_route_t *route,
                                const struct braid_comm *comm,
                                braid_coll_t coll, const void *sendbuf,
                                const void *recvbuf, size_t bytes,
                                int on_stream, void *stream)
{
    const char    *fn = braid_coll_name(coll);
    braid_status_t st;
    (void)comm;
    route->mem       = BRAID_MEM_KIND_HOST;
    route->on_stream = on_stream;
    route->stream    = stream;
    if (bytes > 0 &&
        (st = braid_devptr_buffers(&route->mem, sendbuf, recvbuf, fn)) !=
            BRAID_OK)
        return st;
    if (on_stream && bytes > 0 && route->mem != BRAID_MEM_KIND_DEVICE)
        return braid_error(BRAID_ERR_INVALID_ARG, "%s_cuda: the buffers are "
                           "host memory; a stream-ordered call takes CUDA "
                           "device memory (use braid_%s for host memory)", fn,
                           fn);
    if (route->mem == BRAID_MEM_KIND_DEVICE || on_stream)
        return braid_error(BRAID_ERR_NOT_SUPPORTED, "%s%s: %s, and no "
                           "candidate of this communicator %s (plugin ABI 3 "
                           "has no memory types; see braid-info for the nccl "
                           "plugin)", fn, on_stream ? "_cuda" : "",
                           route->mem == BRAID_MEM_KIND_DEVICE
                               ? "the buffers are CUDA device memory"
                               : "a stream-ordered call",
                           on_stream ? "enqueues on a CUDA stream"
                                     : "takes CUDA device memory");
    return BRAID_OK;
}
