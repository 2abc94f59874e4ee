/* NCCL's and CUDA's errors as braid status codes, with their own words.
 * Every error of the plugin goes through braid_nccl_fail, which keeps the
 * message (per thread) so that a communicator that fails can repeat it to
 * later calls. */
#include <stdio.h>

#include "nccl.h"

static __thread char last[512];

braid_status_t braid_nccl_fail(braid_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last, sizeof(last), fmt, ap);
    va_end(ap);
    return braid_nccl_host.error(st, "%s", last);
}

const char *braid_nccl_last_error(void) { return last; }

static braid_status_t status_of(ncclResult_t res)
{
    switch (res) {
    case ncclSuccess: return BRAID_OK;
    case ncclInProgress: return BRAID_INPROGRESS;
    case ncclRemoteError: return BRAID_ERR_PEER;      /* a peer failed */
    case ncclSystemError: return BRAID_ERR_TRANSPORT; /* socket, network */
    case ncclUnhandledCudaError: return BRAID_ERR_TRANSPORT;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return BRAID_ERR_INVALID_ARG;
    case ncclInternalError:
    default: return BRAID_ERR_INTERNAL;
    }
}

braid_status_t braid_nccl_error(const braid_nccl_lib_t *lib, ncclComm_t comm,
                                ncclResult_t res, const char *what)
{
    const char *name =
        lib->get_error_string ? lib->get_error_string(res) : NULL;
    /* The last error names the cause ("Duplicate GPU detected ..."); it
     * exists since NCCL 2.13. */
    const char *detail =
        lib->get_last_error ? lib->get_last_error(comm) : NULL;
    return braid_nccl_fail(status_of(res), "%s: NCCL error %d (%s)%s%s", what,
                           (int)res, name ? name : "unknown",
                           detail && *detail ? ": " : "",
                           detail && *detail ? detail : "");
}

braid_status_t braid_nccl_cuda_error(const braid_nccl_lib_t *lib,
                                     cudaError_t err, const char *what)
{
    const char *msg = lib->rt_error_string ? lib->rt_error_string(err) : NULL;
    braid_status_t st = err == cudaErrorMemoryAllocation ? BRAID_ERR_NO_MEMORY
                        : err == cudaErrorInvalidValue ? BRAID_ERR_INVALID_ARG
                                                       : BRAID_ERR_TRANSPORT;
    return braid_nccl_fail(st, "%s: CUDA error %d (%s)", what, err,
                           msg ? msg : "unknown");
}
