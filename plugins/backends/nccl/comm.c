/* One NCCL communicator per braid communicator (world or split), made
 * from a unique id that rank 0 draws and braid's out-of-band channel
 * carries, at the first collective that needs it.
 *
 * A dead or stuck peer must end in an error, never a hang.  NCCL's kernels
 * wait for peers forever, so every wait here is bounded: a plain call is
 * polled by the core, which fails it after BRAID_TIMEOUT (or as soon as
 * the bootstrap channel reports the peer lost), and the call's cancel then
 * aborts the NCCL communicator, which stops its kernels; stream-ordered
 * calls are watched by a thread that does the same; NCCL's own errors
 * (ncclCommGetAsyncError) end a call at once. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl.h"

#define WATCH_SLOTS     64
#define WATCH_PERIOD_NS 1000000 /* the watchdog looks every millisecond */

typedef struct braid_nccl_watch {
    pthread_t      thread;
    pthread_cond_t wake;
    int            stop;
    int            head, n; /* ring of events still running */
    cudaEvent_t    events[WATCH_SLOTS];
    double         since[WATCH_SLOTS];
} watch_t;

/* ----------------------------------------------------------- creation */

/* What each rank contributes to the model; the slowest wins. */
typedef struct model_print {
    int32_t intra;
    int32_t pad;
    double  intra_gbps, inter_gbps;
} model_print_t;

braid_status_t braid_nccl_comm_create(braid_nccl_comm_t     **out,
                                      const braid_nccl_lib_t *lib,
                                      const braid_oob_t      *oob)
{
    braid_nccl_comm_t *c   = calloc(1, sizeof(*c));
    model_print_t     *all = calloc((size_t)oob->size, sizeof(*all));
    braid_status_t     st  = BRAID_OK;
    cudaError_t        err;
    if (c == NULL || all == NULL) {
        st = braid_nccl_fail(BRAID_ERR_NO_MEMORY, "nccl: out of memory");
        goto fail;
    }
    c->lib  = lib;
    c->oob  = oob;
    c->rank = oob->rank;
    c->size = oob->size;
    pthread_mutex_init(&c->lock, NULL);
    /* Like ncclCommInitRank: the device current when the communicator is
     * made (set it with cudaSetDevice before braid_init). */
    if ((err = lib->get_device(&c->device)) != cudaSuccess) {
        st = braid_nccl_cuda_error(lib, err, "nccl: cudaGetDevice");
        goto fail;
    }
    braid_nccl_links_detect(&c->model, lib, c->device);
    model_print_t mine = {(int32_t)c->model.intra, 0, c->model.intra_gbps,
                          c->model.inter_gbps};
    if ((st = oob->allgather(oob->ctx, &mine, all, sizeof(mine))) != BRAID_OK)
        goto fail;
    for (int r = 0; r < c->size; r++) {
        if (all[r].intra > (int32_t)c->model.intra) /* NVLink < PCI < NET */
            c->model.intra = (braid_nccl_link_t)all[r].intra;
        if (all[r].intra_gbps < c->model.intra_gbps)
            c->model.intra_gbps = all[r].intra_gbps;
        if (all[r].inter_gbps < c->model.inter_gbps)
            c->model.inter_gbps = all[r].inter_gbps;
    }
    free(all);
    *out = c;
    return BRAID_OK;
fail:
    free(all);
    if (c != NULL)
        pthread_mutex_destroy(&c->lock);
    free(c);
    return st;
}

/* Waits, within BRAID_TIMEOUT, until a non-blocking communicator has
 * finished what it does in the background (its set-up, or the connections
 * of a first collective).  lock: c->lock, or NULL while the communicator
 * is not yet shared with the watchdog. */
