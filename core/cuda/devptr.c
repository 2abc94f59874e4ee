/* Device-pointer detection through the CUDA driver (see devptr.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cuda/devptr.h"
#include "util/log.h"

#define LOG_COMP "cuda"

/* The driver API's values, from cuda.h (stable since CUDA 4). */
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_IS_MANAGED  8
#define CU_MEMORYTYPE_DEVICE             2
#define CUDA_ERROR_NOT_INITIALIZED       3
#define CUDA_ERROR_DEINITIALIZED         4

typedef int (*cu_pointer_get_attributes_fn)(unsigned n, int *attrs,
                                            void             **data,
                                            unsigned long long ptr);
typedef int (*cu_get_error_string_fn)(int err, const char **str);

typedef struct driver {
    cu_pointer_get_attributes_fn get_attributes;
    cu_get_error_string_fn       error_string;
} driver_t;

enum { UNKNOWN = 0, NO_DRIVER, DRIVER };

static pthread_mutex_t find_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int     state;
static driver_t        found;
_Atomic int            braid_devptr_no_driver;

static void find_driver(void)
{
    pthread_mutex_lock(&find_lock);
    if (atomic_load(&state) == UNKNOWN) {
        /* Kept open for the life of the process, as a CUDA program does. */
        void *dl = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (dl != NULL) {
            found.get_attributes = (cu_pointer_get_attributes_fn)dlsym(
                dl, "cuPointerGetAttributes");
            found.error_string =
                (cu_get_error_string_fn)dlsym(dl, "cuGetErrorString");
        }
        BRAID_LOG(
            BRAID_LOG_DEBUG, LOG_COMP, "%s",
            found.get_attributes
                ? "CUDA driver found: buffers are checked for device memory"
                : "no CUDA driver (libcuda.so.1): every buffer is host "
                  "memory");
        atomic_store(&state, found.get_attributes ? DRIVER : NO_DRIVER);
        atomic_store(&braid_devptr_no_driver, found.get_attributes == NULL);
    }
    pthread_mutex_unlock(&find_lock);
}

static const driver_t *driver(void)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == UNKNOWN) {
        find_driver();
        s = atomic_load(&state);
    }
    return s == DRIVER ? &found : NULL;
}

int braid_devptr_driver_loaded(void) { return driver() != NULL; }

/* The driver's answer for one pointer (d != NULL, ptr != NULL). */
static braid_status_t query(braid_mem_kind_t *kind, const driver_t *d,
                            const void *ptr, const char *fn, const char *what)
{
    int          attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                             CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned int memtype = 0, managed = 0;
    void        *data[2] = {&memtype, &managed};
    /* Host memory the driver does not know is no error here: the
     * attributes stay 0 and the call succeeds. */
    int err =
        d->get_attributes(2, attrs, data, (unsigned long long)(uintptr_t)ptr);
    if (err == CUDA_ERROR_NOT_INITIALIZED || err == CUDA_ERROR_DEINITIALIZED)
        return BRAID_OK; /* no context, so no device memory */
    if (err != 0) {
        const char *msg = NULL;
        if (d->error_string == NULL || d->error_string(err, &msg) != 0)
            msg = NULL;
        return braid_error(
            BRAID_ERR_INTERNAL,
            "%s: cannot tell whether %s "
            "(%p) is CUDA device memory: cuPointerGetAttributes "
            "failed with error %d (%s)",
            fn, what, ptr, err, msg ? msg : "no description");
    }
    if (memtype == CU_MEMORYTYPE_DEVICE || managed)
        *kind = BRAID_MEM_KIND_DEVICE;
    return BRAID_OK;
}

braid_status_t braid_devptr_kind(braid_mem_kind_t *kind, const void *ptr,
                                 const char *fn, const char *what)
{
    *kind             = BRAID_MEM_KIND_HOST;
    const driver_t *d = ptr != NULL ? driver() : NULL;
    return d != NULL ? query(kind, d, ptr, fn, what) : BRAID_OK;
}

braid_status_t braid_devptr_buffers(braid_mem_kind_t *kind,
                                    const void *sendbuf, const void *recvbuf,
                                    const char *fn)
{
    braid_mem_kind_t send = BRAID_MEM_KIND_HOST, recv = BRAID_MEM_KIND_HOST;
    braid_status_t   st;
    *kind             = BRAID_MEM_KIND_HOST;
    const driver_t *d = sendbuf != NULL || recvbuf != NULL ? driver() : NULL;
    if (d == NULL)
        return BRAID_OK;
    if (sendbuf != NULL &&
        (st = query(&send, d, sendbuf, fn, "sendbuf")) != BRAID_OK)
        return st;
    if (recvbuf == sendbuf)
        recv = send;
    else if (recvbuf != NULL &&
             (st = query(&recv, d, recvbuf, fn, "recvbuf")) != BRAID_OK)
        return st;
    if (sendbuf != NULL && recvbuf != NULL && send != recv)
        return braid_error(
            BRAID_ERR_INVALID_ARG,
            "%s: sendbuf is %s memory "
            "but recvbuf is %s memory: both must be host or "
            "both CUDA device memory",
            fn, send == BRAID_MEM_KIND_DEVICE ? "CUDA device" : "host",
            recv == BRAID_MEM_KIND_DEVICE ? "CUDA device" : "host");
    *kind = sendbuf != NULL ? send : recv;
    return BRAID_OK;
}
