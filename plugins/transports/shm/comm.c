/* The "shm" transport's communicator: probe, create, destroy, link. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "shm.h"

/* Declared, not measured: the cost model only needs to rank candidates, and
 * every rank must feed it the same numbers without talking.
 *  - put_signal: a message is one cache line changing cores (store on one,
 *    miss on the other); the data is one copy into the peer's mapping.
 *  - send/receive: the sender copies into a 16 KiB cell, the receiver copies
 *    out, and every cell is a hand-off between the two, so a message costs a
 *    few line transfers and the stream pays two copies plus a hand-off per
 *    cell: slower than puts at every size (docs/performance.md). */
#define PUT_ALPHA_US  0.1
#define PUT_BETA_GBPS 10.0
#define SR_ALPHA_US   0.4
#define SR_BETA_GBPS  2.0

braid_status_t braid_shm_probe(const braid_transport_t *self,
                               const braid_services_t *svc, char *why,
                               size_t why_len)
{
    char        name[BRAID_SHM_NAME_LEN], ebuf[128];
    const char *step = "shm_open";
    void       *p    = MAP_FAILED;
    int         fd = -1, err = 0;
    size_t      bytes = braid_shm_seg_round(1);

    (void)self;
    /* A real segment, as comm_create makes them: /dev/shm may exist and
     * still be read-only, full, or not a tmpfs that supports mmap. */
    if (braid_shm_seg_name(svc, name) != BRAID_OK) {
        snprintf(why, why_len, "cannot build a segment name");
        return BRAID_ERR_UNAVAILABLE;
    }
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        step = "ftruncate";
        if (ftruncate(fd, (off_t)bytes) == 0) {
            step = "mmap";
            p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        }
    }
    err = errno;
    if (p != MAP_FAILED) {
        *(volatile uint64_t *)p = 1;
        munmap(p, bytes);
    }
    if (fd >= 0) {
        close(fd);
        shm_unlink(name);
    }
    if (p == MAP_FAILED) {
        snprintf(why, why_len, "/dev/shm not usable: %s: %s", step,
                 strerror_r(err, ebuf, sizeof(ebuf)));
        return BRAID_ERR_UNAVAILABLE;
    }
    return BRAID_OK;
}

static void fifo_init(void *base, size_t bytes, void *arg)
{
    braid_shm_comm_t *comm = arg;
    braid_shm_hdr_t  *hdr  = base;

    hdr->magic  = BRAID_SHM_MAGIC;
    hdr->bytes  = bytes;
    hdr->rank   = comm->rank;
    hdr->nranks = comm->size;
    braid_shm_live_init(hdr);
    /* For the cross-memory attach test (cma.c): the peers read these two
     * words through this process's own address of them. */
    hdr->cma_addr = (uint64_t)(uintptr_t)base;
    if (getrandom(&hdr->cma_nonce, sizeof(hdr->cma_nonce), GRND_NONBLOCK) !=
        (ssize_t)sizeof(hdr->cma_nonce))
        hdr->cma_nonce = (uint64_t)getpid() * UINT64_C(0x9e3779b97f4a7c15) ^
                         (uint64_t)(uintptr_t)base;
}

static braid_shm_ring_t *ring_of(void *base, int sender)
{
    return (braid_shm_ring_t *)(void *)((char *)base + BRAID_SHM_RINGS_OFF +
                                        (size_t)sender *
                                            sizeof(braid_shm_ring_t));
}

/* Faults in the pages of every ring this rank reads (its own segment) and
 * writes (its ring in each peer's), so that no message pays for it: a ring
 * goes round its cells one message after the other, and a cell's first
 * message paid a page fault at both ends, a few microseconds a page -- the
 * first BRAID_SHM_NCELLS messages to a peer ran several times slower than
 * the rest, which a trial of the dispatcher (a few calls a candidate) took
 * for the candidate's speed.  Changes no byte, so it may run while peers
 * already write; where the kernel lacks MADV_POPULATE_WRITE (before Linux
 * 5.14) the pages fault in on first use as before. */