static braid_status_t settle(braid_nccl_comm_t *c, ncclComm_t comm,
                             pthread_mutex_t *lock, const char *what)
{
    const braid_nccl_lib_t *lib = c->lib;
    double deadline = braid_nccl_host.now() + braid_nccl_host.timeout_s();
    for (;;) {
        braid_status_t st = BRAID_INPROGRESS;
        if (lock != NULL) {
            pthread_mutex_lock(lock);
            comm = c->comm; /* the watchdog may have aborted it */
        }
        ncclResult_t state = ncclSuccess;
        ncclResult_t res   = comm != NULL
                                 ? lib->comm_get_async_error(comm, &state)
                                 : ncclInvalidUsage;
        if (comm == NULL)
            st = braid_nccl_fail(BRAID_ERR_STATE,
                                 "%s: the NCCL communicator "
                                 "was aborted",
                                 what);
        else if (res != ncclSuccess ||
                 (state != ncclSuccess && state != ncclInProgress))
            st = braid_nccl_error(lib, comm, res != ncclSuccess ? res : state,
                                  what);
        else if (state == ncclSuccess)
            st = BRAID_OK;
        if (lock != NULL)
            pthread_mutex_unlock(lock);
        if (st != BRAID_INPROGRESS)
            return st;
        if (braid_nccl_host.now() > deadline)
            return braid_nccl_fail(
                BRAID_ERR_TIMEOUT,
                "%s: NCCL still busy "
                "after BRAID_TIMEOUT=%.1f s: a peer is stuck "
                "or dead",
                what, braid_nccl_host.timeout_s());
        sched_yield();
    }
}

braid_status_t braid_nccl_comm_settle(braid_nccl_comm_t *c, const char *what)
{
    return settle(c, NULL, &c->lock, what);
}

/* Rank 0's unique id to every rank, with rank 0's failure if it had one. */
typedef struct id_print {
    int32_t      res;
    ncclUniqueId id;
} id_print_t;

static braid_status_t share_id(braid_nccl_comm_t *c, ncclUniqueId *id)
{
    id_print_t  mine = {0, {{0}}};
    id_print_t *all  = calloc((size_t)c->size, sizeof(*all));
    if (all == NULL)
        return braid_nccl_fail(BRAID_ERR_NO_MEMORY, "nccl: out of memory");
    if (c->rank == 0)
        mine.res = (int32_t)c->lib->get_unique_id(&mine.id);
    braid_status_t st =
        c->oob->allgather(c->oob->ctx, &mine, all, sizeof(mine));
    if (st == BRAID_OK && all[0].res != ncclSuccess)
        st = braid_nccl_error(c->lib, NULL, (ncclResult_t)all[0].res,
                              "nccl: ncclGetUniqueId on rank 0");
    if (st == BRAID_OK)
        *id = all[0].id;
    free(all);
    return st;
}

static braid_status_t init_comm(braid_nccl_comm_t *c, ncclComm_t *comm)
{
    const braid_nccl_lib_t *lib = c->lib;
    ncclUniqueId            id;
    braid_status_t          st = share_id(c, &id);
    if (st != BRAID_OK)
        return st;
    ncclResult_t res;
    *comm = NULL;
    if (lib->comm_init_rank_config != NULL) {
        /* Non-blocking (NCCL >= 2.14): a peer that dies during the set-up
         * cannot hold this rank past the timeout. */
        nccl_config_t config = {
            sizeof(config),    NCCL_CONFIG_MAGIC, NCCL_CONFIG_VERSION, 0,
            NCCL_CONFIG_UNDEF, NCCL_CONFIG_UNDEF, NCCL_CONFIG_UNDEF,   NULL};
        res = lib->comm_init_rank_config(comm, c->size, id, c->rank, &config);
        c->nonblocking = 1;
    } else {
        res = lib->comm_init_rank(comm, c->size, id, c->rank);
    }
    if (res != ncclSuccess && res != ncclInProgress)
        st = braid_nccl_error(lib, *comm, res,
                              "nccl: creating the NCCL "
                              "communicator");
    else if (c->nonblocking)
        st = settle(c, *comm, NULL, "nccl: creating the NCCL communicator");
    if (st != BRAID_OK && *comm != NULL) {
        lib->comm_abort(*comm);
        *comm = NULL;
    }
    return st;
}

static void fail_locked(braid_nccl_comm_t *c, braid_status_t st,
                        const char *msg)
{
    if (c->comm != NULL) {
        /* Stops the kernels still waiting for peers, and frees the
         * communicator; our stream and event stay. */
        c->lib->comm_abort(c->comm);
        c->comm = NULL;
    }
    if (c->failed == BRAID_OK) {
        c->failed = st;
        snprintf(c->failed_msg, sizeof(c->failed_msg), "%s", msg);
    }
}

