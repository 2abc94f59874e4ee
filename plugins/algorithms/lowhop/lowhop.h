/* Internals of the lowhop plugin's algorithms, shared by its files and by the
 * unit tests (tests/unit/lowhop), which drive them in one process.
 *
 * Every algorithm here is written against put-with-signal only
 * (BRAID_CAP_PUT_SIGNAL, any transport): shm, ucx and roce all serve them. */
#ifndef BRAID_LOWHOP_LOWHOP_H
#define BRAID_LOWHOP_LOWHOP_H

#include <stddef.h>

#include <braid/plugin.h>

#define BRAID_LOWHOP_COMPONENT "lowhop"

/* Largest message (bytes per rank, as braid_cost_in_t.bytes) each algorithm
 * takes.  The receive area holds a whole message per peer (two banks for the
 * one-stage algorithms), so these bound its size: for n ranks oneshot needs
 * up to 2 (n-1) x 4 MiB, twoshot 2 (n-1)/n x 32 MiB.  Above them the estimate
 * is -1 and the dispatcher leaves the call to the ring. */
#define BRAID_LOWHOP_ONESHOT_MAX_BYTES        ((size_t)4 << 20)
#define BRAID_LOWHOP_TWOSHOT_MAX_BYTES        ((size_t)32 << 20)
#define BRAID_LOWHOP_ALLGATHER_MAX_BYTES      ((size_t)4 << 20)
#define BRAID_LOWHOP_REDUCE_SCATTER_MAX_BYTES ((size_t)4 << 20)

extern const braid_algo_t braid_lowhop_oneshot_algo;
extern const braid_algo_t braid_lowhop_twoshot_algo;
extern const braid_algo_t braid_lowhop_allgather_direct_algo;
extern const braid_algo_t braid_lowhop_reduce_scatter_direct_algo;
extern const braid_algo_t braid_lowhop_barrier_direct_algo;

/* cost.c: estimates in microseconds, -1 when the algorithm cannot run the
 * inputs (above its cap, or no usable link description). */
double braid_lowhop_cost_oneshot(const braid_cost_in_t *in);
double braid_lowhop_cost_twoshot(const braid_cost_in_t *in);
double braid_lowhop_cost_allgather_direct(const braid_cost_in_t *in);
double braid_lowhop_cost_reduce_scatter_direct(const braid_cost_in_t *in);
double braid_lowhop_cost_barrier_direct(const braid_cost_in_t *in);
/* Bytes crossing the busiest link when every rank sends one byte to every
 * other rank at once (n-1 on one host or a switch with one rank per host). */
double braid_lowhop_alltoall_load(const braid_cost_in_t *in);

/* fold.c: dst[i] = ((src[0][i] op src[1][i]) op src[2][i]) ... op
 * src[n-1][i], always in rank order so that every rank gets the same bits.
 * dst may be one of the sources (in place).  AVG folds as SUM; the caller
 * applies finish_avg.  n >= 1. */
void braid_lowhop_fold(const braid_task_t *task, void *dst,
                       const void *const *src, int n, size_t count);
/* The result of a reduction with nothing to exchange (one rank): its own
 * buffer, copied unless in place; avg over one rank divides by 1. */
braid_status_t braid_lowhop_local_result(braid_task_t *task);

#endif
