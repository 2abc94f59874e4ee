/* Single-copy reads (BRAID_CAP_GET) through cross-memory attach.
 *
 * process_vm_readv copies straight from a peer's address space into this
 * rank's: one copy, done by the reader, with no help from the peer and no
 * shared segment in between.  So `get` reads any buffer a peer exposed by
 * its address (mem_expose only writes the address into the key).
 *
 * Whether the kernel lets one rank read another is decided per process
 * pair: the same user (or CAP_SYS_PTRACE), a dumpable target, Yama's
 * kernel.yama.ptrace_scope (absent or 0: allowed; 1: only a descendant,
 * which sibling ranks are not; 2: CAP_SYS_PTRACE only; 3: never), seccomp
 * or a container's profile (EPERM or ENOSYS).  Rather than predict it,
 * comm_create tries it: every rank reads a random word from every peer's
 * fifo header through the peer's own address of it, and one oob allgather
 * of the verdicts makes every rank decide the same (the path is used only
 * if every read of every rank worked).  BRAID_SHM_CMA=off skips the test
 * (the copy path then serves large messages), =on makes comm_create fail
 * when the path is missing, auto (the default) takes it when it works.
 *
 * A dead peer's pid may be taken by another process; a read from it would
 * copy someone else's memory.  Each rank holds a pidfd of every peer from
 * the test read on (while it is known to be that peer), and checks after
 * every get that the peer had not exited when the read ended: a pid is not
 * reused before its process has exited. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm.h"

/* Declared link of the get path (docs/performance.md, "single-copy reads"):
 * a syscall and the pinning of the pages it touches make a get cost more
 * than a put to start, and under contention a rank reads at about the rate
 * a memcpy from a peer's mapping reaches. */
#define GET_ALPHA_US  1.0
#define GET_BETA_GBPS 4.0

enum { CMA_AUTO = 0, CMA_ON, CMA_OFF };
enum { V_OK = 0, V_OFF, V_PIDNS, V_ERRNO, V_DIFFERS };

/* One rank's verdict, allgathered. */
typedef struct cma_verdict {
    int32_t what;  /* V_* */
    int32_t peer;  /* the peer it failed on */
    int32_t err;   /* errno of the failed read */
    int32_t scope; /* kernel.yama.ptrace_scope, -1 absent */
} cma_verdict_t;

/* BRAID_SHM_CMA: auto (also unset or empty), on or 1, off or 0. */
static braid_status_t parse_mode(const braid_services_t *svc, int *mode)
{
    static const struct {
        const char *word;
        int         mode;
    } words[]           = {{"auto", CMA_AUTO},
                           {"on", CMA_ON},
                           {"1", CMA_ON},
                           {"off", CMA_OFF},
                           {"0", CMA_OFF}};
    const char *v       = getenv("BRAID_SHM_CMA");
    size_t      longest = 0;

    *mode = CMA_AUTO;
    if (v == NULL || *v == '\0')
        return BRAID_OK;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        size_t k = 0;
        if (strcmp(v, words[i].word) == 0) {
            *mode = words[i].mode;
            return BRAID_OK;
        }
        while (v[k] != '\0' && v[k] == words[i].word[k])
            k++;
        if (k > longest)
            longest = k;
    }
    /* Points at the first character no valid value continues with; said
     * at warn too, since the core only logs why a transport did not open. */
    char msg[160];
    if (snprintf(msg, sizeof(msg),
                 "BRAID_SHM_CMA='%.40s': unexpected %s at "
                 "position %zu (expected auto, on or off)",
                 v, v[longest] ? "character" : "end", longest) < 0)
        msg[0] = '\0';
    svc->log(BRAID_LOG_WARN, BRAID_SHM_COMPONENT, "%s", msg);
    return svc->error(BRAID_ERR_PARSE, "shm: %s", msg);
}

static int ptrace_scope(void)
{
    int   scope = -1;
    FILE *f     = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    if (f != NULL) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = -1;
        fclose(f);
    }
    return scope;
}