static void prefault_rings(braid_shm_comm_t *comm)
{
#ifdef MADV_POPULATE_WRITE
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int p = 0; p < comm->size; p++) {
        char     *lo  = p == comm->rank ? (char *)comm->fifo.base[p]
                                        : (char *)comm->out[p].ring;
        size_t    len = p == comm->rank ? comm->fifo.bytes
                                        : sizeof(braid_shm_ring_t);
        uintptr_t a = (uintptr_t)lo & ~(uintptr_t)(page - 1);
        len += (size_t)((uintptr_t)lo - a);
        (void)madvise((void *)a, len, MADV_POPULATE_WRITE);
    }
#else
    (void)comm;
#endif
}

static void comm_free(braid_shm_comm_t *comm)
{
    if (comm == NULL) {
        return;
    }
    if (comm->wake_ok) {
        comm->svc->log(BRAID_LOG_DEBUG, BRAID_SHM_COMPONENT,
                       "rank %d: slept "
                       "%llu times (%llu until the 1 ms limit), woke peers "
                       "%llu times",
                       comm->rank, (unsigned long long)comm->n_sleeps,
                       (unsigned long long)comm->n_sleep_timeouts,
                       (unsigned long long)comm->n_wakes);
    }
    braid_shm_cma_release(comm);
    braid_shm_rmem_release_all(comm);
    braid_shm_recv_release(comm);
    braid_shm_ops_release(comm);
    braid_shm_segset_destroy(&comm->fifo);
    free(comm->in);
    free(comm->out);
    free(comm);
}

static braid_status_t shm_comm_create(const braid_transport_t *self,
                                      const braid_services_t  *svc,
                                      const braid_oob_t       *oob,
                                      const braid_topo_t *topo, void **tcomm)
{
    braid_shm_comm_t *comm;
    braid_status_t    local = BRAID_OK, st;
    size_t            bytes;
    long              ncpu;

    (void)self;
    if (svc == NULL || oob == NULL || tcomm == NULL || oob->size < 1 ||
        oob->rank < 0 || oob->rank >= oob->size) {
        return svc ? svc->error(BRAID_ERR_INVALID_ARG,
                                "shm: comm_create: bad arguments")
                   : BRAID_ERR_INVALID_ARG;
    }
    *tcomm = NULL;
    /* Every rank sees the same topology, so every rank refuses here alike,
     * before any oob call. */
    if (topo == NULL || topo->nnodes != 1) {
        return svc->error(BRAID_ERR_UNAVAILABLE,
                          "shm: the communicator spans "
                          "%d hosts; shared memory serves ranks of one host "
                          "only",
                          topo ? topo->nnodes : -1);
    }
    if ((size_t)oob->size >
        (SIZE_MAX - BRAID_SHM_RINGS_OFF) / sizeof(braid_shm_ring_t)) {
        return svc->error(BRAID_ERR_UNAVAILABLE, "shm: %d ranks: too many",
                          oob->size);
    }
    bytes = braid_shm_seg_round(BRAID_SHM_RINGS_OFF +
                                (size_t)oob->size * sizeof(braid_shm_ring_t));

    comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        return svc->error(BRAID_ERR_NO_MEMORY, "shm: out of memory for a "
                                               "communicator");
    }
    comm->svc        = svc;
    comm->oob        = *oob;
    comm->rank       = oob->rank;
    comm->size       = oob->size;
    comm->lost_peer  = -1;
    comm->rmems.prev = comm->rmems.next = &comm->rmems;
    comm->link.struct_size              = sizeof(comm->link);
    comm->link.alpha_us                 = SR_ALPHA_US;
    comm->link.beta_gbps                = SR_BETA_GBPS;
    comm->link.put_alpha_us             = PUT_ALPHA_US;
    comm->link.put_beta_gbps            = PUT_BETA_GBPS;
    comm->in  = calloc((size_t)comm->size, sizeof(*comm->in));
    comm->out = calloc((size_t)comm->size, sizeof(*comm->out));
    if (comm->in == NULL || comm->out == NULL) {
        local = svc->error(BRAID_ERR_NO_MEMORY,
                           "shm: rank %d: out of memory "
                           "for %d peers",
                           comm->rank, comm->size);
    }

    /* A local failure still goes through the exchange: peers fail with a
     * message naming this rank instead of waiting in the oob. */
    st = braid_shm_segset_create(svc, oob, local, bytes, "fifo", fifo_init,
                                 comm, &comm->fifo);
    if (st != BRAID_OK) {
        comm_free(comm);
        return st;
    }
    comm->hdr = comm->fifo.base[comm->rank];
    for (int p = 0; p < comm->size; p++) {
        comm->in[p].ring  = ring_of(comm->fifo.base[comm->rank], p);
        comm->out[p].ring = ring_of(comm->fifo.base[p], comm->rank);
    }
    prefault_rings(comm);
    /* Collective like the segments: every rank decides the same. */
    st = braid_shm_cma_setup(comm);
    if (st != BRAID_OK) {
        comm_free(comm);
        return st;
    }
    if (comm->rank == 0)
        svc->log(BRAID_LOG_INFO, BRAID_SHM_COMPONENT,
                 "%d ranks: large "
                 "messages: %s%s",
                 comm->size,
                 comm->cma_ok
                     ? "single-copy reads (cross-memory attach, "
                       "process_vm_readv)"
                     : "copy path through shared memory; single-copy reads "
                       "unavailable: ",
                 comm->cma_ok ? "" : comm->cma_why);
    /* Peers may sleep in wait() only on a host with more ranks than cores
     * and while the core's BRAID_SLEEP_POLLS is on (the same on every rank,
     * or the communicator would not exist): only then do senders ring. */
    ncpu          = sysconf(_SC_NPROCESSORS_ONLN);
    comm->wake_ok = topo->ppn > (ncpu > 0 ? ncpu : 1) &&
                    BRAID_HAS(svc, braid_services_t, sleep_polls) &&
                    svc->sleep_polls() > 0;
    *tcomm = comm;
    return BRAID_OK;
}