braid_status_t braid_nccl_comm_ready(braid_nccl_comm_t *c)
{
    const braid_nccl_lib_t *lib = c->lib;
    braid_status_t          st  = BRAID_OK;
    pthread_mutex_lock(&c->lock);
    if (c->failed != BRAID_OK)
        st = braid_nccl_fail(c->failed,
                             "nccl: the NCCL communicator "
                             "failed earlier: %s",
                             c->failed_msg);
    int ready = c->comm != NULL;
    pthread_mutex_unlock(&c->lock);
    if (st != BRAID_OK || ready)
        return st;

    /* The first call: every rank is here (the watchdog is not yet). */
    int         saved = -1;
    cudaError_t err   = lib->get_device(&saved);
    if (err == cudaSuccess && saved != c->device)
        err = lib->set_device(c->device);
    if (err == cudaSuccess && c->stream == NULL)
        err = lib->stream_create(&c->stream);
    if (err == cudaSuccess && c->done == NULL)
        err = lib->event_create(&c->done, cudaEventDisableTiming);
    if (err == cudaSuccess && c->scratch == NULL)
        err = lib->malloc_dev(&c->scratch, 4);
    if (err != cudaSuccess)
        st = braid_nccl_cuda_error(lib, err,
                                   "nccl: stream, event and scratch "
                                   "memory of the communicator");
    char first[384] = "";
    if (st != BRAID_OK)
        snprintf(first, sizeof(first), "%s", braid_nccl_last_error());
    /* Every rank takes part in the id exchange, even after a local CUDA
     * failure, so that none waits for it. */
    ncclComm_t     comm = NULL;
    braid_status_t ist  = init_comm(c, &comm);
    if (st == BRAID_OK && ist != BRAID_OK) {
        st = ist;
        snprintf(first, sizeof(first), "%s", braid_nccl_last_error());
    }
    if (st != BRAID_OK && comm != NULL) {
        lib->comm_abort(comm);
        comm = NULL;
    }
    if (saved >= 0 && saved != c->device)
        lib->set_device(saved);
    pthread_mutex_lock(&c->lock);
    if (st == BRAID_OK)
        c->comm = comm;
    else
        fail_locked(c, st, first);
    pthread_mutex_unlock(&c->lock);
    if (st != BRAID_OK)
        return braid_nccl_fail(st, "%s", first);
    braid_nccl_host.log(BRAID_LOG_INFO, LOG_COMP,
                        "rank %d of %d: NCCL %s "
                        "communicator on CUDA device %d (%s)",
                        c->rank, c->size, lib->version, c->device,
                        c->nonblocking ? "non-blocking" : "blocking");
    return BRAID_OK;
}

void braid_nccl_comm_abort(braid_nccl_comm_t *c, braid_status_t st,
                           const char *msg)
{
    pthread_mutex_lock(&c->lock);
    fail_locked(c, st, msg);
    pthread_mutex_unlock(&c->lock);
}

/* Caller holds the lock. */
static braid_status_t check_locked(braid_nccl_comm_t *c)
{
    if (c->failed != BRAID_OK)
        return braid_nccl_fail(c->failed, "nccl: %s", c->failed_msg);
    ncclResult_t state = ncclSuccess;
    ncclResult_t res   = c->lib->comm_get_async_error(c->comm, &state);
    if (res == ncclSuccess &&
        (state == ncclSuccess || state == ncclInProgress))
        return BRAID_OK;
    braid_status_t st =
        braid_nccl_error(c->lib, c->comm, res != ncclSuccess ? res : state,
                         "nccl: asynchronous error");
    fail_locked(c, st, braid_nccl_last_error());
    return st;
}

