/* The one-stage exchange of the lowhop algorithms: every rank puts its
 * data into its slot of every peer's receive area (recv_area.h) in one
 * stage, then waits for the n-1 flags of the call.  oneshot (the whole
 * buffer to every peer), reduce_scatter "direct" (block j to rank j) and
 * barrier "direct" (flags alone) are this exchange plus their local work. */
#ifndef BRAID_LOWHOP_EXCHANGE_H
#define BRAID_LOWHOP_EXCHANGE_H

#include "recv_area.h"

/* The state of one exchange (task->priv). */
typedef struct braid_lowhop_xchg {
    braid_lowhop_area_t *area; /* NULL: nothing to exchange (n 1, len 0) */
    uint64_t             flag;
    int                  bank;
    int                  posted; /* the puts are out */
    int                  nseen;  /* peers whose data arrived */
    int                  reduced;
    int                  sent;       /* every put completed */
    int                  mates_left; /* writers on this CPU not seen yet
                                        (-1: not pinned, never 0) */
    int odd;                         /* the slot whose writer called something
                                        else (xchg_arrived -1) */
    unsigned       polls;            /* xchg_more calls */
    braid_treq_t  *reqs;             /* [n-1]: reqs[i-1] to rank+i */
    unsigned char *seen;             /* [n-1], by slot */
    const void   **src;              /* [n]: contributions in rank order */
} braid_lowhop_xchg_t;

/* Refuses len above cap (what names the algorithm), gets task->priv as a
 * braid_lowhop_xchg_t (svc->state_get: the previous call's, reset) and,
 * when there is something to exchange, gets the area (growing it
 * collectively) and picks this call's bank and flag.  On error task->priv
 * stays for finish(), which the core calls after a failed start too. */
braid_status_t braid_lowhop_xchg_start(braid_task_t *task, size_t len,
                                       size_t cap, const char *what);
/* Puts len bytes to every peer j (src + j·stride; stride 0: the same bytes
 * to all) into this rank's slot of the call's bank, with the call's flag;
 * marks x posted. */
braid_status_t braid_lowhop_xchg_post(braid_task_t        *task,
                                      braid_lowhop_xchg_t *x, const void *src,
                                      size_t len, size_t stride);
/* The sending side of one poll of an exchange: posts the puts the first
 * time (as braid_lowhop_xchg_post) and sets x->sent once every put has
 * completed.  BRAID_OK, or the transport's error.  It does not drive the
 * transport: a poll looks at the flags first and calls
 * braid_lowhop_xchg_more only while the call goes on, so that the poll
 * that finds the data in finishes without a round of transport progress. */
braid_status_t braid_lowhop_xchg_drive(braid_task_t        *task,
                                       braid_lowhop_xchg_t *x, const void *src,
                                       size_t len, size_t stride);
/* The end of a poll that leaves the call running: a round of transport
 * progress on every BRAID_LOWHOP_TL_POLLS-th such poll, starting with the
 * first (puts to and from this rank over UCX need it; over shm they land
 * without it), then BRAID_INPROGRESS, or the transport's error.  The polls
 * in between look at the flags only: the shorter a poll, the sooner the
 * one after the data's arrival sees it. */
#define BRAID_LOWHOP_TL_POLLS 4u /* a power of two */
braid_status_t braid_lowhop_xchg_more(braid_task_t        *task,
                                      braid_lowhop_xchg_t *x);
/* 1 when every peer pinned to this rank's CPU has delivered this call's
 * data (vacuously with no such peer); 0 when this rank is not pinned. */
int braid_lowhop_xchg_mates_in(const braid_task_t        *task,
                               const braid_lowhop_xchg_t *x);
/* The end of a one-stage start(): posts the puts (as xchg_post) and sets
 * *wait to BRAID_WAIT_REMOTE when xchg_mates_in -- the peers on this CPU
 * entered the call first, which the core's waiting policy uses (wait.c: a
 * lone call then yields to them once before its first progress).  Nothing
 * to exchange: nothing to do. */
braid_status_t braid_lowhop_xchg_open(braid_task_t        *task,
                                      braid_lowhop_xchg_t *x, const void *src,
                                      size_t len, size_t stride,
                                      braid_wait_t *wait);
/* Looks at the flags not seen yet; 1 once all n-1 peers' data arrived.
 * Until then it sets *wait to BRAID_WAIT_REMOTE once every peer pinned to
 * this rank's CPU has delivered.  -1 when a peer is in this call with
 * another signature (x->odd: its slot; braid_lowhop_mismatch). */
int braid_lowhop_xchg_arrived(braid_task_t *task, braid_lowhop_xchg_t *x,
                              braid_wait_t *wait);
/* finish() of the algorithms built on braid_lowhop_xchg_t: cancels the puts
 * an error left active, then gives task->priv back. */
void braid_lowhop_xchg_finish(braid_task_t *task);

#endif
