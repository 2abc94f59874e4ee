/* Single-copy reads of buffers from braid_mem_alloc: from a mapping, not
 * through the kernel.
 *
 * process_vm_readv pins every page it copies, one 4 KiB page at a time
 * for a buffer from malloc, and that pinning bounds the single-copy path
 * well below what a user-space copy reaches (docs/performance.md,
 * "buffers peers can map").  A buffer that braid_mem_alloc gave lives in
 * a memfd mapped shared; mem_expose puts the memfd's number and inode in
 * the key, and the first get from it takes a duplicate of the fd from the
 * owner (pidfd_getfd, allowed exactly where process_vm_readv is: the same
 * ptrace check) and maps the whole file read-only.  The mapping is kept
 * (a few per peer, least recently used out first), so later gets are a
 * plain copy, streamed where the destination will not be read soon.
 *
 * Where pidfd_getfd is refused (a seccomp profile, an old kernel), the
 * get reads through process_vm_readv as for any buffer, and rank 0's
 * communicator log says so once.  The owner may free an allocation while a
 * peer still maps it: the peer's mapping keeps the file alive until it is
 * dropped, and a get with a key naming the same fd with another inode (the
 * number reused by a new allocation) drops it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm.h"

#define MAP_MAGIC UINT32_C(0x6272616d) /* "bram": key[] holds a map_key */
/* Below this a get's destination is about to be read (a staging chunk in
 * the reader's cache); from it on it is a receive buffer: streamed. */
#define MAP_STREAM_MIN ((size_t)512 << 10)

typedef struct map_key {
    uint32_t magic;
    int32_t  fd;   /* the memfd's number in the owner */
    uint64_t ino;  /* its inode */
    uint64_t off;  /* of the buffer in the file */
    uint64_t flen; /* of the file */
} map_key_t;

_Static_assert(sizeof(map_key_t) <= BRAID_RKEY_BYTES, "a key's bytes hold it");

