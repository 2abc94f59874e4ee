/* The communicator and its queue of collective operations (internal). */
#ifndef BRAID_CORE_COMM_H
#define BRAID_CORE_COMM_H

#include <stdatomic.h>

#include <braid/plugin.h>

#include "bootstrap/bootstrap.h"
#include "comm/online.h"
#include "comm/sig.h"
#include "cuda/route.h"
#include "hier/hier.h"
#include "loader/loader.h"
#include "select/select.h"
#include "select/spec.h"

/* One collective call in the communicator's FIFO.  Calls complete in the order
 * they were issued: only the head makes progress. */
typedef struct braid_call {
    braid_task_t       task;
    braid_candidate_t *cand; /* NULL: completed locally (size 1, empty) */
    int                started;
    int                done;
    braid_status_t     status;
    braid_wait_t       wait;    /* what start/progress said it waits for */
    int                stream;  /* repeats the call before it (wait.c) */
    double             t_start; /* 0 until the first look at the clock */
    unsigned           polls;   /* progress calls that found it running */
    /* A trial call of online tuning (comm/online.c): its time goes there. */
    struct braid_online_slot *trial;
    struct braid_widen       *widen; /* integer AVG's scratch (comm/avg.c) */
    struct braid_call        *next;
    /* Last: only written on failure, so a call clears the fields above it
     * and not these 512 bytes (the decode path issues ~10 KiB calls in a
     * tight loop). */
    char error[512]; /* message when status != OK */
} braid_call_t;

/* An algorithm every rank has (not a backend), and its plugin's name. */
typedef struct braid_agreed_algo {
    const braid_algo_t *algo;
    const char         *plugin;
} braid_agreed_algo_t;

struct braid_request {
    braid_call_t  call; /* first: the queue links requests by their call */
    braid_comm_t *comm;
};

struct braid_comm {
    int                         rank, size;
    braid_bootstrap_t          *bs;
    braid_oob_t                 oob;
    const braid_plugin_table_t *plugins;

    braid_topo_t   topo;
    int           *node_of_rank;
    int           *cpu_of_rank;
    unsigned char *cpu_mate;    /* topo.mates */
    int            machine_ppn; /* most ranks on one machine
                                   (emulated hosts share it) */
    char topo_why[384];         /* how topo.kind was decided */

    int         ntls;
    braid_tl_t *tls;
    /* [ntls]: what each transport said of its get path (BRAID_CAP_GET) on
     * this communicator, for BRAID_DEBUG=info and braid-info: "" without
     * the capability, else "available" or why not. */
    char (*tl_get_why)[160];
    /* Transports every rank has that did not open on this communicator
     * (shm, when it spans hosts): hier/ opens them on each host. */
    int                       ntl_local;
    const braid_transport_t **tl_local;
    /* The algorithms every rank has, backends aside (hier/ builds the
     * levels' candidates from them). */
    int                  nalgos;
    braid_agreed_algo_t *algos;
    /* hier/: the levels and composite candidates; NULL without them. */
    braid_hier_t *hier;

    braid_algo_spec_t override;
    braid_tune_t      tune;
    braid_selector_t  sel;
    braid_online_t    online; /* comm/online.c */

    uint64_t seq;
    int      check;          /* BRAID_CHECK: compare every call */
    int      oversubscribed; /* more ranks than cores */
    unsigned sleep_polls;    /* BRAID_SLEEP_POLLS */
    /* The last call issued, to tell a stream of identical calls. */
    braid_coll_t  last_coll;
    size_t        last_bytes;
    const void   *last_cand;
    double        last_health; /* last failure-detector look */
    double        timeout_s;   /* BRAID_TIMEOUT at creation */
    braid_call_t *head, *tail;
    int           pending_requests;

    braid_status_t failed; /* BRAID_OK while usable */
    char           failed_msg[512];

    /* comm/entry.c: 0 while no thread is inside; else the thread's id and
     * the braid_api_t it called. */
    _Atomic uint64_t inside;

    /* comm/board.c: this rank's progress record, in the host's board
     * (board, board_len bytes) when there is one. */
    braid_progress_t *progress;
    braid_progress_t *board;
    size_t            board_len;
    int               world; /* from braid_init (not a split) */
    /* comm/calib.c: where the link figures came from. */
    struct braid_calib_state *calib;
};

/* comm/entry.c: the thread model (braid.h, Threads).  Every public call
 * that works on a communicator takes it first and leaves it on return. */
typedef enum {
    BRAID_API_ALLREDUCE = 1, /* 0 is "nobody inside" */
    BRAID_API_REDUCE_SCATTER,
    BRAID_API_ALLGATHER,
    BRAID_API_BROADCAST,
    BRAID_API_BARRIER,
    BRAID_API_IALLREDUCE,
    BRAID_API_TEST,
    BRAID_API_WAIT,
    BRAID_API_SPLIT,
    BRAID_API_FINALIZE,
    BRAID_API_COUNT
} braid_api_t;

