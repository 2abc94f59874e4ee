/* A stand-in for libcudart, for the NCCL plugin's tests on machines
 * without a GPU.  Device memory is host memory; streams and events are
 * tokens.  The environment says how it behaves:
 *   STUB_CUDA_COUNT_ERROR  cudaGetDeviceCount's error (35: insufficient
 *                          driver, 100: no device; default 0)
 *   STUB_CUDA_DEVICES      how many devices it reports (default 1)
 * and stub_cuda_event_mode() sets what cudaEventQuery says (threads of the
 * plugin ask while the test changes it). */
#include <stdlib.h>
#include <string.h>

#include "../../plugins/backends/nccl/api.h"

#define EXPORT __attribute__((visibility("default")))

static char stream_token, event_tokens[256];
static int  next_event, event_mode; /* 0 ready, 1 pending, 2 error */

EXPORT void stub_cuda_event_mode(int mode)
{
    __atomic_store_n(&event_mode, mode, __ATOMIC_SEQ_CST);
}

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v != NULL ? atoi(v) : fallback;
}

EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    int err = env_int("STUB_CUDA_COUNT_ERROR", 0);
    *count  = err ? 0 : env_int("STUB_CUDA_DEVICES", 1);
    return err;
}

EXPORT const char *cudaGetErrorString(cudaError_t err)
{
    switch (err) {
    case 0: return "no error";
    case 35:
        return "CUDA driver version is insufficient for CUDA runtime "
               "version";
    case 100: return "no CUDA-capable device is detected";
    case 700: return "an illegal memory access was encountered";
    default: return "stub CUDA error";
    }
}

EXPORT cudaError_t cudaGetDevice(int *dev)
{
    *dev = 0;
    return 0;
}
EXPORT cudaError_t cudaSetDevice(int dev) { return dev == 0 ? 0 : 101; }

EXPORT cudaError_t cudaDeviceGetAttribute(int *value, int attr, int dev)
{
    (void)dev;
    *value = attr == cudaDevAttrComputeCapabilityMajor ? 9 : 0;
    return 0;
}

EXPORT cudaError_t cudaDeviceGetP2PAttribute(int *value, int attr, int a,
                                             int b)
{
    (void)attr, (void)a, (void)b;
    *value = 0;
    return 0;
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int dev)
{
    (void)dev;
    strncpy(bus, "0000:01:00.0", (size_t)len);
    return 0;
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    *s = (cudaStream_t)&stream_token;
    return 0;
}
EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    (void)s;
    return 0;
}
EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return 0;
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    (void)flags;
    *e = (cudaEvent_t)&event_tokens[__atomic_fetch_add(&next_event, 1,
                                                       __ATOMIC_SEQ_CST) %
                                    256];
    return 0;
}
EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    (void)e;
    return 0;
}
EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)e, (void)s;
    return 0;
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t e)
{
    (void)e;
    int mode = __atomic_load_n(&event_mode, __ATOMIC_SEQ_CST);
    return mode == 1 ? cudaErrorNotReady : mode == 2 ? 700 : 0;
}
EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    return cudaEventQuery(e);
}

EXPORT cudaError_t cudaMalloc(void **p, size_t len)
{
    *p = malloc(len ? len : 1);
    return *p ? 0 : cudaErrorMemoryAllocation;
}
EXPORT cudaError_t cudaFree(void *p)
{
    free(p);
    return 0;
}
EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t len, int kind)
{
    (void)kind;
    memmove(dst, src, len);
    return 0;
}
