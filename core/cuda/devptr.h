/* Where a buffer lives: host memory, or CUDA device memory.
 *
 * braid never links CUDA.  Device memory exists only in a process that has
 * the CUDA driver (libcuda.so.1), which every CUDA program -- static or
 * shared runtime, PyTorch's renamed one -- loads by that name through the
 * dynamic loader's search.  So the first query loads it the same way: if
 * it is not there, no device memory can ever exist in this process, every
 * pointer is host memory, and each later query costs one load of a flag.
 * If it is, cuPointerGetAttributes answers each query: nothing is cached
 * about pointers, since memory is freed and reused. */
#ifndef BRAID_CORE_CUDA_DEVPTR_H
#define BRAID_CORE_CUDA_DEVPTR_H

#include <stdatomic.h>

#include <braid/braid.h>

typedef enum {
    BRAID_MEM_KIND_HOST = 0, /* malloc'd, pinned or registered host memory */
    BRAID_MEM_KIND_DEVICE,   /* cudaMalloc'd or managed memory */
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

/* Whether the CUDA driver is loaded for the queries (tests and logs). */
int braid_devptr_driver_loaded(void);

/* 0 once it is known that no CUDA driver can be loaded (then every buffer
 * is host memory): lets the per-call path skip the queries with one load. */
extern _Atomic int braid_devptr_no_driver;
static inline int  braid_devptr_possible(void)
{
    return !atomic_load_explicit(&braid_devptr_no_driver,
                                 memory_order_relaxed);
}

#endif