const char *braid_api_name(braid_api_t fn);
/* The kernel's id of the calling thread, read once per thread: it names
 * threads in messages as ps and gdb do, and is unique among live ones. */
/* initial-exec: read straight from the thread pointer instead of through
 * a TLS descriptor call on every call's entry; four bytes of the static
 * TLS that a dlopen'd libbraid can still get. */
extern _Thread_local uint32_t braid_self_tid
    __attribute__((tls_model("initial-exec")));
uint32_t               braid_thread_id_slow(void);
static inline uint32_t braid_thread_id(void)
{
    uint32_t t = braid_self_tid;
    return __builtin_expect(t != 0, 1) ? t : braid_thread_id_slow();
}
/* BRAID_ERR_STATE: thread me called fn while owner (the entry word) was
 * inside. */
braid_status_t braid_comm_refuse(braid_api_t fn, uint64_t owner, uint32_t me);

/* BRAID_OK, or BRAID_ERR_STATE naming this thread and the one inside.
 * Inline: one compare-and-swap on every call's path. */
static inline braid_status_t braid_comm_enter(braid_comm_t *comm,
                                              braid_api_t   fn)
{
    uint32_t me  = braid_thread_id();
    uint64_t cur = 0;
    if (__builtin_expect(atomic_compare_exchange_strong_explicit(
                             &comm->inside, &cur, (uint64_t)me << 8 | fn,
                             memory_order_acquire, memory_order_relaxed),
                         1))
        return BRAID_OK;
    return braid_comm_refuse(fn, cur, me);
}
/* 1 when taken, 0 when another thread is inside (nothing recorded). */
int braid_comm_try_enter(braid_comm_t *comm, braid_api_t fn);
/* Waits (yielding) for another thread to leave, up to BRAID_TIMEOUT. */
braid_status_t     braid_comm_enter_wait(braid_comm_t *comm, braid_api_t fn);
static inline void braid_comm_leave(braid_comm_t *comm)
{
    atomic_store_explicit(&comm->inside, 0, memory_order_release);
}

/* comm/board.c: the host's progress board.  open is collective; without
 * a board, progress is recorded in private memory. */
braid_status_t braid_board_open(braid_comm_t *comm);
void           braid_board_close(braid_comm_t *comm);
/* Rank r's record on this host's board, or NULL. */
braid_progress_t *braid_board_slot(braid_comm_t *comm, int r);

/* comm/inquiry.c: hands the bootstrap channel the failure inquiry's hooks. */
void braid_comm_inquiry_attach(braid_comm_t *comm);
/* The head call failed, here (here = 1: st, and braid_last_error() says
 * what this rank saw) or elsewhere (here = 0: the failure detector's
 * verdict is the last error).  A failure seen on one rank is often only
 * the echo of one elsewhere -- a survivor of a stopped rank times out like
 * every other, and may blame whichever peer its algorithm waited for -- so
 * a local one is put to the failure inquiry first.  Completes the call
 * with the verdict, then what this rank saw ("(here: ...)").  Returns its
 * status. */
braid_status_t braid_call_failed(braid_comm_t *comm, braid_call_t *call,
                                 braid_status_t st, int here);

/* comm/launcher.c: lines for braidrun (BRAID_LAUNCHER_FD). */
void braid_launcher_init(void);
void braid_launcher_finalize(void);
void braid_launcher_blame(long pid, const char *text);

/* comm/setup.c: everything a new communicator needs once its bootstrap
 * channel exists.  Collective. */
braid_status_t braid_comm_setup(braid_comm_t *comm);
void           braid_comm_teardown(braid_comm_t *comm);

/* comm/topo.c: hosts, CPUs and cabling of a new communicator.
 * Collective (probes the network when there are several hosts). */
braid_status_t braid_topo_detect(braid_comm_t *comm);
/* "ring of 4 hosts, up to 2 ranks per host (detected from ...)" */
void braid_topo_describe(const braid_comm_t *comm, char *buf, size_t n);
/* comm/topo_classify.c: the cabling that hop counts between n hosts
 * describe (hops[a * n + b], as braid_bootstrap_hops; n <=
 * BRAID_TOPO_MAX_CLASSIFY for a ring).  *fits = 0 when they describe
 * neither a switch nor a ring, or lack a pair: then the switch is assumed
 * and why says what is wrong.  order[n]: the hosts in ring order (ring),
 * else 0..n-1. */
#define BRAID_TOPO_MAX_CLASSIFY 64
braid_topo_kind_t braid_topo_classify(const int *hops, int n, int *order,
                                      int *fits, char *why, size_t len);
/* BRAID_TOPO: NULL, "", "auto", "switch" or "ring"; errors name the position.
 */
braid_status_t braid_topo_kind_parse(braid_topo_kind_t *kind, const char *s,
                                     int nnodes);