braid_status_t braid_nccl_comm_check(braid_nccl_comm_t *c)
{
    pthread_mutex_lock(&c->lock);
    braid_status_t st = check_locked(c);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* ------------------------------------------------------------ watchdog */

static void *watchdog(void *arg)
{
    braid_nccl_comm_t *c = arg;
    watch_t           *w = c->watch;
    pthread_mutex_lock(&c->lock);
    while (!w->stop) {
        while (w->n > 0 && c->failed == BRAID_OK) {
            cudaError_t err = c->lib->event_query(w->events[w->head]);
            if (err == cudaSuccess) {
                w->head = (w->head + 1) % WATCH_SLOTS;
                w->n--;
                continue;
            }
            char msg[256];
            if (err != cudaErrorNotReady) {
                snprintf(msg, sizeof(msg),
                         "a stream-ordered collective "
                         "failed: CUDA error %d (%s)",
                         err, c->lib->rt_error_string(err));
                fail_locked(c, BRAID_ERR_TRANSPORT, msg);
            } else if (braid_nccl_host.now() - w->since[w->head] >
                       braid_nccl_host.timeout_s()) {
                snprintf(msg, sizeof(msg),
                         "a stream-ordered collective did "
                         "not complete within BRAID_TIMEOUT=%.1f s: a peer is "
                         "stuck or dead (NCCL communicator aborted)",
                         braid_nccl_host.timeout_s());
                fail_locked(c, BRAID_ERR_TIMEOUT, msg);
            } else {
                check_locked(c); /* aborts on NCCL's asynchronous error */
            }
            break;
        }
        if (c->failed != BRAID_OK)
            w->n = 0; /* aborted: the kernels have stopped */
        if (w->n == 0) {
            pthread_cond_wait(&w->wake, &c->lock);
            continue;
        }
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += WATCH_PERIOD_NS;
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&w->wake, &c->lock, &t);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Caller holds the lock. */
static braid_status_t watch_start(braid_nccl_comm_t *c)
{
    watch_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return braid_nccl_fail(BRAID_ERR_NO_MEMORY, "nccl: out of memory");
    for (int i = 0; i < WATCH_SLOTS; i++) {
        cudaError_t err =
            c->lib->event_create(&w->events[i], cudaEventDisableTiming);
        if (err != cudaSuccess) {
            while (i-- > 0)
                c->lib->event_destroy(w->events[i]);
            free(w);
            return braid_nccl_cuda_error(c->lib, err, "nccl: watchdog events");
        }
    }
    pthread_cond_init(&w->wake, NULL);
    c->watch = w;
    if (pthread_create(&w->thread, NULL, watchdog, c) != 0) {
        c->watch = NULL;
        pthread_cond_destroy(&w->wake);
        for (int i = 0; i < WATCH_SLOTS; i++)
            c->lib->event_destroy(w->events[i]);
        free(w);
        return braid_nccl_fail(BRAID_ERR_NO_MEMORY, "nccl: cannot start "
                                                    "the watchdog thread");
    }
    return BRAID_OK;
}

braid_status_t braid_nccl_comm_watch(braid_nccl_comm_t *c, cudaStream_t stream)
{
    braid_status_t st = BRAID_OK;
    if (c->watch == NULL && (st = watch_start(c)) != BRAID_OK)
        return st;
    watch_t *w = c->watch;
    /* Full: wait for the oldest (the watchdog bounds that wait). */
    while (w->n == WATCH_SLOTS && c->failed == BRAID_OK) {
        pthread_mutex_unlock(&c->lock);
        sched_yield();
        pthread_mutex_lock(&c->lock);
    }
    if (c->failed != BRAID_OK)
        return braid_nccl_fail(c->failed, "nccl: %s", c->failed_msg);
    int         slot = (w->head + w->n) % WATCH_SLOTS;
    cudaError_t err  = c->lib->event_record(w->events[slot], stream);
    if (err != cudaSuccess)
        return braid_nccl_cuda_error(c->lib, err,
                                     "nccl: cudaEventRecord on "
                                     "the caller's stream");
    w->since[slot] = braid_nccl_host.now();
    w->n++;
    pthread_cond_signal(&w->wake);
    return BRAID_OK;
}

/* ---------------------------------------------------------- destruction */

void braid_nccl_comm_destroy(braid_nccl_comm_t *c)
{
    if (c == NULL)
        return;
    const braid_nccl_lib_t *lib = c->lib;
    if (c->watch != NULL) {
        pthread_mutex_lock(&c->lock);
        c->watch->stop = 1;
        pthread_cond_signal(&c->watch->wake);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->watch->thread, NULL);
    }
    /* A healthy communicator is finalised (its last calls flushed; in the
     * background for a non-blocking one, waited for within the timeout)
     * and destroyed; one that cannot finish in time, or a failed one, is
     * aborted. */
    if (c->comm != NULL) {
        ncclResult_t res = lib->comm_finalize != NULL
                               ? lib->comm_finalize(c->comm)
                               : ncclSuccess;
        if ((res == ncclSuccess || res == ncclInProgress) &&
            (!c->nonblocking ||
             settle(c, c->comm, NULL, "nccl: finalising") == BRAID_OK))
            lib->comm_destroy(c->comm);
        else
            lib->comm_abort(c->comm);
    }
    if (c->watch != NULL) {
        for (int i = 0; i < WATCH_SLOTS; i++)
            lib->event_destroy(c->watch->events[i]);
        pthread_cond_destroy(&c->watch->wake);
        free(c->watch);
    }
    if (c->done != NULL)
        lib->event_destroy(c->done);
    if (c->stream != NULL)
        lib->stream_destroy(c->stream);
    if (c->scratch != NULL)
        lib->free_dev(c->scratch);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
