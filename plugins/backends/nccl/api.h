/* The parts of NCCL's and the CUDA runtime's C APIs this plugin calls,
 * declared here so that it builds without CUDA or NCCL installed: both
 * libraries are opened with dlopen at run time (lib.c).  The values are
 * those of nccl.h and driver_types.h, which have kept them since NCCL 2.0
 * and CUDA 10. */
#ifndef BRAID_NCCL_API_H
#define BRAID_NCCL_API_H

#include <stddef.h>

/* ------------------------------------------------------------------ NCCL */

typedef struct ncclComm *ncclComm_t;
typedef struct {
    char internal[128];
} ncclUniqueId;

typedef enum {
    ncclSuccess            = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError        = 2,
    ncclInternalError      = 3,
    ncclInvalidArgument    = 4,
    ncclInvalidUsage       = 5,
    ncclRemoteError        = 6, /* 2.13 */
    ncclInProgress         = 7, /* 2.14: non-blocking communicators */
} ncclResult_t;

typedef enum {
    ncclInt8     = 0,
    ncclUint8    = 1,
    ncclInt32    = 2,
    ncclUint32   = 3,
    ncclInt64    = 4,
    ncclUint64   = 5,
    ncclFloat16  = 6,
    ncclFloat32  = 7,
    ncclFloat64  = 8,
    ncclBfloat16 = 9, /* 2.10 */
} ncclDataType_t;

typedef enum {
    ncclSum  = 0,
    ncclProd = 1,
    ncclMax  = 2,
    ncclMin  = 3,
    ncclAvg  = 4, /* 2.10 */
} ncclRedOp_t;

/* ncclConfig_t as of NCCL 2.17 (fields are only ever appended; NCCL reads
 * `size` bytes and fills in later fields itself, and takes `version` to
 * know which fields we set).  Only `blocking` is used. */
typedef struct nccl_config {
    size_t       size;
    unsigned int magic;   /* 0xcafebeef */
    unsigned int version; /* NCCL_VERSION(2, 17, 0) = 21700 */
    int          blocking;
    int          cga_cluster_size, min_ctas, max_ctas;
    const char  *net_name;
} nccl_config_t;
#define NCCL_CONFIG_MAGIC   0xcafebeefu
#define NCCL_CONFIG_VERSION 21700u
#define NCCL_CONFIG_UNDEF   (-2147483647 - 1) /* INT_MIN */

/* "major.minor.patch" of ncclGetVersion's code, which changed scheme at
 * 2.9: X*1000+Y*100+Z before, X*10000+Y*100+Z since. */
#define BRAID_NCCL_CODE(x, y, z) ((x)*10000 + (y)*100 + (z))

/* ------------------------------------------------------------------ CUDA */

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st  *cudaEvent_t;
typedef int                 cudaError_t;

enum {
    cudaSuccess                  = 0,
    cudaErrorInvalidValue        = 1,
    cudaErrorMemoryAllocation    = 2,
    cudaErrorInitializationError = 3,
    cudaErrorStubLibrary         = 34,
    cudaErrorInsufficientDriver  = 35,
    cudaErrorNoDevice            = 100,
    cudaErrorNotReady            = 600,
};

enum {
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
};
#define cudaEventDisableTiming 0x02u

enum {
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
};
enum { cudaDevP2PAttrNativeAtomicSupported = 3 };

#endif
