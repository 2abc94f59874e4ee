/* Thread team (see pool.h): a generation counter tells members that a new
 * job is posted; a countdown tells the caller they are all done. */
#include <pthread.h>
#include <stdlib.h>

#include "engine/common/err.h"
#include "engine/common/pool.h"

typedef struct {
    braid_eng_pool_t *pool;
    int               me;
} pool_member_t;

struct braid_eng_pool {
    int              n;
    pthread_t       *threads; /* [n - 1] */
    pool_member_t   *members; /* [n - 1] */
    pthread_mutex_t  mu;
    pthread_cond_t   go, done;
    unsigned long    generation; /* bumped per job */
    int              pending;    /* members still working on this job */
    int              quit;
    braid_eng_job_fn fn;
    void            *ctx;
};

static void *member_main(void *arg)
{
    pool_member_t    *m    = arg;
    braid_eng_pool_t *p    = m->pool;
    unsigned long     seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->generation == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen                 = p->generation;
        braid_eng_job_fn fn  = p->fn;
        void            *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);

        fn(ctx, m->me, p->n);

        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

braid_status_t braid_eng_pool_new(braid_eng_pool_t **out, int nthreads)
{
    if (nthreads < 1)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG, "thread pool: %d threads",
                              nthreads);
    braid_eng_pool_t *p = calloc(1, sizeof(*p));
    if (!p)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    p->n       = nthreads;
    p->threads = calloc((size_t)nthreads, sizeof(*p->threads));
    p->members = calloc((size_t)nthreads, sizeof(*p->members));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    if (!p->threads || !p->members) {
        p->n = 1;
        braid_eng_pool_free(p);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    for (int i = 1; i < nthreads; i++) {
        p->members[i - 1] = (pool_member_t){p, i};
        if (pthread_create(&p->threads[i - 1], NULL, member_main,
                           &p->members[i - 1]) != 0) {
            p->n = i; /* join the ones started */
            braid_eng_pool_free(p);
            return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                                  "thread pool: cannot start thread %d", i);
        }
    }
    *out = p;
    return BRAID_OK;
}

void braid_eng_pool_run(braid_eng_pool_t *p, braid_eng_job_fn fn, void *ctx)
{
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn      = fn;
    p->ctx     = ctx;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);

    fn(ctx, 0, p->n);

    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int braid_eng_pool_size(const braid_eng_pool_t *p) { return p->n; }

void braid_eng_pool_free(braid_eng_pool_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p->members);
    free(p);
}
