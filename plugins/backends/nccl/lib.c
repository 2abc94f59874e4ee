/* libnccl and the CUDA runtime, opened at run time.
 *
 * Nothing is linked: a machine without CUDA loads the plugin, which then
 * reports why it is unavailable.  The probe answers in the order a user
 * fixes things: the NCCL library, its version, the CUDA runtime, the
 * driver, a device. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static pthread_mutex_t  open_lock = PTHREAD_MUTEX_INITIALIZER;
static braid_nccl_lib_t the_lib;
static int              opened; /* 1 once every check passed */

/* Libraries stay mapped for the life of the process: the CUDA runtime
 * registers exit handlers that crash once it is unmapped. */
#define DL_FLAGS (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)

static void where(char *path, size_t len, void *dl, const char *sym,
                  const char *fallback)
{
    Dl_info info;
    void   *addr = dlsym(dl, sym);
    snprintf(path, len, "%s",
             addr && dladdr(addr, &info) && info.dli_fname ? info.dli_fname
                                                           : fallback);
}

/* Resolves every name in syms into the matching slot; the first missing
 * one (that is not optional) is named in why. */
typedef struct sym {
    const char *name;
    void      **slot;
    int         optional;
} sym_t;

static int resolve(void *dl, const sym_t *syms, int n, const char *lib,
                   char *why, size_t why_len)
{
    for (int i = 0; i < n; i++) {
        *syms[i].slot = dlsym(dl, syms[i].name);
        if (*syms[i].slot == NULL && !syms[i].optional) {
            snprintf(why, why_len,
                     "%s has no %s: not the library braid "
                     "expects",
                     lib, syms[i].name);
            return 0;
        }
    }
    return 1;
}

#define SYM(name, field)                                                      \
    {                                                                         \
#name, (void **)&the_lib.field, 0                                     \
    }
#define OPT(name, field)                                                      \
    {                                                                         \
#name, (void **)&the_lib.field, 1                                     \
    }

static int open_nccl(char *why, size_t why_len)
{
    const char *env  = getenv("BRAID_NCCL_LIBRARY");
    const char *name = env && *env ? env : "libnccl.so.2";
    void       *dl   = dlopen(name, DL_FLAGS);
    if (dl == NULL) {
        const char *err = dlerror();
        if (env && *env)
            snprintf(why, why_len,
                     "libnccl.so.2 not found: "
                     "BRAID_NCCL_LIBRARY=%s cannot be opened (%s)",
                     env, err ? err : "?");
        else
            snprintf(why, why_len,
                     "libnccl.so.2 not found (install NCCL "
                     "or set BRAID_NCCL_LIBRARY)");
        return 0;
    }
    const sym_t syms[] = {
        SYM(ncclGetVersion, get_version),
        SYM(ncclGetUniqueId, get_unique_id),
        SYM(ncclCommInitRank, comm_init_rank),
        OPT(ncclCommInitRankConfig, comm_init_rank_config),
        OPT(ncclCommFinalize, comm_finalize),
        SYM(ncclCommDestroy, comm_destroy),
        SYM(ncclCommAbort, comm_abort),
        SYM(ncclCommGetAsyncError, comm_get_async_error),
        SYM(ncclGetErrorString, get_error_string),
        OPT(ncclGetLastError, get_last_error),
        SYM(ncclAllReduce, all_reduce),
        SYM(ncclReduceScatter, reduce_scatter),
        SYM(ncclAllGather, all_gather),
        SYM(ncclBroadcast, broadcast),
    };
    where(the_lib.path, sizeof(the_lib.path), dl, "ncclGetVersion", name);
    /* The version first: an old library lacks newer symbols, and "too
     * old" is the useful answer then. */
    int code            = 0;
    the_lib.get_version = (ncclResult_t(*)(int *))dlsym(dl, "ncclGetVersion");
    if (the_lib.get_version == NULL ||
        the_lib.get_version(&code) != ncclSuccess) {
        snprintf(why, why_len,
                 "%s does not report an NCCL version: not "
                 "NCCL 2.x",
                 the_lib.path);
        return 0;
    }
    /* Codes below 2.9 were X*1000+Y*100+Z. */
    int major = code >= 10000 ? code / 10000 : code / 1000;
    int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
    int patch = code % 100;
    snprintf(the_lib.version, sizeof(the_lib.version), "%d.%d.%d", major,
             minor, patch);
    the_lib.code = BRAID_NCCL_CODE(major, minor, patch);
    if (major != 2) {
        snprintf(why, why_len,
                 "NCCL %s is not NCCL 2.x (need 2.x, %s or "
                 "newer; %s)",
                 the_lib.version, BRAID_NCCL_MIN_TEXT, the_lib.path);
        return 0;
    }
    if (the_lib.code < BRAID_NCCL_MIN_CODE) {
        snprintf(why, why_len, "NCCL %s too old (need %s or newer; %s)",
                 the_lib.version, BRAID_NCCL_MIN_TEXT, the_lib.path);
        return 0;
    }
    the_lib.has_avg = the_lib.code >= BRAID_NCCL_AVG_CODE;
    return resolve(dl, syms, (int)(sizeof(syms) / sizeof(syms[0])),
                   the_lib.path, why, why_len);
}

