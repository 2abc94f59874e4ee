/* The driver of allreduce and reduce_scatter "recdbl": recursive doubling
 * (or halving) on any number of ranks.
 *
 * With p the largest power of two <= n and rem = n - p, the first 2*rem
 * ranks pair up: even rank 2i hands its whole input to 2i+1 and sits out,
 * so p ranks remain (virtual rank v is real rank 2v+1 for v < rem, v+rem
 * above).  Those run the algorithm's steps (the "main" stage, log2(p)
 * exchanges with partner v ^ 2^i); then each odd rank below 2*rem returns
 * its idle neighbour's result.  The driver owns the stages and their
 * messages; the algorithm only says what a main step sends and receives,
 * and does its arithmetic:
 *
 *   stage      who                    message (tag step)
 *   FOLD_IN    odd rank < 2*rem       receives the neighbour's input (0)
 *   MAIN       every virtual rank     the algorithm's steps (1 + i)
 *   FOLD_OUT   odd rank < 2*rem       returns the neighbour's result
 *                                     (1 + log2 p)
 *   IDLE_SEND  even rank < 2*rem      hands over its input (0) ...
 *   IDLE_RECV                         ... and receives its result
 *
 * Combining is always (lower rank's data) op (higher rank's data), so both
 * partners of an exchange compute the same bits and all ranks end equal. */
#ifndef BRAID_P2P_RECDBL_H
#define BRAID_P2P_RECDBL_H

#include "algo_common.h"

typedef enum {
    BRAID_P2P_ST_INIT,
    BRAID_P2P_ST_FOLD_IN,
    BRAID_P2P_ST_MAIN,
    BRAID_P2P_ST_FOLD_OUT,
    BRAID_P2P_ST_IDLE_SEND,
    BRAID_P2P_ST_IDLE_RECV,
    BRAID_P2P_ST_DONE
} braid_p2p_stage_t;

struct braid_p2p_recdbl;

/* What the algorithm adds to the driver.  Each gets the task; its state is
 * task->priv, which starts with the braid_p2p_recdbl_t. */
typedef struct braid_p2p_recdbl_ops {
    /* FOLD_IN's data arrived in g->tmp: combine it (the neighbour is the
     * lower rank). */
    void (*fold_in)(braid_task_t *task);
    /* Entering MAIN (after INIT or FOLD_IN); may be NULL. */
    void (*begin)(braid_task_t *task);
    /* Posts the messages of the current main step into g->reqs. */
    braid_status_t (*post)(braid_task_t *task);
    /* The step's messages completed: its arithmetic; 1 when it was the
     * last step. */
    int (*step_done)(braid_task_t *task);
    /* What FOLD_OUT returns to the idle neighbour (out_bytes of it). */
    const void *(*idle_result)(braid_task_t *task);
} braid_p2p_recdbl_ops_t;

typedef struct braid_p2p_recdbl {
    braid_p2p_head_t              head; /* first (algo_common.h) */
    const braid_p2p_recdbl_ops_t *ops;
    braid_p2p_stage_t             stage;
    int                           p, rem, nsteps; /* nsteps = log2(p) */
    int                           vrank;          /* -1 while sitting out */
    size_t                        in_bytes;       /* an idle rank's input */
    size_t                        out_bytes;      /* and its result */
    char                         *tmp; /* scratch: the partner's data */
    braid_treq_t                  reqs[2];
} braid_p2p_recdbl_t;

/* start(): task->priv = a zeroed state of size bytes (a struct starting
 * with braid_p2p_recdbl_t) set up for this rank, with scratch_bytes of
 * scratch in g->tmp for ranks that take part. */
braid_status_t braid_p2p_recdbl_start(braid_task_t *task, size_t size,
                                      const braid_p2p_recdbl_ops_t *ops,
                                      size_t in_bytes, size_t out_bytes,
                                      size_t scratch_bytes);
/* progress() of both algorithms. */
braid_status_t braid_p2p_recdbl_progress(braid_task_t *task,
                                         braid_wait_t *wait);

/* Real rank of virtual rank v. */
static inline int braid_p2p_recdbl_real(const braid_p2p_recdbl_t *g, int v)
{
    return v < g->rem ? 2 * v + 1 : v + g->rem;
}

#endif
