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

/* Scratch memory of one (communicator, algorithm), kept in
 * *task->comm_state and grown as needed, so calls do not allocate. */
typedef struct braid_p2p_scratch {
    void  *buf;
    size_t cap;
    int    busy; /* held by a call in flight */
} braid_p2p_scratch_t;

/* Scratch held by one call: the communicator's buffer, or a private one
 * when another call on the same communicator holds that (non-blocking calls
 * may overlap). */
typedef struct braid_p2p_buf {
    char *ptr;
    int   own; /* 0: comm scratch (release), 1: private (free) */
} braid_p2p_buf_t;

braid_status_t braid_p2p_scratch_get(braid_p2p_buf_t *buf, braid_task_t *task,
                                     size_t bytes);
void braid_p2p_scratch_put(braid_p2p_buf_t *buf, braid_task_t *task);
void braid_p2p_comm_state_free(void *state, braid_tl_t *tl);

/* Zeroed task->priv of the given size. */
braid_status_t braid_p2p_priv_alloc(braid_task_t *task, size_t size);
/* Frees task->priv (finish() of algorithms without scratch). */
void braid_p2p_priv_free(braid_task_t *task);

/* Tagged point-to-point through task->tl; tags are BRAID_TAG(seq, step). */
braid_status_t braid_p2p_send(braid_task_t *task, int peer, long step,
                              const void *buf, size_t len, braid_treq_t *req);
braid_status_t braid_p2p_recv(braid_task_t *task, int peer, long step,
                              void *buf, size_t len, braid_treq_t *req);
/* BRAID_OK when req is done (or was never posted), else INPROGRESS/error. */
braid_status_t braid_p2p_req_test(braid_task_t *task, braid_treq_t *req);
/* BRAID_OK when all n are done; tests every one so all make progress. */
braid_status_t braid_p2p_reqs_test(braid_task_t *task, braid_treq_t *reqs,
                                   int n);
/* Withdraws the ones still active (finish after an error): afterwards the
 * transport no longer touches their buffers, which may then be freed. */
void braid_p2p_reqs_cancel(braid_task_t *task, braid_treq_t *reqs, int n);

/* dst = lower op higher, where lower/higher come from the lower/higher rank:
 * both partners of an exchange compute the same bits. */
void braid_p2p_combine(braid_task_t *task, void *dst, const void *lower,
                       const void *higher, size_t count);
/* Copies count elements unless src and dst are the same. */
void braid_p2p_copy(braid_task_t *task, void *dst, const void *src,
                    size_t count);

/* count elements split in n chunks as evenly as possible: the first
 * count % n chunks have one more element. */
static inline size_t braid_p2p_chunk_off(size_t count, int n, int c)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return (size_t)c * base + ((size_t)c < rem ? (size_t)c : rem);
}

static inline size_t braid_p2p_chunk_len(size_t count, int n, int c)
{
    return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

static inline int braid_p2p_mod(long a, int n)
{
    long m = a % n;
    return (int)(m < 0 ? m + n : m);
}

/* Largest power of two <= n (n >= 1), and ceil(log2(n)). */
int braid_p2p_pow2_floor(int n);
int braid_p2p_log2_ceil(int n);

/* Cost model (cost.c): microseconds, negative when it cannot run. */
double braid_p2p_cost_allreduce_ring(const braid_algo_t *self,
                                     const braid_cost_in_t *in);
double braid_p2p_cost_allreduce_recdbl(const braid_algo_t *self,
                                       const braid_cost_in_t *in);
double braid_p2p_cost_allreduce_rabenseifner(const braid_algo_t *self,
                                             const braid_cost_in_t *in);
double braid_p2p_cost_reduce_scatter_ring(const braid_algo_t *self,
                                          const braid_cost_in_t *in);
double braid_p2p_cost_reduce_scatter_recdbl(const braid_algo_t *self,
                                            const braid_cost_in_t *in);
double braid_p2p_cost_allgather_ring(const braid_algo_t *self,
                                     const braid_cost_in_t *in);
double braid_p2p_cost_allgather_recdbl(const braid_algo_t *self,
                                       const braid_cost_in_t *in);
double braid_p2p_cost_bcast_ring(const braid_algo_t *self,
                                 const braid_cost_in_t *in);
double braid_p2p_cost_bcast_recdbl(const braid_algo_t *self,
                                   const braid_cost_in_t *in);
double braid_p2p_cost_barrier_ring(const braid_algo_t *self,
                                   const braid_cost_in_t *in);
double braid_p2p_cost_barrier_recdbl(const braid_algo_t *self,
                                     const braid_cost_in_t *in);

/* The algorithms. */
extern const braid_algo_t braid_p2p_allreduce_ring;
extern const braid_algo_t braid_p2p_allreduce_recdbl;
extern const braid_algo_t braid_p2p_allreduce_rabenseifner;
extern const braid_algo_t braid_p2p_reduce_scatter_ring;
extern const braid_algo_t braid_p2p_reduce_scatter_recdbl;
extern const braid_algo_t braid_p2p_allgather_ring;
extern const braid_algo_t braid_p2p_allgather_recdbl;
extern const braid_algo_t braid_p2p_bcast_ring;
extern const braid_algo_t braid_p2p_bcast_recdbl;
extern const braid_algo_t braid_p2p_barrier_ring;
extern const braid_algo_t braid_p2p_barrier_recdbl;

#endif
