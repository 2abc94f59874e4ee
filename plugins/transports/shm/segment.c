/* Shared segments: one per rank, mapped by every rank of the communicator.
 *
 * Each rank creates its own segment under a fresh name (uid, pid and 64
 * random bits, O_EXCL so that a collision or a planted file is an error, not
 * a shared segment), the names travel through the oob, every rank maps every
 * peer's, and once an oob round says all ranks are done mapping, every rank
 * unlinks every name.  From then on the memory lives only in the mappings: a
 * rank that dies later leaves nothing in /dev/shm. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#define CREATE_ATTEMPTS 4

/* What each rank contributes to the name exchange. */
typedef struct name_entry {
    int32_t  status;
    uint32_t pad;
    char     name[BRAID_SHM_NAME_LEN];
} name_entry_t;

static const char *err_str(int err, char *buf, size_t len)
{
    /* GNU strerror_r: thread-safe, returns the message (maybe not in buf). */
    return strerror_r(err, buf, len);
}

size_t braid_shm_seg_round(size_t bytes)
{
    long   page = sysconf(_SC_PAGESIZE);
    size_t p    = page > 0 ? (size_t)page : 4096;

    if (bytes == 0) {
        return p;
    }
    if (bytes > SIZE_MAX - p) {
        return 0;
    }
    return (bytes + p - 1) / p * p;
}

braid_status_t braid_shm_seg_name(const braid_services_t *svc, char *name)
{
    static unsigned counter;
    uint64_t        rnd = 0;
    int             n;

    /* The random bits keep other jobs from guessing the name; when the
     * kernel cannot give them, O_EXCL alone still guarantees uniqueness. */
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        rnd = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
              ((uint64_t)++counter << 44);
    }
    n = snprintf(name, BRAID_SHM_NAME_LEN, BRAID_SHM_PREFIX "%u-%ld-%016llx",
                 (unsigned)getuid(), (long)getpid(), (unsigned long long)rnd);
    if (n < 0 || n >= BRAID_SHM_NAME_LEN) {
        return svc->error(BRAID_ERR_INTERNAL, "shm: segment name too long");
    }
    return BRAID_OK;
}

/* Creates and maps this rank's segment; on error nothing is left behind. */
static braid_status_t seg_create(const braid_services_t *svc, int rank,
                                 size_t bytes, const char *what, char *name,
                                 void **base)
{
    char           ebuf[128];
    braid_status_t st;
    int            fd = -1, err;
    void          *p;

    *base = NULL;
    for (int attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
        if ((st = braid_shm_seg_name(svc, name)) != BRAID_OK) {
            return st;
        }
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) {
            break;
        }
    }
    if (fd < 0) {
        err = errno;
        return svc->error(err == EMFILE || err == ENFILE || err == ENOSPC
                              ? BRAID_ERR_NO_MEMORY
                              : BRAID_ERR_UNAVAILABLE,
                          "shm: rank %d: cannot create the %s segment %s: "
                          "shm_open: %s",
                          rank, what, name, err_str(err, ebuf, sizeof(ebuf)));
    }
    if (ftruncate(fd, (off_t)bytes) != 0) {
        err = errno;
        st  = svc->error(BRAID_ERR_NO_MEMORY,
                         "shm: rank %d: cannot size the "
                          "%s segment %s to %zu bytes: ftruncate: %s",
                         rank, what, name, bytes,
                         err_str(err, ebuf, sizeof(ebuf)));
        goto fail;
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = errno;
        st  = svc->error(BRAID_ERR_NO_MEMORY,
                         "shm: rank %d: cannot map the "
                          "%s segment %s (%zu bytes): mmap: %s",
                         rank, what, name, bytes,
                         err_str(err, ebuf, sizeof(ebuf)));
        goto fail;
    }
    close(fd);
    *base = p;
    return BRAID_OK;

fail:
    close(fd);
    shm_unlink(name);
    return st;
}

/* Maps a peer's segment; the fd is closed at once (the mapping stays). */
static braid_status_t seg_map_peer(const braid_services_t *svc, int rank,
                                   int peer, size_t bytes, const char *what,
                                   const char *name, void **base)
{
    char           ebuf[128];
    struct stat    sb;
    braid_status_t st = BRAID_OK;
    int            fd, err;
    void          *p;

    *base = NULL;
    /* Only ever one of ours: a peer's bytes are no reason to open any other
     * object of this user. */
    if (strncmp(name, BRAID_SHM_PREFIX, strlen(BRAID_SHM_PREFIX)) != 0) {
        return svc->error(BRAID_ERR_MISMATCH,
                          "shm: rank %d: rank %d sent "
                          "'%.*s' as its %s segment name, not a braid-shm "
                          "one",
                          rank, peer, BRAID_SHM_NAME_LEN, name, what);
    }
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        err = errno;
        return svc->error(BRAID_ERR_UNAVAILABLE,
                          "shm: rank %d: cannot open "
                          "rank %d's %s segment %s: shm_open: %s (is rank %d "
                          "really on this host, with the same /dev/shm?)",
                          rank, peer, what, name,
                          err_str(err, ebuf, sizeof(ebuf)), peer);
    }
    if (fstat(fd, &sb) != 0) {
        err = errno;
        st  = svc->error(BRAID_ERR_IO,
                         "shm: rank %d: cannot stat rank %d's "
                          "%s segment %s: fstat: %s",
                         rank, peer, what, name,
                         err_str(err, ebuf, sizeof(ebuf)));
        goto out;
    }
    if ((size_t)sb.st_size != bytes) {
        st = svc->error(BRAID_ERR_MISMATCH,
                        "shm: rank %d: rank %d's %s "
                        "segment %s has %lld bytes, expected %zu",
                        rank, peer, what, name, (long long)sb.st_size, bytes);
        goto out;
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        err = errno;
        st  = svc->error(BRAID_ERR_NO_MEMORY,
                         "shm: rank %d: cannot map rank "
                          "%d's %s segment %s (%zu bytes): mmap: %s",
                         rank, peer, what, name, bytes,
                         err_str(err, ebuf, sizeof(ebuf)));
        goto out;
    }
    *base = p;
