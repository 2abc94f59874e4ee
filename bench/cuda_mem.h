/* Device memory for braid-bench -M cuda and the GPU tests, through the
 * CUDA runtime opened at run time (BRAID_CUDART_LIBRARY, else
 * libcudart.so and its versioned names): nothing here needs CUDA to build,
 * and a run without a GPU fails with the runtime's reason. */
#ifndef BRAID_BENCH_CUDA_MEM_H
#define BRAID_BENCH_CUDA_MEM_H

#include <stddef.h>

/* Opens the runtime and selects this process's device: the local rank
 * (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, else BRAID_RANK
 * or RANK) modulo the device count.  Call it before braid_init: the NCCL
 * plugin takes the device current then.  0, or -1 with why filled. */
int cm_open(char *why, size_t why_len);
int cm_device(void);

/* 0 on success, else -1 with the runtime's message in why. */
int  cm_alloc(void **dev, size_t len, char *why, size_t why_len);
void cm_free(void *dev);
int  cm_to_device(void *dev, const void *host, size_t len, char *why,
                  size_t why_len);
int  cm_to_host(void *host, const void *dev, size_t len, char *why,
                size_t why_len);
/* The runtime's functions by name (for programs that call more of CUDA
 * than this, e.g. streams), NULL if absent. */
void *cm_symbol(const char *name);

#endif