/* comm/transports.c */
braid_status_t braid_comm_open_transports(braid_comm_t *comm);
void           braid_comm_close_transports(braid_comm_t *comm);
/* ops->caps less what ops lacks the functions for (BRAID_CAP_LOAD without
 * mem_peer), before any per-communicator check. */
uint32_t braid_tl_declared_caps(const braid_transport_t *ops);
/* *all_ok = whether ok is 1 on every rank (what names the thing, for the
 * log).  Collective over the communicator's channel. */
braid_status_t braid_comm_agree(braid_comm_t *comm, int ok, int *all_ok,
                                const char *what);
/* Adds to sel a candidate of algo on each of tls that has the capabilities
 * it needs, each with its own resources (braid_res_create; plugin names it
 * in the warning about a duplicate; NULL: no warning); sort puts them in
 * name order, as the selector needs. */
braid_status_t braid_cands_add(braid_selector_t *sel, const braid_algo_t *algo,
                               braid_tl_t *tls, int ntls, const char *plugin);
void           braid_cands_sort(braid_selector_t *sel);
/* comm/setup.c: an out-of-band channel over bs, as plugins get it. */
void braid_comm_oob_init(braid_oob_t *oob, braid_bootstrap_t *bs);

/* Appends call to the queue (comm/queue.c runs it); inline, as it is on
 * every call's path. */
static inline void braid_call_enqueue(braid_comm_t *comm, braid_call_t *call)
{
    call->next = NULL;
    if (comm->tail != NULL)
        comm->tail->next = call;
    else
        comm->head = call;
    comm->tail = call;
}
/* Ends the head call with st (its message is braid_last_error()); a
 * failure fails the communicator.  Returns st. */
braid_status_t braid_call_complete(braid_comm_t *comm, braid_call_t *call,
                                   braid_status_t st);
braid_status_t braid_comm_progress(braid_comm_t *comm);
/* Marks the communicator failed: later calls get BRAID_ERR_STATE. */
void braid_comm_fail(braid_comm_t *comm, braid_status_t status,
                     const char *msg);
/* Ends the head call with st (runs finish, fails the communicator on
 * error, dequeues); returns st. */
braid_status_t braid_call_complete(braid_comm_t *comm, braid_call_t *call,
                                   braid_status_t st);

/* comm/check.c: compares this call's fingerprint with every rank's (valid:
 * whether this rank's arguments passed validation).  Collective. */
braid_status_t braid_check_call(braid_comm_t *comm, braid_coll_t coll,
                                size_t count, braid_dtype_t dtype,
                                braid_op_t op, int root, uint32_t need,
                                int valid);

/* comm/avg.c: integer BRAID_AVG runs as a SUM of 64-bit integers in a
 * scratch buffer.  widen replaces the call's buffers, count, dtype and op;
 * finish writes the average to the caller's buffer when st is BRAID_OK and
 * frees the scratch (a no-op for calls without it). */
typedef struct braid_widen braid_widen_t;
int braid_avg_needs_widen(braid_coll_t coll, size_t count, braid_dtype_t dtype,
                          braid_op_t op, int size);
braid_status_t braid_avg_widen(braid_call_t *call, braid_comm_t *comm,
                               const char *fn, braid_coll_t coll,
                               const void **sendbuf, void **recvbuf,
                               size_t *count, braid_dtype_t *dtype,
                               braid_op_t *op);
void braid_avg_finish(braid_call_t *call, int size, braid_status_t st);

/* comm/coll.c: validates a call and fills it in (nothing is written on
 * error).  count is as in the public call; fn names the call in messages
 * ("allreduce", "iallreduce"); on_stream marks a stream-ordered call
 * (cuda/stream.c) on that stream.  The caller has entered comm. */
braid_status_t braid_call_prepare_on(braid_call_t *call, braid_comm_t *comm,
                                     const char *fn, braid_coll_t coll,
                                     const void *sendbuf, void *recvbuf,
                                     size_t count, braid_dtype_t dtype,
                                     braid_op_t op, int root, int on_stream,
                                     void *stream);
static inline braid_status_t
braid_call_prepare(braid_call_t *call, braid_comm_t *comm, const char *fn,
                   braid_coll_t coll, const void *sendbuf, void *recvbuf,
                   size_t count, braid_dtype_t dtype, braid_op_t op, int root)
{
    return braid_call_prepare_on(call, comm, fn, coll, sendbuf, recvbuf, count,
                                 dtype, op, root, 0, NULL);
}
/* A blocking collective from entry to completion (the public calls, and
 * the stream-ordered ones of cuda/stream.c). */
braid_status_t braid_coll_run(braid_comm_t *comm, braid_api_t api,
                              braid_coll_t coll, const void *sendbuf,
                              void *recvbuf, size_t count, braid_dtype_t dtype,
                              braid_op_t op, int root, int on_stream,
                              void *stream);

/* comm/wait.h and wait.c: the waiting policy. */
#include "comm/wait.h"

#endif
