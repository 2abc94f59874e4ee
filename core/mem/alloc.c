/* braid_mem_alloc: memory that the other ranks of a host can map.
 *
 * A user buffer from malloc lives in this process's private pages, so a
 * peer reads it only through the kernel (process_vm_readv), which pins
 * every 4 KiB page it copies; at a few GB/s that pinning, not the copy,
 * bounds the single-copy path (docs/performance.md, "buffers peers can
 * map").  An allocation here is a memfd mapped shared: a peer that may
 * read this process's memory anyway (the same ptrace check as
 * process_vm_readv) takes a duplicate of the fd (pidfd_getfd) once and
 * maps it, and from then on copies from it in user space like from its
 * own memory.  The core only keeps the list of live allocations; the
 * transport decides whether and how a peer maps one
 * (svc->mem_shared_find).
 *
 * Every allocation is a memfd of its own, so freeing one returns its
 * memory at once (once the peers that mapped it drop their mappings) and
 * an fd number identifies it together with the file's inode. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem/mem.h"
#include "util/api.h"
#include "util/log.h"

typedef struct mem_region {
    char              *base;
    size_t             len; /* mapped bytes: the request, in whole pages */
    int                fd;
    uint64_t           ino;
    struct mem_region *next;
} mem_region_t;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_region_t   *mem_regions;

BRAID_API braid_status_t braid_mem_alloc(size_t bytes, void **ptr)
{
    char          ebuf[96];
    struct stat   stt;
    mem_region_t *r;
    long          page = sysconf(_SC_PAGESIZE);

    braid_error_clear();
    if (ptr == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_mem_alloc: ptr is "
                                                  "NULL");
    *ptr = NULL;
    if (bytes == 0)
        return BRAID_OK; /* as malloc(0) may: nothing to map, nothing to free
                          */
    size_t pg  = page > 0 ? (size_t)page : 4096;
    size_t len = bytes + pg - 1;
    if (len < bytes || len > (size_t)INT64_MAX)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "braid_mem_alloc: %zu bytes: more than a file "
                           "can hold",
                           bytes);
    len -= len % pg;
    if ((r = calloc(1, sizeof(*r))) == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY,
                           "braid_mem_alloc: out of memory");
    r->fd = memfd_create("braid-mem", MFD_CLOEXEC);
    if (r->fd < 0) {
        braid_status_t st =
            braid_error(errno == ENOMEM || errno == EMFILE || errno == ENFILE
                            ? BRAID_ERR_NO_MEMORY
                            : BRAID_ERR_IO,
                        "braid_mem_alloc: memfd_create: %s",
                        strerror_r(errno, ebuf, sizeof(ebuf)));
        free(r);
        return st;
    }
    if (ftruncate(r->fd, (off_t)len) != 0 || fstat(r->fd, &stt) != 0)
        goto fail;
    r->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (r->base == MAP_FAILED)
        goto fail;
    r->len = len;
    r->ino = (uint64_t)stt.st_ino;
    pthread_mutex_lock(&mem_lock);
    r->next     = mem_regions;
    mem_regions = r;
    pthread_mutex_unlock(&mem_lock);
    *ptr = r->base;
    return BRAID_OK;

fail:;
    int err = errno;
    close(r->fd);
    free(r);
    return braid_error(err == ENOMEM || err == ENOSPC || err == EFBIG
                           ? BRAID_ERR_NO_MEMORY
                           : BRAID_ERR_IO,
                       "braid_mem_alloc: %zu bytes of shared memory: %s",
                       bytes, strerror_r(err, ebuf, sizeof(ebuf)));
}

BRAID_API braid_status_t braid_mem_free(void *ptr)
{
    mem_region_t **at, *r = NULL;

    braid_error_clear();
    if (ptr == NULL)
        return BRAID_OK;
    pthread_mutex_lock(&mem_lock);
    for (at = &mem_regions; *at != NULL; at = &(*at)->next)
        if ((*at)->base == ptr) {
            r   = *at;
            *at = r->next;
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    if (r == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "braid_mem_free: %p is not an address "
                           "braid_mem_alloc returned (or it was freed)",
                           ptr);
    munmap(r->base, r->len);
    close(r->fd);
    free(r);
    return BRAID_OK;
}

int braid_mem_shared_find(const void *ptr, size_t len, braid_mem_shared_t *out)
{
    const char *p     = ptr;
    int         found = 0;

    pthread_mutex_lock(&mem_lock);
    for (const mem_region_t *r = mem_regions; r != NULL; r = r->next)
        if (p >= r->base && (size_t)(p - r->base) <= r->len &&
            len <= r->len - (size_t)(p - r->base)) {
            out->fd  = r->fd;
            out->ino = r->ino;
            out->off = (uint64_t)(p - r->base);
            out->len = (uint64_t)r->len;
            found    = 1;
            break;
        }
    pthread_mutex_unlock(&mem_lock);
    return found;
}