static int pidfd_of(int64_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/* Reads the nonce of peer p's header through the peer's address space. */
static cma_verdict_t test_read(braid_shm_comm_t *comm, int p)
{
    const braid_shm_hdr_t *h      = comm->fifo.base[p];
    cma_verdict_t          v      = {.what = V_OK, .peer = p, .scope = -1};
    uint64_t               got[2] = {0, 0};

    if (h->pidns == 0 || h->pidns != comm->hdr->pidns) {
        v.what = V_PIDNS;
        return v;
    }
    struct iovec local  = {got, sizeof(got)};
    struct iovec remote = {
        (void *)(uintptr_t)(h->cma_addr + offsetof(braid_shm_hdr_t, cma_addr)),
        sizeof(got)};
    /* pidfd first: if the read below finds the nonce, the pidfd refers to
     * the very process that holds it. */
    comm->cma_pidfd[p] = pidfd_of(h->pid);
    ssize_t n = process_vm_readv((pid_t)h->pid, &local, 1, &remote, 1, 0);
    if (n != (ssize_t)sizeof(got)) {
        v.what  = V_ERRNO;
        v.err   = n < 0 ? errno : EIO;
        v.scope = ptrace_scope();
    } else if (got[0] != h->cma_addr || got[1] != h->cma_nonce) {
        v.what = V_DIFFERS;
    }
    comm->cma_pid[p] = h->pid;
    return v;
}

static void explain(char *why, size_t len, const cma_verdict_t *v, int rank)
{
    char ebuf[96];
    switch (v->what) {
    case V_OFF:
        snprintf(why, len, "disabled by BRAID_SHM_CMA=off (rank %d)", rank);
        break;
    case V_PIDNS:
        snprintf(why, len, "ranks %d and %d are in different pid namespaces",
                 rank, v->peer);
        break;
    case V_DIFFERS:
        snprintf(why, len,
                 "rank %d read other data than rank %d's at its "
                 "address (pid not rank %d's?)",
                 rank, v->peer, v->peer);
        break;
    default:
        /* (The result is used: a longer reason is cut, on purpose.) */
        if (snprintf(why, len,
                     "rank %d may not read rank %d's memory: "
                     "process_vm_readv: %s (%s%s%d%s)",
                     rank, v->peer, strerror_r(v->err, ebuf, sizeof(ebuf)),
                     v->err == EPERM
                         ? "another user, a non-dumpable process, a "
                           "container's policy, or "
                         : "",
                     "kernel.yama.ptrace_scope=", v->scope,
                     v->scope < 0    ? ": absent"
                     : v->scope == 0 ? ""
                     : v->scope == 1 ? ": descendants only"
                     : v->scope == 2 ? ": CAP_SYS_PTRACE only"
                                     : ": never") < 0)
            why[0] = '\0';
        break;
    }
}

braid_status_t braid_shm_cma_setup(braid_shm_comm_t *comm)
{
    const braid_services_t *svc  = comm->svc;
    cma_verdict_t           mine = {.what = V_OK, .peer = -1, .scope = -1};
    cma_verdict_t          *all;
    int                     mode;
    braid_status_t          st;

    comm->cma_pid   = calloc((size_t)comm->size, sizeof(*comm->cma_pid));
    comm->cma_pidfd = malloc((size_t)comm->size * sizeof(int));
    all             = calloc((size_t)comm->size, sizeof(*all));
    if (comm->cma_pid == NULL || comm->cma_pidfd == NULL || all == NULL) {
        free(all);
        return svc->error(BRAID_ERR_NO_MEMORY, "shm: rank %d: out of memory",
                          comm->rank);
    }
    for (int p = 0; p < comm->size; p++)
        comm->cma_pidfd[p] = -1;
    /* A malformed value still takes part in the exchange (as "off"), so
     * that the peers do not wait for this rank; the error comes after. */
    braid_status_t parse = parse_mode(svc, &mode);
    if (parse != BRAID_OK || mode == CMA_OFF)
        mine.what = V_OFF;
    for (int i = 1; i < comm->size && mine.what == V_OK; i++) {
        int p = (comm->rank + i) % comm->size;
        mine  = test_read(comm, p);
    }
    st = comm->oob.allgather(comm->oob.ctx, &mine, all, sizeof(mine));
    if (st == BRAID_OK) {
        comm->cma_ok = 1;
        for (int r = 0; r < comm->size && comm->cma_ok; r++)
            if (all[r].what != V_OK) {
                comm->cma_ok = 0;
                explain(comm->cma_why, sizeof(comm->cma_why), &all[r], r);
            }
    }
    free(all);
    if (st != BRAID_OK)
        return st;
    if (parse != BRAID_OK)
        return parse;
    if (comm->cma_ok)
        comm->map_ok =
            braid_shm_map_probe(comm, comm->map_why, sizeof(comm->map_why));
    if (!comm->cma_ok) {
        braid_shm_cma_release(comm);
        if (mode == CMA_ON)
            return svc->error(BRAID_ERR_UNAVAILABLE,
                              "shm: BRAID_SHM_CMA=on, "
                              "but single-copy reads are unavailable: %s",
                              comm->cma_why);
    }
    return BRAID_OK;
}

void braid_shm_cma_release(braid_shm_comm_t *comm)
{
    braid_shm_map_release(comm);
    comm->map_ok = 0;
    if (comm->cma_pidfd != NULL)
        for (int p = 0; p < comm->size; p++)
            if (comm->cma_pidfd[p] >= 0)
                close(comm->cma_pidfd[p]);
    free(comm->cma_pidfd);
    free(comm->cma_pid);
    comm->cma_pidfd = NULL;
    comm->cma_pid   = NULL;
}

braid_status_t braid_shm_get_link(void *tcomm, double *alpha_us,
                                  double *beta_gbps, char *why, size_t why_len)
{
    braid_shm_comm_t *comm = tcomm;
    if (!comm->cma_ok) {
        snprintf(why, why_len, "%s", comm->cma_why);
        return BRAID_ERR_UNAVAILABLE;
    }
    *alpha_us  = GET_ALPHA_US;
    *beta_gbps = GET_BETA_GBPS;
    snprintf(why, why_len, "cross-memory attach (process_vm_readv)%s%s",
             comm->map_ok ? "; braid_mem_alloc buffers mapped (pidfd_getfd)"
                          : "; braid_mem_alloc buffers not mapped: ",
             comm->map_ok ? "" : comm->map_why);
    return BRAID_OK;
}

/* Nothing to register: peers read by address, or map a braid_mem_alloc
 * buffer's file (mapped.c). */
braid_status_t braid_shm_mem_expose(void *tcomm, const void *buf, size_t len,
                                    braid_rkey_t *key, void **handle)
{
    memset(key, 0, sizeof(*key));
    key->addr = (uint64_t)(uintptr_t)buf;
    key->len  = (uint64_t)len;
    *handle   = NULL;
    braid_shm_map_key(tcomm, buf, len, key);
    return BRAID_OK;
}

void braid_shm_mem_unexpose(void *tcomm, void *handle)
{
    (void)tcomm, (void)handle;
}

/* 1 when the peer's process has exited (its pidfd is readable). */
static int peer_exited(const braid_shm_comm_t *comm, int peer)
{
    struct pollfd pfd = {.fd = comm->cma_pidfd[peer], .events = POLLIN};
    return pfd.fd >= 0 && poll(&pfd, 1, 0) > 0;
}

braid_status_t braid_shm_get(void *tcomm, int peer, const braid_rkey_t *key,
                             size_t off, void *dst, size_t len,
                             braid_treq_t *req)
{
    braid_shm_comm_t *comm = tcomm;
    char              ebuf[96];

    req->handle = NULL;
    req->active = 0;
    if (!comm->cma_ok)
        return comm->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "shm: rank %d: get "
                                "from rank %d: single-copy reads are "
                                "unavailable on this communicator: %s",
                                comm->rank, peer, comm->cma_why);
    if ((unsigned)peer >= (unsigned)comm->size || peer == comm->rank ||
        key == NULL || off > key->len || len > key->len - off)
        return comm->svc->error(BRAID_ERR_INVALID_ARG,
                                "shm: rank %d: get of "
                                "%zu bytes at %zu from rank %d: outside the "
                                "%llu bytes it exposed (or no such peer)",
                                comm->rank, len, off, peer,
                                key ? (unsigned long long)key->len : 0ull);
    braid_status_t st;
    if (braid_shm_map_get(comm, peer, key, off, dst, len, &st)) {
        if (st != BRAID_OK)
            return st;
        goto check;
    }
    size_t done = 0;
    while (done < len) {
        struct iovec local  = {(char *)dst + done, len - done};
        struct iovec remote = {(void *)(uintptr_t)(key->addr + off + done),
                               len - done};
        ssize_t n = process_vm_readv((pid_t)comm->cma_pid[peer], &local, 1,
                                     &remote, 1, 0);
        if (n <= 0) {
            int err = n < 0 ? errno : EFAULT;
            if (err == EINTR)
                continue;
            if (err == ESRCH || peer_exited(comm, peer))
                return comm->svc->error(BRAID_ERR_PEER,
                                        "shm: rank %d: rank "
                                        "%d (pid %lld) has exited",
                                        comm->rank, peer,
                                        (long long)comm->cma_pid[peer]);
            return comm->svc->error(BRAID_ERR_TRANSPORT,
                                    "shm: rank %d: get "
                                    "of %zu bytes from rank %d's buffer at "
                                    "0x%llx+%zu: process_vm_readv: %s",
                                    comm->rank, len - done, peer,
                                    (unsigned long long)key->addr, off + done,
                                    strerror_r(err, ebuf, sizeof(ebuf)));
        }
        done += (size_t)n;
    }
check:
    if (peer_exited(comm, peer))
        return comm->svc->error(BRAID_ERR_PEER,
                                "shm: rank %d: rank %d (pid "
                                "%lld) has exited",
                                comm->rank, peer,
                                (long long)comm->cma_pid[peer]);
    return BRAID_OK;
}
