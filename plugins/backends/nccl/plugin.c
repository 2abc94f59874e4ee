/* The NCCL backend as a braid plugin: the only file that speaks the plugin
 * ABI (version 4).  Everything else in this folder takes plain arguments,
 * so a new ABI changes this file only.
 *
 * NCCL is a whole-collective library: one backend algorithm per collective
 * (BRAID_ALGO_BACKEND, no braid transport), written "nccl", taking CUDA
 * device memory only (so the core never hands it host memory, nor a host
 * algorithm device memory) and stream-ordered calls (BRAID_ALGO_STREAM).
 * The core creates each algorithm's per-communicator state through
 * comm_create; the five share one NCCL side of the communicator (a
 * braid_nccl_comm_t), found by the communicator's oob channel. */
#include <pthread.h>
#include <stdlib.h>

#include "nccl.h"

#define EXPORT __attribute__((visibility("default")))

braid_nccl_host_t              braid_nccl_host;
static const braid_nccl_lib_t *lib;

static braid_status_t nccl_probe(const braid_plugin_t   *self,
                                 const braid_services_t *svc, char *why,
                                 size_t why_len)
{
    (void)self;
    braid_nccl_host = (braid_nccl_host_t){
        svc->log, svc->error, svc->finish_avg, svc->timeout_s, svc->now};
    return braid_nccl_lib_open(&lib, why, why_len);
}

/* ------------------------------------------- one NCCL side per communicator
 */

typedef struct shared {
    const braid_oob_t *oob; /* the communicator's: the key */
    braid_nccl_comm_t *c;
    int                refs;
    struct shared     *next;
} shared_t;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_t       *shared_list;

/* Every rank calls the five comm_create in the same order, so every rank
 * makes the NCCL side (collectively) in the first. */
static braid_status_t nccl_comm_create(const braid_algo_t     *self,
                                       const braid_services_t *svc,
                                       const braid_oob_t      *oob,
                                       const braid_topo_t *topo, void **state)
{
    (void)self, (void)svc, (void)topo;
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&shared_lock);
    shared_t *s = shared_list;
    while (s != NULL && s->oob != oob)
        s = s->next;
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            st = braid_nccl_fail(BRAID_ERR_NO_MEMORY, "nccl: out of memory");
        else if ((st = braid_nccl_comm_create(&s->c, lib, oob)) != BRAID_OK) {
            free(s);
            s = NULL;
        } else {
            s->oob      = oob;
            s->next     = shared_list;
            shared_list = s;
        }
    }
    if (s != NULL) {
        s->refs++;
        *state = s;
    }
    pthread_mutex_unlock(&shared_lock);
    return st;
}

static void nccl_comm_state_free(void *state, braid_tl_t *tl)
{
    (void)tl;
    shared_t *s = state;
    pthread_mutex_lock(&shared_lock);
    int last = --s->refs == 0;
    if (last)
        for (shared_t **p = &shared_list; *p != NULL; p = &(*p)->next)
            if (*p == s) {
                *p = s->next;
                break;
            }
    pthread_mutex_unlock(&shared_lock);
    if (last) {
        braid_nccl_comm_destroy(s->c);
        free(s);
    }
}

static braid_nccl_comm_t *comm_of(const braid_task_t *task)
{
    return ((shared_t *)*task->comm_state)->c;
}

/* --------------------------------------------------------------- algorithm */

static double nccl_estimate(const braid_algo_t    *self,
                            const braid_cost_in_t *in)
{
    (void)self;
    const shared_t *s =
        BRAID_HAS(in, braid_cost_in_t, comm_state) ? in->comm_state : NULL;
    if (in->mem != BRAID_MEM_CUDA || s == NULL)
        return -1.0;
    return braid_nccl_model_time(&s->c->model, in->coll, in->bytes, in->nranks,
                                 in->nnodes, in->ppn, NULL);
}

static braid_status_t nccl_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait; /* the GPU works meanwhile: any waiting suits it */
    braid_nccl_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return braid_nccl_fail(BRAID_ERR_NO_MEMORY, "nccl: out of memory");
    int on_stream = BRAID_HAS(task, braid_task_t, stream) && task->on_stream;
    *op           = (braid_nccl_op_t){.coll      = task->coll,
                                      .sendbuf   = task->sendbuf,
                                      .recvbuf   = task->recvbuf,
                                      .count     = task->count,
                                      .dtype     = task->dtype,
                                      .op        = task->op,
                                      .root      = task->root,
                                      .on_stream = on_stream,
                                      .stream    = on_stream ? task->stream : NULL};
    task->priv    = op;
    return braid_nccl_coll_start(comm_of(task), op);
}

static braid_status_t nccl_progress(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    return braid_nccl_coll_test(comm_of(task), task->priv);
}

static void nccl_finish(braid_task_t *task)
{
    if (task->priv != NULL)
        braid_nccl_coll_cancel(comm_of(task), task->priv);
    free(task->priv);
    task->priv = NULL;
}

#define NCCL_ALGO(c)                                                          \
    {                                                                         \
        .struct_size = sizeof(braid_algo_t),                                  \
        .flags = BRAID_ALGO_BACKEND | BRAID_ALGO_STREAM, .name = "nccl",      \
        .coll = (c), .mem_types = BRAID_MEM_BIT(BRAID_MEM_CUDA),              \
        .estimate = nccl_estimate, .start = nccl_start,                       \
        .progress = nccl_progress, .finish = nccl_finish,                     \
        .comm_state_free = nccl_comm_state_free,                              \
        .comm_create     = nccl_comm_create,                                  \
    }

static const braid_algo_t algos[] = {
    NCCL_ALGO(BRAID_COLL_ALLREDUCE), NCCL_ALGO(BRAID_COLL_REDUCE_SCATTER),
    NCCL_ALGO(BRAID_COLL_ALLGATHER), NCCL_ALGO(BRAID_COLL_BROADCAST),
    NCCL_ALGO(BRAID_COLL_BARRIER),
};
static const braid_algo_t *const algo_list[] = {
    &algos[0], &algos[1], &algos[2], &algos[3], &algos[4]};

EXPORT const braid_plugin_t braid_plugin_v4 = {
    .abi_version = BRAID_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(braid_plugin_t),
    .name        = "nccl",
    .version     = "1.0",
    .probe       = nccl_probe,
    .n_algos     = 5,
    .algos       = algo_list,
};
