/* Helpers of the GPU test programs: the CUDA runtime opened at run time
 * (bench/cuda_mem.c), so that they build everywhere and skip, with the
 * reason, where there is no GPU. */
#ifndef BRAID_TESTS_GPU_COMMON_H
#define BRAID_TESTS_GPU_COMMON_H

#include <stddef.h>

#include <braid/cuda.h>

#include "cuda_mem.h"

#define GPU_SKIP 77 /* meson's "skipped" */

/* Selects this rank's device before braid_init, or prints
 * "SKIP: <prog>: <why>" and exits GPU_SKIP. */
void gpu_open_or_skip(const char *prog);

/* Device buffers and copies that exit on failure, naming what. */
void *gpu_alloc(size_t len);
void  gpu_put(void *dev, const void *host, size_t len);
void  gpu_get(void *host, const void *dev, size_t len);

/* A stream of our own, its synchronisation (returns the CUDA error), and an
 * asynchronous copy on it (kind 1: to the device, 2: to the host). */
cudaStream_t gpu_stream(void);
int          gpu_sync(cudaStream_t stream);
void         gpu_copy_async(void *dst, const void *src, size_t len, int kind,
                            cudaStream_t stream);

#endif
