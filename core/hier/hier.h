/* Hierarchical candidates: one collective made of collectives on two levels
 * of the communicator -- the ranks of one host, over a transport that
 * serves one host only (shm), and the rails, one per position on a host:
 * the ranks with the same position on every host, over the network -- as
 * Open MPI's han and UCC's hierarchical layer do.  Each step runs the
 * candidate of its level that the same cost model picks, so the composite
 * is chosen only where the sum of its steps beats every flat candidate
 * (docs/architecture.md, "Hierarchical candidates").
 *
 *   levels.c  the two levels: their channels, transports and candidates
 *   plans.c   which steps each collective takes, and its estimate
 *   run.c     a composite call: its steps one after another
 *
 * Plugins never see any of it: a step is an ordinary call of an ordinary
 * candidate on a smaller communicator (its own rank, size, topology and
 * transport). */
#ifndef BRAID_CORE_HIER_H
#define BRAID_CORE_HIER_H

#include <braid/plugin.h>

#include "bootstrap/bootstrap.h"
#include "select/select.h"

/* One level: the ranks of this rank's host, or of its rail. */
typedef struct braid_level {
    const char        *name; /* "host" or "rail", for messages */
    int                rank, size;
    braid_bootstrap_t *bs; /* its own channel: transports' oob */
    braid_oob_t        oob;
    braid_topo_t       topo;
    int               *node_of_rank, *cpu_of_rank; /* [size] */
    int                ntls;
    braid_tl_t        *tls; /* opened on this level */
    braid_selector_t   sel; /* its candidates, cost model only */
    /* The rail level estimates calls that all rails make at once (their
     * hosts' links shared k ways) with sel, and a call that one rail makes
     * alone (broadcast) with sel_alone: the same candidates. */
    braid_selector_t sel_alone;
    uint64_t         seq; /* steps issued on it: tags of its calls */
} braid_level_t;

/* One step of a composite call on one level; lvl NULL: this rank sits it
 * out (a broadcast's rail step off the root's rail). */
typedef struct braid_hier_step {
    braid_level_t    *lvl;
    braid_selector_t *sel;
    braid_coll_t      coll;
    const void       *sendbuf;
    void             *recvbuf;
    size_t            count;
    int               root;
} braid_hier_step_t;

#define BRAID_HIER_MAX_STEPS 3

/* The composite call in progress.  Only the head of a communicator's queue
 * runs, so there is one at a time. */
typedef struct braid_hier_run {
    int               npieces, piece;
    size_t            piece_count; /* elements per piece; the last fewer */
    int               planned;     /* the piece's steps are set up */
    int               nsteps, step;
    braid_hier_step_t steps[BRAID_HIER_MAX_STEPS];
    char             *out;      /* allreduce: where the piece's result
                                   forms (scratch or the caller's) */
    braid_candidate_t *cand;    /* running the step */
    braid_task_t       sub;     /* the step as its algorithm sees it */
    int                started; /* sub's start ran, its finish not */
} braid_hier_run_t;

typedef struct braid_hier {
    int              k; /* ranks per host (every host has as many) */
    int              nhosts;
    int              host; /* this rank's host, and position on it */
    int              local;
    int              nranks;
    int             *rank_at; /* [nhosts * k]: rank at (host, position) */
    braid_level_t    host_lvl;
    braid_level_t    rail;
    char            *scratch;
    size_t           scratch_cap;
    braid_hier_run_t run;
} braid_hier_t;

/* levels.c.  Builds the levels and adds the composite candidates to the
 * communicator's, where there are several hosts of as many ranks each, two
 * or more, and a transport that refused the whole communicator opens on
 * each host (shm).  Collective.  Only a failure of the bootstrap channel is
 * an error: without the levels there are only the flat candidates. */
braid_status_t braid_hier_open(struct braid_comm *comm);
void           braid_hier_close(struct braid_comm *comm);
/* Scratch of at least bytes, kept for the next call. */
char *braid_hier_scratch(braid_hier_t *h, size_t bytes);

/* plans.c.  The composite of a collective (NULL: none), as the selector
 * and BRAID_ALGO name it: "hier". */
#define BRAID_HIER_NAME "hier"
const braid_algo_t *braid_hier_algo(braid_coll_t coll);
/* "host reduce_scatter direct@shm 0.6 us + rail allreduce ... " for a
 * composite (returns 1); 0 for any other candidate (braid_selector_t's
 * describe). */
int braid_hier_describe(const braid_candidate_t *c, braid_coll_t coll,
                        size_t bytes, char *buf, size_t len);
/* The steps of the current piece of the call into h->run (steps, out),
 * with the copies that come before them. */
braid_status_t braid_hier_plan(braid_hier_t *h, const braid_task_t *call);
/* After step s of the current piece: the work between steps (averaging). */
void braid_hier_after_step(braid_hier_t *h, const braid_task_t *call, int s);
/* After the piece's last step: copies into the caller's buffer. */
void braid_hier_piece_done(braid_hier_t *h, const braid_task_t *call);
/* Pieces a call of bytes is cut into (allreduce: the count that the model
 * finds cheapest; 1 otherwise). */
int braid_hier_pieces(const braid_hier_t *h, braid_coll_t coll, size_t bytes);

/* run.c: start/progress/finish of every composite. */
braid_status_t braid_hier_start(braid_task_t *task, braid_wait_t *wait);
braid_status_t braid_hier_progress(braid_task_t *task, braid_wait_t *wait);
void           braid_hier_finish(braid_task_t *task);

#endif