static int open_cudart(char *why, size_t why_len)
{
    static const char *const names[] = {"libcudart.so", "libcudart.so.13",
                                        "libcudart.so.12",
                                        "libcudart.so.11.0"};
    const char              *env     = getenv("BRAID_CUDART_LIBRARY");
    void                    *dl      = NULL;
    const char              *err     = NULL;
    if (env && *env) {
        if ((dl = dlopen(env, DL_FLAGS)) == NULL)
            err = dlerror();
    } else {
        for (size_t i = 0; dl == NULL && i < sizeof(names) / sizeof(*names);
             i++)
            dl = dlopen(names[i], DL_FLAGS);
    }
    if (dl == NULL) {
        snprintf(why, why_len,
                 "CUDA runtime not found: %s (NCCL %s found at "
                 "%s)",
                 env && *env ? err
                             : "no libcudart.so, .so.13, .so.12 "
                               "or .so.11.0 (set BRAID_CUDART_LIBRARY)",
                 the_lib.version, the_lib.path);
        return 0;
    }
    const sym_t syms[] = {
        SYM(cudaGetDeviceCount, get_device_count),
        SYM(cudaGetDevice, get_device),
        SYM(cudaSetDevice, set_device),
        SYM(cudaDeviceGetAttribute, device_get_attribute),
        SYM(cudaDeviceGetP2PAttribute, device_get_p2p_attribute),
        SYM(cudaDeviceGetPCIBusId, device_get_pci_bus_id),
        SYM(cudaGetErrorString, rt_error_string),
        SYM(cudaStreamCreate, stream_create),
        SYM(cudaStreamDestroy, stream_destroy),
        SYM(cudaStreamSynchronize, stream_synchronize),
        SYM(cudaEventCreateWithFlags, event_create),
        SYM(cudaEventDestroy, event_destroy),
        SYM(cudaEventRecord, event_record),
        SYM(cudaEventQuery, event_query),
        SYM(cudaEventSynchronize, event_synchronize),
        SYM(cudaMalloc, malloc_dev),
        SYM(cudaFree, free_dev),
        SYM(cudaMemcpy, memcpy_sync),
    };
    where(the_lib.rt_path, sizeof(the_lib.rt_path), dl, "cudaGetDeviceCount",
          env && *env ? env : "libcudart.so");
    return resolve(dl, syms, (int)(sizeof(syms) / sizeof(syms[0])),
                   the_lib.rt_path, why, why_len);
}

/* A device, and a driver to reach it. */
static int find_device(char *why, size_t why_len)
{
    int         n   = 0;
    cudaError_t err = the_lib.get_device_count(&n);
    const char *msg = err != cudaSuccess ? the_lib.rt_error_string(err) : "";
    if (err == cudaErrorInsufficientDriver || err == cudaErrorStubLibrary) {
        /* The runtime loads the driver itself; if it is not in the process
         * now, it is not installed (or only its link-time stub is). */
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (drv == NULL || err == cudaErrorStubLibrary)
            snprintf(why, why_len,
                     "CUDA driver not loaded (libcuda.so.1 %s; "
                     "NCCL %s found)",
                     err == cudaErrorStubLibrary ? "is only the link-time stub"
                                                 : "not found",
                     the_lib.version);
        else
            snprintf(why, why_len,
                     "CUDA driver too old for the CUDA runtime "
                     "%s (%s; NCCL %s found)",
                     the_lib.rt_path, msg, the_lib.version);
        if (drv != NULL)
            dlclose(drv);
        return 0;
    }
    if (err == cudaErrorNoDevice || (err == cudaSuccess && n == 0)) {
        snprintf(why, why_len, "no CUDA device (%s; NCCL %s found)",
                 err == cudaSuccess ? "cudaGetDeviceCount: 0 devices" : msg,
                 the_lib.version);
        return 0;
    }
    if (err != cudaSuccess) {
        snprintf(why, why_len,
                 "CUDA initialisation failed: "
                 "cudaGetDeviceCount: %s (error %d)",
                 msg, err);
        return 0;
    }
    return 1;
}

braid_status_t braid_nccl_lib_open(const braid_nccl_lib_t **lib, char *why,
                                   size_t why_len)
{
    pthread_mutex_lock(&open_lock);
    /* Each probe starts over: the environment may have changed (tests
     * load the plugin several times with different libraries). */
    if (!opened) {
        memset(&the_lib, 0, sizeof(the_lib));
        opened = open_nccl(why, why_len) && open_cudart(why, why_len) &&
                 find_device(why, why_len);
    }
    int ok = opened;
    pthread_mutex_unlock(&open_lock);
    *lib = ok ? &the_lib : NULL;
    return ok ? BRAID_OK : BRAID_ERR_UNAVAILABLE;
}

const char *braid_nccl_lib_version(void) { return the_lib.version; }
