/* Where a buffer lives: host memory, or CUDA device memory.
 *
 * braid never links CUDA.  A pointer can only be device memory once the
 * process has loaded the CUDA driver (libcuda.so.1: every CUDA program
 * does, whichever runtime it uses, static, shared or renamed as in
 * PyTorch's wheels), so until then every pointer is host memory and the
 * answer costs one look at the loader's object counter.  Once the driver
 * is in the process, its cuPointerGetAttributes says, per call: nothing is
 * cached about pointers, since memory is freed and reused. */
#ifndef BRAID_CORE_CUDA_DEVPTR_H
#define BRAID_CORE_CUDA_DEVPTR_H

#include <braid/braid.h>

typedef enum {
    BRAID_MEM_KIND_HOST = 0,  /* malloc'd, pinned or registered host memory */
    BRAID_MEM_KIND_DEVICE,    /* cudaMalloc'd or managed memory */
} braid_mem_kind_t;

/* *kind for ptr (NULL is host).  fn and what name the call and the buffer
 * in an error ("allreduce", "sendbuf"): an error only when the driver fails
 * to answer. */
braid_status_t braid_devptr_kind(braid_mem_kind_t *kind, const void *ptr,
                                 const char *fn, const char *what);
/* The kind of a call's buffers, looking for the driver once: both host or
 * both device (NULL buffers, as in a barrier or an empty call, go with the
 * other); BRAID_ERR_INVALID_ARG when they differ. */
braid_status_t braid_devptr_buffers(braid_mem_kind_t *kind,
                                    const void *sendbuf, const void *recvbuf,
                                    const char *fn);

/* Whether the CUDA driver is loaded in this process (for tests and logs). */
int braid_devptr_driver_loaded(void);

#endif
