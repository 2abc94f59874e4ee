/* Helpers of the GPU test programs (see gpu_common.h). */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"

void gpu_open_or_skip(const char *prog)
{
    char why[256];
    if (cm_open(why, sizeof(why)) != 0) {
        printf("SKIP: %s: %s\n", prog, why);
        fflush(stdout);
        exit(GPU_SKIP);
    }
}

static void die(const char *why)
{
    fprintf(stderr, "FATAL: %s\n", why);
    exit(1);
}

void *gpu_alloc(size_t len)
{
    char  why[256];
    void *p = NULL;
    if (cm_alloc(&p, len, why, sizeof(why)) != 0)
        die(why);
    return p;
}

void gpu_put(void *dev, const void *host, size_t len)
{
    char why[256];
    if (cm_to_device(dev, host, len, why, sizeof(why)) != 0)
        die(why);
}

void gpu_get(void *host, const void *dev, size_t len)
{
    char why[256];
    if (cm_to_host(host, dev, len, why, sizeof(why)) != 0)
        die(why);
}

cudaStream_t gpu_stream(void)
{
    int (*create)(cudaStream_t *) =
        (int (*)(cudaStream_t *))cm_symbol("cudaStreamCreate");
    cudaStream_t s = NULL;
    if (create == NULL || create(&s) != 0)
        die("cudaStreamCreate failed");
    return s;
}

int gpu_sync(cudaStream_t stream)
{
    int (*sync)(cudaStream_t) =
        (int (*)(cudaStream_t))cm_symbol("cudaStreamSynchronize");
    return sync != NULL ? sync(stream) : -1;
}

void gpu_copy_async(void *dst, const void *src, size_t len, int kind,
                    cudaStream_t stream)
{
    int (*copy)(void *, const void *, size_t, int, cudaStream_t) =
        (int (*)(void *, const void *, size_t, int, cudaStream_t))cm_symbol(
            "cudaMemcpyAsync");
    if (copy == NULL || copy(dst, src, len, kind, stream) != 0)
        die("cudaMemcpyAsync failed");
}