static void shm_comm_destroy(void *tcomm)
{
    /* Not collective, and nothing to flush: a completed send is already in
     * the receiver's ring, which stays readable through its own mapping. */
    comm_free(tcomm);
}

static void shm_link(void *tcomm, braid_link_t *link)
{
    const braid_link_t *mine = &((braid_shm_comm_t *)tcomm)->link;
    link->alpha_us           = mine->alpha_us;
    link->beta_gbps          = mine->beta_gbps;
    link->put_alpha_us       = mine->put_alpha_us;
    link->put_beta_gbps      = mine->put_beta_gbps;
}

const braid_transport_t braid_shm_transport = {
    .struct_size = sizeof(braid_transport_t),
    .name        = "shm",
    .caps        = BRAID_CAP_PUT_SIGNAL | BRAID_CAP_SENDRECV | BRAID_CAP_GET |
            BRAID_CAP_LOAD,
    .mem_types    = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .probe        = braid_shm_probe,
    .comm_create  = shm_comm_create,
    .comm_destroy = shm_comm_destroy,
    .link         = shm_link,
    .isend        = braid_shm_isend,
    .irecv        = braid_shm_irecv,
    .test         = braid_shm_test,
    .progress     = braid_shm_progress,
    .cancel       = braid_shm_cancel,
    .mem_alloc    = braid_shm_mem_alloc,
    .mem_free     = braid_shm_mem_free,
    .put_signal   = braid_shm_put_signal,
    .wait         = braid_shm_wait,
    .get_link     = braid_shm_get_link,
    .mem_expose   = braid_shm_mem_expose,
    .mem_unexpose = braid_shm_mem_unexpose,
    .get          = braid_shm_get,
    .mem_peer     = braid_shm_mem_peer,
};
