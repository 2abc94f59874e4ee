/* Helpers shared by the p2p plugin's algorithms.  Algorithms talk to the
 * transport only through task->tl, so they run over any SENDRECV transport,
 * and do arithmetic only through task->svc. */
#ifndef BRAID_P2P_ALGO_COMMON_H
#define BRAID_P2P_ALGO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <braid/plugin.h>

/* Pipeline segment: large enough that per-message cost is small against the
 * transfer, small enough that a ring keeps every link busy. */
#ifndef BRAID_P2P_SEG_BYTES
#define BRAID_P2P_SEG_BYTES (256u * 1024u)
#endif
/* BRAID_TAG() keeps 16 bits of step: tags of one call are unique below it. */
#define BRAID_P2P_MAX_STEPS 65536L

/* Head of every p2p algorithm's per-call state (its first member), so one
 * finish() serves them all: it withdraws the requests an error left active
 * -- they may still use the scratch or the caller's buffers -- then gives
 * back the scratch and the state (svc->state_get, svc->scratch_get). */
typedef struct braid_p2p_head {
    braid_treq_t *reqs; /* [nreqs], inside the state */
    int           nreqs;
    void         *scratch; /* NULL, or this call's scratch */
} braid_p2p_head_t;

/* task->priv = a zeroed state of `size` bytes starting with a
 * braid_p2p_head_t whose requests are the nreqs at byte reqs_off of it. */
braid_status_t braid_p2p_state(braid_task_t *task, size_t size,
                               size_t reqs_off, int nreqs);
#define BRAID_P2P_STATE(task, type, reqs)                                     \
    braid_p2p_state((task), sizeof(type), offsetof(type, reqs),               \
                    (int)(sizeof(((type *)0)->reqs) / sizeof(braid_treq_t)))
/* The head's scratch: bytes of it (NULL for 0) into *buf. */
braid_status_t braid_p2p_scratch(braid_task_t *task, size_t bytes, char **buf);
/* finish() of every p2p algorithm. */
void braid_p2p_finish(braid_task_t *task);
/* BRAID_OK when every request of the call's head is done. */
static inline braid_status_t braid_p2p_test(braid_task_t *task)
{
    braid_p2p_head_t *h = task->priv;
    return task->svc->reqs_test(task, h->reqs, h->nreqs, NULL);
}

/* Tagged point-to-point through task->tl; tags are BRAID_TAG_CHECKED(seq,
 * step, sig32): a peer in another call gets BRAID_ERR_MISMATCH. */
braid_status_t braid_p2p_send(braid_task_t *task, int peer, long step,
                              const void *buf, size_t len, braid_treq_t *req);
braid_status_t braid_p2p_recv(braid_task_t *task, int peer, long step,
                              void *buf, size_t len, braid_treq_t *req);
/* BRAID_OK when req is done (or was never posted), else INPROGRESS/error. */
static inline braid_status_t braid_p2p_req_test(braid_task_t *task,
                                                braid_treq_t *req)
{
    return req->active ? task->tl->ops->test(task->tl->tcomm, req) : BRAID_OK;
}

/* dst = lower op higher, where lower/higher come from the lower/higher rank:
 * both partners of an exchange compute the same bits. */
void braid_p2p_combine(braid_task_t *task, void *dst, const void *lower,
                       const void *higher, size_t count);
/* Copies count elements unless src and dst are the same. */
void braid_p2p_copy(braid_task_t *task, void *dst, const void *src,
                    size_t count);
/* A reduction with no peer to hear from (one rank): recvbuf = sendbuf,
 * avg divided by one, as every reduction finishes. */
void braid_p2p_local(braid_task_t *task);

static inline int braid_p2p_mod(long a, int n)
{
    long m = a % n;
    return (int)(m < 0 ? m + n : m);
}

/* Largest power of two <= n (n >= 1), and ceil(log2(n)). */
int braid_p2p_pow2_floor(int n);
int braid_p2p_log2_ceil(int n);

/* Cost model (cost.c): microseconds, negative when it cannot run. */
double braid_p2p_cost_allreduce_ring(const braid_algo_t    *self,
                                     const braid_cost_in_t *in);
double braid_p2p_cost_allreduce_recdbl(const braid_algo_t    *self,
                                       const braid_cost_in_t *in);
double braid_p2p_cost_allreduce_rabenseifner(const braid_algo_t    *self,
                                             const braid_cost_in_t *in);
double braid_p2p_cost_allreduce_halving(const braid_algo_t    *self,
                                        const braid_cost_in_t *in);
double braid_p2p_cost_reduce_scatter_ring(const braid_algo_t    *self,
                                          const braid_cost_in_t *in);
double braid_p2p_cost_reduce_scatter_recdbl(const braid_algo_t    *self,
                                            const braid_cost_in_t *in);
double braid_p2p_cost_allgather_ring(const braid_algo_t    *self,
                                     const braid_cost_in_t *in);
double braid_p2p_cost_allgather_recdbl(const braid_algo_t    *self,
                                       const braid_cost_in_t *in);
double braid_p2p_cost_bcast_ring(const braid_algo_t    *self,
                                 const braid_cost_in_t *in);
double braid_p2p_cost_bcast_recdbl(const braid_algo_t    *self,
                                   const braid_cost_in_t *in);
double braid_p2p_cost_barrier_ring(const braid_algo_t    *self,
                                   const braid_cost_in_t *in);
double braid_p2p_cost_barrier_recdbl(const braid_algo_t    *self,
                                     const braid_cost_in_t *in);

/* The algorithms. */
extern const braid_algo_t braid_p2p_allreduce_ring;
extern const braid_algo_t braid_p2p_allreduce_recdbl;
extern const braid_algo_t braid_p2p_allreduce_rabenseifner;
extern const braid_algo_t braid_p2p_allreduce_halving;
extern const braid_algo_t braid_p2p_reduce_scatter_ring;
extern const braid_algo_t braid_p2p_reduce_scatter_recdbl;
extern const braid_algo_t braid_p2p_allgather_ring;
extern const braid_algo_t braid_p2p_allgather_recdbl;
extern const braid_algo_t braid_p2p_bcast_ring;
extern const braid_algo_t braid_p2p_bcast_recdbl;
extern const braid_algo_t braid_p2p_barrier_ring;
extern const braid_algo_t braid_p2p_barrier_recdbl;

#endif
