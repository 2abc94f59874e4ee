/* The communicator and its queue of collective operations (internal). */
#ifndef BRAID_CORE_COMM_H
#define BRAID_CORE_COMM_H

#include <braid/plugin.h>

#include "bootstrap/bootstrap.h"
#include "loader/loader.h"
#include "select/select.h"
#include "select/spec.h"

/* One collective call in the communicator's FIFO.  Calls complete in the order
 * they were issued: only the head makes progress. */
typedef struct braid_call {
    braid_task_t       task;
    braid_candidate_t *cand;      /* NULL: completed locally (size 1, empty) */
    int                started;
    int                done;
    braid_status_t     status;
    double             t_start;   /* 0 until the first look at the clock */
    unsigned           polls;     /* progress calls that found it running */
    struct braid_call *next;
    /* Last: only written on failure, so a call clears the fields above it
     * and not these 512 bytes (the decode path issues ~10 KiB calls in a
     * tight loop). */
    char               error[512]; /* message when status != OK */
} braid_call_t;

struct braid_request {
    braid_call_t  call; /* first: the queue links requests by their call */
    braid_comm_t *comm;
};

struct braid_comm {
    int                         rank, size;
    braid_bootstrap_t          *bs;
    braid_oob_t                 oob;
    const braid_plugin_table_t *plugins;

    braid_topo_t                topo;
    int                        *node_of_rank;
    int                        *cpu_of_rank;
    int                         machine_ppn; /* most ranks on one machine
                                                (emulated hosts share it) */
    char                        topo_why[384]; /* how topo.kind was decided */

    int                         ntls;
    braid_tl_t                 *tls;

    braid_algo_spec_t           override;
    braid_tune_t                tune;
    braid_selector_t            sel;

    uint64_t                    seq;
    int                         check; /* BRAID_CHECK: compare every call */
    int                         oversubscribed; /* more ranks than cores */
    /* The last call issued, to tell a stream of identical calls. */
    braid_coll_t                last_coll;
    size_t                      last_bytes;
    const void                 *last_cand;
    double                      last_health; /* last failure-detector look */
    double                      timeout_s;   /* BRAID_TIMEOUT at creation */
    braid_call_t               *head, *tail;
    int                         pending_requests;

    braid_status_t              failed; /* BRAID_OK while usable */
    char                        failed_msg[512];
};

/* comm/setup.c: everything a new communicator needs once its bootstrap
 * channel exists.  Collective. */
braid_status_t braid_comm_setup(braid_comm_t *comm);
void braid_comm_teardown(braid_comm_t *comm);

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
/* BRAID_TOPO: NULL, "", "auto", "switch" or "ring"; errors name the position. */
braid_status_t braid_topo_kind_parse(braid_topo_kind_t *kind, const char *s,
                                     int nnodes);

/* comm/transports.c */
braid_status_t braid_comm_open_transports(braid_comm_t *comm);
void braid_comm_close_transports(braid_comm_t *comm);

/* comm/queue.c */
void braid_call_enqueue(braid_comm_t *comm, braid_call_t *call);
braid_status_t braid_comm_progress(braid_comm_t *comm);
braid_status_t braid_call_wait(braid_comm_t *comm, braid_call_t *call);
/* Marks the communicator failed: later calls get BRAID_ERR_STATE. */
void braid_comm_fail(braid_comm_t *comm, braid_status_t status,
                     const char *msg);

/* comm/check.c: compares this call's fingerprint with every rank's (valid:
 * whether this rank's arguments passed validation).  Collective. */
braid_status_t braid_check_call(braid_comm_t *comm, braid_coll_t coll,
                                size_t count, braid_dtype_t dtype,
                                braid_op_t op, int root, int valid);

/* comm/coll.c: validates a call and fills it in (nothing is written on
 * error).  count is as in the public call. */
braid_status_t braid_call_prepare(braid_call_t *call, braid_comm_t *comm,
                                  braid_coll_t coll, const void *sendbuf,
                                  void *recvbuf, size_t count,
                                  braid_dtype_t dtype, braid_op_t op, int root);

#endif
