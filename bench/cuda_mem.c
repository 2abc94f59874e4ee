/* The CUDA runtime for braid-bench and the GPU tests (see cuda_mem.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_mem.h"

static void *rt;
static int   device = -1;
static int (*get_count)(int *);
static int (*set_device)(int);
static int (*dev_malloc)(void **, size_t);
static int (*dev_free)(void *);
static int (*copy)(void *, const void *, size_t, int);
static const char *(*error_string)(int);

static int fail(char *why, size_t len, const char *what, int err)
{
    snprintf(why, len, "%s: CUDA error %d (%s)", what, err,
             error_string ? error_string(err) : "?");
    return -1;
}

static int local_rank(void)
{
    static const char *const vars[] = {"LOCAL_RANK",
                                       "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "SLURM_LOCALID", "BRAID_RANK", "RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0')
            return atoi(v);
    }
    return 0;
}

void *cm_symbol(const char *name)
{
    return rt != NULL ? dlsym(rt, name) : NULL;
}

int cm_open(char *why, size_t why_len)
{
    static const char *const names[] = {"libcudart.so", "libcudart.so.13",
                                        "libcudart.so.12"};
    const char              *env     = getenv("BRAID_CUDART_LIBRARY");
    if (env != NULL && *env != '\0')
        rt = dlopen(env, RTLD_NOW | RTLD_NODELETE);
    for (size_t i = 0;
         !(env && *env) && rt == NULL && i < sizeof(names) / sizeof(names[0]);
         i++)
        rt = dlopen(names[i], RTLD_NOW | RTLD_NODELETE);
    if (rt == NULL) {
        const char *err = dlerror();
        snprintf(why, why_len, "no CUDA runtime (%s): %s",
                 env && *env ? env : "libcudart.so", err ? err : "not found");
        return -1;
    }
    get_count  = (int (*)(int *))cm_symbol("cudaGetDeviceCount");
    set_device = (int (*)(int))cm_symbol("cudaSetDevice");
    dev_malloc = (int (*)(void **, size_t))cm_symbol("cudaMalloc");
    dev_free   = (int (*)(void *))cm_symbol("cudaFree");
    copy = (int (*)(void *, const void *, size_t, int))cm_symbol("cudaMemcpy");
    error_string = (const char *(*)(int))cm_symbol("cudaGetErrorString");
    if (!get_count || !set_device || !dev_malloc || !dev_free || !copy ||
        !error_string) {
        snprintf(why, why_len,
                 "the CUDA runtime lacks a function braid-bench "
                 "needs");
        return -1;
    }
    int n = 0, err = get_count(&n);
    if (err == 35 || err == 34) /* insufficient driver, stub driver */
        return fail(why, why_len, "CUDA driver not loaded: cudaGetDeviceCount",
                    err);
    if (err == 100)
        return fail(why, why_len, "no CUDA device: cudaGetDeviceCount", err);
    if (err != 0)
        return fail(why, why_len, "cudaGetDeviceCount", err);
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device");
        return -1;
    }
    device = local_rank() % n;
    err    = set_device(device);
    return err ? fail(why, why_len, "cudaSetDevice", err) : 0;
}

int cm_device(void) { return device; }

int cm_alloc(void **dev, size_t len, char *why, size_t why_len)
{
    int err = dev_malloc(dev, len ? len : 1);
    return err ? fail(why, why_len, "cudaMalloc", err) : 0;
}

void cm_free(void *dev)
{
    if (dev != NULL)
        dev_free(dev);
}

int cm_to_device(void *dev, const void *host, size_t len, char *why,
                 size_t why_len)
{
    int err = len ? copy(dev, host, len, 1 /* cudaMemcpyHostToDevice */) : 0;
    return err ? fail(why, why_len, "cudaMemcpy to the device", err) : 0;
}

int cm_to_host(void *host, const void *dev, size_t len, char *why,
               size_t why_len)
{
    int err = len ? copy(host, dev, len, 2 /* cudaMemcpyDeviceToHost */) : 0;
    return err ? fail(why, why_len, "cudaMemcpy to the host", err) : 0;
}
