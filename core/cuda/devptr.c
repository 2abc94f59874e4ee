/* Device-pointer detection through the CUDA driver, when it is loaded.
 *
 * The fast path is dl_iterate_phdr stopped at the first object: it reports
 * how many objects were ever loaded and unloaded, and while those counts
 * have not changed, neither has the answer to "is libcuda.so.1 here?".
 * Only when they change are the loaded objects searched again (under a
 * lock).  A host-only process thus never calls into CUDA, never creates a
 * CUDA context, and pays a few nanoseconds per call. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
                                            void **data,
                                            unsigned long long ptr);
typedef int (*cu_get_error_string_fn)(int err, const char **str);

typedef struct driver {
    cu_pointer_get_attributes_fn get_attributes; /* NULL: not loaded */
    cu_get_error_string_fn       error_string;
} driver_t;

static pthread_mutex_t    scan_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t   seen_gen  = UINT64_MAX; /* adds << 32 | subs */
static _Atomic(driver_t *) current;               /* NULL: no driver */
static driver_t           found;

static int first_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(uint64_t *)arg = (uint64_t)info->dlpi_adds << 32 |
                       ((uint64_t)info->dlpi_subs & 0xffffffffu);
    return 1; /* stop: every entry carries the same counters */
}

static int find_driver(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    const char *name  = info->dlpi_name;
    const char *slash = name != NULL ? strrchr(name, '/') : NULL;
    const char *base  = slash != NULL ? slash + 1 : name;
    if (base == NULL || strncmp(base, "libcuda.so", 10) != 0)
        return 0;
    snprintf(arg, PATH_MAX, "%s", name);
    return 1;
}

/* Called when the loader's counters moved: look for the driver again. */
static void rescan(uint64_t gen)
{
    pthread_mutex_lock(&scan_lock);
    if (atomic_load(&seen_gen) != gen) {
        char path[PATH_MAX] = "";
        driver_t *d = NULL;
        dl_iterate_phdr(find_driver, path);
        /* RTLD_NOLOAD: only a reference to the copy already mapped; the
         * reference is kept, so the functions stay valid. */
        void *dl = path[0] ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (dl != NULL && found.get_attributes == NULL) {
            found.get_attributes = (cu_pointer_get_attributes_fn)dlsym(
                dl, "cuPointerGetAttributes");
            found.error_string = (cu_get_error_string_fn)dlsym(
                dl, "cuGetErrorString");
            BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "CUDA driver %s loaded: "
                      "device pointers are detected with "
                      "cuPointerGetAttributes%s", path,
                      found.get_attributes ? "" : " (symbol missing!)");
        }
        if (dl != NULL && found.get_attributes != NULL)
            d = &found;
        atomic_store(&current, d);
        atomic_store(&seen_gen, gen);
    }
    pthread_mutex_unlock(&scan_lock);
}

static const driver_t *driver(void)
{
    uint64_t gen = 0;
    dl_iterate_phdr(first_object, &gen);
    if (gen != atomic_load_explicit(&seen_gen, memory_order_acquire))
        rescan(gen);
    return atomic_load_explicit(&current, memory_order_acquire);
}

int braid_devptr_driver_loaded(void)
{
    return driver() != NULL;
}

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
    int err = d->get_attributes(2, attrs, data,
                                (unsigned long long)(uintptr_t)ptr);
    if (err == CUDA_ERROR_NOT_INITIALIZED || err == CUDA_ERROR_DEINITIALIZED)
        return BRAID_OK; /* no context, so no device memory */
    if (err != 0) {
        const char *msg = NULL;
        if (d->error_string == NULL || d->error_string(err, &msg) != 0)
            msg = NULL;
        return braid_error(BRAID_ERR_INTERNAL, "%s: cannot tell whether %s "
                           "(%p) is CUDA device memory: cuPointerGetAttributes "
                           "failed with error %d (%s)", fn, what, ptr, err,
                           msg ? msg : "no description");
    }
    if (memtype == CU_MEMORYTYPE_DEVICE || managed)
        *kind = BRAID_MEM_KIND_DEVICE;
    return BRAID_OK;
}

braid_status_t braid_devptr_kind(braid_mem_kind_t *kind, const void *ptr,
                                 const char *fn, const char *what)
{
    *kind = BRAID_MEM_KIND_HOST;
    const driver_t *d = ptr != NULL ? driver() : NULL;
    return d != NULL ? query(kind, d, ptr, fn, what) : BRAID_OK;
}

braid_status_t braid_devptr_buffers(braid_mem_kind_t *kind,
                                    const void *sendbuf, const void *recvbuf,
                                    const char *fn)
{
    braid_mem_kind_t send = BRAID_MEM_KIND_HOST, recv = BRAID_MEM_KIND_HOST;
    braid_status_t   st;
    *kind = BRAID_MEM_KIND_HOST;
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
        return braid_error(BRAID_ERR_INVALID_ARG, "%s: sendbuf is %s memory "
                           "but recvbuf is %s memory: both must be host or "
                           "both CUDA device memory", fn,
                           send == BRAID_MEM_KIND_DEVICE ? "CUDA device" : "host",
                           recv == BRAID_MEM_KIND_DEVICE ? "CUDA device" : "host");
    *kind = sendbuf != NULL ? send : recv;
    return BRAID_OK;
}