static int getfd(int pidfd, int fd)
{
#ifdef SYS_pidfd_getfd
    return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
#else
    (void)pidfd, (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}

int braid_shm_map_probe(braid_shm_comm_t *comm, char *why, size_t why_len)
{
    char ebuf[96];
    if (!BRAID_HAS(comm->svc, braid_services_t, copy)) {
        snprintf(why, why_len, "this libbraid has no braid_mem_alloc");
        return 0;
    }
    /* A number no process has open: EBADF once the permission check
     * passed, EPERM or ENOSYS before. */
    for (int p = 0; p < comm->size; p++) {
        if (p == comm->rank)
            continue;
        if (comm->cma_pidfd[p] < 0) {
            snprintf(why, why_len, "no pidfd of rank %d", p);
            return 0;
        }
        int fd = getfd(comm->cma_pidfd[p], 0x7ffffff0);
        if (fd >= 0) {
            close(fd);
        } else if (errno != EBADF) {
            snprintf(why, why_len, "pidfd_getfd from rank %d: %s", p,
                     strerror_r(errno, ebuf, sizeof(ebuf)));
            return 0;
        }
    }
    return 1;
}

void braid_shm_map_release(braid_shm_comm_t *comm)
{
    for (int i = 0; i < comm->nmaps; i++)
        munmap((void *)comm->maps[i].base, comm->maps[i].len);
    comm->nmaps = 0;
}

void braid_shm_map_key(braid_shm_comm_t *comm, const void *buf, size_t len,
                       braid_rkey_t *key)
{
    braid_mem_shared_t ms;
    if (!comm->map_ok || !comm->svc->mem_shared_find(buf, len, &ms))
        return;
    map_key_t mk = {.magic = MAP_MAGIC,
                    .fd    = ms.fd,
                    .ino   = ms.ino,
                    .off   = ms.off,
                    .flen  = ms.len};
    memcpy(key->key, &mk, sizeof(mk));
}

static void drop(braid_shm_comm_t *comm, int i)
{
    munmap((void *)comm->maps[i].base, comm->maps[i].len);
    comm->maps[i] = comm->maps[--comm->nmaps];
}

/* The mapping of peer's file of *mk: from the cache, or mapped now.  NULL
 * with BRAID_OK: not mappable, read through the kernel instead. */
static const char *map_of(braid_shm_comm_t *comm, int peer,
                          const map_key_t *mk, braid_status_t *st)
{
    char             ebuf[96];
    struct stat      stt;
    braid_shm_map_t *m;

    *st = BRAID_OK;
    for (int i = 0; i < comm->nmaps; i++) {
        m = &comm->maps[i];
        if (m->peer != peer || m->fd != mk->fd)
            continue;
        if (m->ino == mk->ino && m->len == mk->flen) {
            m->used = ++comm->map_clock;
            return m->base;
        }
        drop(comm, i); /* the number now names a newer allocation */
        break;
    }
    int fd = getfd(comm->cma_pidfd[peer], mk->fd);
    if (fd < 0) {
        comm->map_ok = 0;
        comm->svc->log(BRAID_LOG_INFO, BRAID_SHM_COMPONENT,
                       "rank %d: cannot map rank %d's braid_mem_alloc "
                       "buffers (pidfd_getfd: %s): reading them through "
                       "process_vm_readv",
                       comm->rank, peer,
                       strerror_r(errno, ebuf, sizeof(ebuf)));
        return NULL;
    }
    if (fstat(fd, &stt) != 0 || (uint64_t)stt.st_ino != mk->ino ||
        (uint64_t)stt.st_size < mk->flen) {
        close(fd);
        *st = comm->svc->error(BRAID_ERR_TRANSPORT,
                               "shm: rank %d: rank %d's fd %d is no longer "
                               "the allocation it exposed (freed while a "
                               "collective on it ran?)",
                               comm->rank, peer, (int)mk->fd);
        return NULL;
    }
    void *base = mmap(NULL, (size_t)mk->flen, PROT_READ, MAP_SHARED, fd, 0);
    int   err  = errno;
    close(fd); /* the mapping holds the file */
    if (base == MAP_FAILED) {
        *st = comm->svc->error(err == ENOMEM ? BRAID_ERR_NO_MEMORY
                                             : BRAID_ERR_TRANSPORT,
                               "shm: rank %d: mapping %llu bytes of rank "
                               "%d's buffer: %s",
                               comm->rank, (unsigned long long)mk->flen, peer,
                               strerror_r(err, ebuf, sizeof(ebuf)));
        return NULL;
    }
    if (comm->nmaps == BRAID_SHM_MAPS) {
        int old = 0;
        for (int i = 1; i < comm->nmaps; i++)
            if (comm->maps[i].used < comm->maps[old].used)
                old = i;
        drop(comm, old);
    }
    m       = &comm->maps[comm->nmaps++];
    m->peer = peer;
    m->fd   = mk->fd;
    m->ino  = mk->ino;
    m->len  = (size_t)mk->flen;
    m->base = base;
    m->used = ++comm->map_clock;
    return base;
}

int braid_shm_map_get(braid_shm_comm_t *comm, int peer,
                      const braid_rkey_t *key, size_t off, void *dst,
                      size_t len, braid_status_t *st)
{
    map_key_t mk;

    *st = BRAID_OK;
    memcpy(&mk, key->key, sizeof(mk));
    if (!comm->map_ok || mk.magic != MAP_MAGIC)
        return 0;
    if (mk.off > mk.flen || key->len > mk.flen - mk.off) {
        *st = comm->svc->error(BRAID_ERR_INVALID_ARG,
                               "shm: rank %d: rank %d's key says %llu bytes "
                               "at %llu of a %llu-byte allocation",
                               comm->rank, peer, (unsigned long long)key->len,
                               (unsigned long long)mk.off,
                               (unsigned long long)mk.flen);
        return 1;
    }
    const char *base = map_of(comm, peer, &mk, st);
    if (base == NULL)
        return *st != BRAID_OK;
    comm->svc->copy(dst, base + mk.off + off, len, len >= MAP_STREAM_MIN);
    return 1;
}