out:
    close(fd);
    return st;
}

/* Error naming the first rank whose status is not OK, or OK. */
static braid_status_t first_failure(const braid_services_t *svc,
                                    braid_status_t          local,
                                    const int32_t *status, int n,
                                    const char *what, const char *step)
{
    for (int r = 0; r < n; r++) {
        braid_status_t s = (braid_status_t)status[r];
        if (s == BRAID_OK) {
            continue;
        }
        if (local != BRAID_OK) {
            return local; /* this rank's own message is already recorded */
        }
        return svc->error(s,
                          "shm: rank %d failed while %s the %s segments "
                          "(status %d), so every rank gives up",
                          r, step, what, (int)s);
    }
    return BRAID_OK;
}

void braid_shm_segset_destroy(braid_shm_segset_t *set)
{
    if (set->base != NULL) {
        for (int r = 0; r < set->nranks; r++) {
            if (set->base[r] != NULL) {
                munmap(set->base[r], set->bytes);
            }
        }
    }
    free(set->base);
    memset(set, 0, sizeof(*set));
}

static void unlink_all(const braid_services_t *svc, int rank,
                       const name_entry_t *names, int n)
{
    char ebuf[128];

    /* Every rank unlinks every name: the first one wins, the others see
     * ENOENT, and a segment is gone even if its creator died meanwhile. */
    for (int r = 0; r < n; r++) {
        if (names[r].status != BRAID_OK || names[r].name[0] != '/') {
            continue;
        }
        if (shm_unlink(names[r].name) != 0 && errno != ENOENT) {
            int err = errno;
            svc->log(BRAID_LOG_WARN, BRAID_SHM_COMPONENT,
                     "rank %d: cannot "
                     "unlink %s: %s",
                     rank, names[r].name, err_str(err, ebuf, sizeof(ebuf)));
        }
    }
}

braid_status_t braid_shm_segset_create(const braid_services_t *svc,
                                       const braid_oob_t      *oob,
                                       braid_status_t local, size_t bytes,
                                       const char           *what,
                                       braid_shm_seg_init_fn init, void *arg,
                                       braid_shm_segset_t *set)
{
    const int      n = oob->size, me = oob->rank;
    name_entry_t   mine;
    name_entry_t  *names  = NULL;
    int32_t       *status = NULL;
    int32_t        mapped;
    braid_status_t st;
    void          *own = NULL;

    memset(set, 0, sizeof(*set));
    memset(&mine, 0, sizeof(mine));
    set->bytes  = bytes;
    set->nranks = n;
    /* Everything that could fail before the exchange is allocated first:
     * without a receive buffer this rank could not even tell its peers. */
    names     = calloc((size_t)n, sizeof(*names));
    status    = calloc((size_t)n, sizeof(*status));
    set->base = calloc((size_t)n, sizeof(void *));
    if (names == NULL || status == NULL || set->base == NULL) {
        st = svc->error(BRAID_ERR_NO_MEMORY,
                        "shm: rank %d: out of memory for "
                        "the %s segments of %d ranks",
                        me, what, n);
        goto out;
    }

    if (local == BRAID_OK) {
        local = seg_create(svc, me, bytes, what, mine.name, &own);
    }
    if (local == BRAID_OK && init != NULL) {
        init(own, bytes, arg);
    }
    mine.status = local;
    if (local != BRAID_OK) {
        mine.name[0] = '\0';
    }
    st = oob->allgather(oob->ctx, &mine, names, sizeof(mine));
    if (st != BRAID_OK) {
        if (own != NULL) {
            shm_unlink(mine.name);
        }
        st = svc->error(st,
                        "shm: rank %d: out-of-band allgather of the %s "
                        "segment names failed (status %d)",
                        me, what, (int)st);
        goto out;
    }
    set->base[me] = own;
    own           = NULL;
    for (int r = 0; r < n; r++) {
        names[r].name[BRAID_SHM_NAME_LEN - 1] = '\0'; /* whatever came */
        status[r]                             = names[r].status;
    }
    st = first_failure(svc, local, status, n, what, "creating");
    if (st != BRAID_OK) {
        unlink_all(svc, me, names, n);
        goto out;
    }

    for (int r = 0; r < n && local == BRAID_OK; r++) {
        if (r != me) {
            local = seg_map_peer(svc, me, r, bytes, what, names[r].name,
                                 &set->base[r]);
        }
    }
    /* Doubles as the barrier after which nobody opens a name again. */
    mapped = local;
    st     = oob->allgather(oob->ctx, &mapped, status, sizeof(mapped));
    unlink_all(svc, me, names, n);
    if (st != BRAID_OK) {
        st = svc->error(st,
                        "shm: rank %d: out-of-band allgather after mapping "
                        "the %s segments failed (status %d)",
                        me, what, (int)st);
        goto out;
    }
    st = first_failure(svc, local, status, n, what, "mapping");

out:
    if (own != NULL) {
        munmap(own, bytes);
    }
    if (st != BRAID_OK) {
        braid_shm_segset_destroy(set);
    }
    free(names);
    free(status);
    return st;
}
