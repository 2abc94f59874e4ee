/* A fixed team of threads for one rank's matrix work.
 *
 * The calling thread is member 0, so a pool of 1 starts no thread and
 * braid_eng_pool_run is a plain call.  Decode runs one small job per weight
 * (a few hundred per token), so members sleep on a condition variable
 * between jobs rather than being created per job. */
#ifndef BRAID_ENG_POOL_H
#define BRAID_ENG_POOL_H

#include <braid/braid.h>

typedef struct braid_eng_pool braid_eng_pool_t;

/* A job: member `me` of `n` does its share of ctx. */
typedef void (*braid_eng_job_fn)(void *ctx, int me, int n);

braid_status_t braid_eng_pool_new(braid_eng_pool_t **pool, int nthreads);
/* Runs fn on every member (the caller included) and returns when all are
 * done.  One job at a time per pool; not reentrant. */
void braid_eng_pool_run(braid_eng_pool_t *pool, braid_eng_job_fn fn,
                        void *ctx);
int  braid_eng_pool_size(const braid_eng_pool_t *pool);
void braid_eng_pool_free(braid_eng_pool_t *pool);

#endif
