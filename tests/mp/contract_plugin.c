/* libbraid-contract.so: a test plugin that checks the core keeps the plugin
 * contract of <braid/plugin.h>, and counts what it saw for test_contract.c
 * (which reads the counters through dlsym on the already loaded library).
 *
 *   allreduce "ctr"     (any send/receive transport) every rank sends its
 *                       whole buffer to every other rank in start() and folds
 *                       the n contributions in rank order.  While
 *                       CONTRACT_FAIL_START=1, start() posts its requests
 *                       and then fails: finish() must still come, and
 *                       cancel them.
 *   allreduce "oobsum"  a backend (BRAID_ALGO_BACKEND): no braid transport;
 *                       its state is made by comm_create and the call runs
 *                       over the oob channel.
 *   allreduce "devonly" takes CUDA memory only: never offered a host call.
 * Counters: starts, finishes, calls running at once (must stay <= 1: calls
 * of one communicator start in order), requests left active after finish,
 * backend states created and freed. */
#include <stdlib.h>
#include <string.h>

#include <braid/plugin.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int contract_starts, contract_finishes, contract_running,
    contract_max_running, contract_left_active, contract_backends,
    contract_backends_freed, contract_backend_calls;

/* ------------------------------------------------------------------- ctr */

typedef struct ctr {
    int           n;
    char         *in;   /* [n][len]: every rank's contribution */
    braid_treq_t *reqs; /* [2n]: receives, then sends */
} ctr_t;

static double ctr_estimate(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return 1e6 + (double)in->bytes; /* never chosen unless forced */
}

static braid_status_t ctr_start(braid_task_t *task, braid_wait_t *wait)
{
    int         n       = task->size;
    size_t      len     = task->count * task->dtsize;
    const char *fail_at = getenv("CONTRACT_FAIL_START");

    contract_starts++;
    if (++contract_running > contract_max_running)
        contract_max_running = contract_running;
    ctr_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY, "ctr: out of memory");
    task->priv = s;
    s->n       = n;
    s->in      = malloc((size_t)n * len);
    s->reqs    = calloc(2 * (size_t)n, sizeof(braid_treq_t));
    if (s->in == NULL || s->reqs == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY, "ctr: out of memory");
    const braid_transport_t *t = task->tl->ops;
    for (int r = 0; r < n; r++) {
        braid_status_t st = BRAID_OK;
        if (r == task->rank)
            continue;
        st = t->irecv(task->tl->tcomm, r, BRAID_TAG(task->seq, 0),
                      s->in + (size_t)r * len, len, &s->reqs[r]);
        if (st == BRAID_OK)
            st = t->isend(task->tl->tcomm, r, BRAID_TAG(task->seq, 0),
                          task->sendbuf, len, &s->reqs[n + r]);
        if (st != BRAID_OK)
            return st; /* finish() cancels what was posted */
    }
    if (fail_at != NULL && strcmp(fail_at, "1") == 0)
        return task->svc->error(BRAID_ERR_INTERNAL,
                                "ctr: start of call %llu "
                                "fails on purpose, its requests posted",
                                (unsigned long long)task->seq);
    *wait = BRAID_WAIT_PEER;
    return BRAID_OK;
}

static braid_status_t ctr_progress(braid_task_t *task, braid_wait_t *wait)
{
    ctr_t         *s    = task->priv;
    size_t         len  = task->count * task->dtsize;
    braid_status_t done = BRAID_OK;

    for (int i = 0; i < 2 * s->n; i++) {
        braid_status_t st = task->tl->ops->test(task->tl->tcomm, &s->reqs[i]);
        if (st == BRAID_INPROGRESS)
            done = BRAID_INPROGRESS;
        else if (st != BRAID_OK)
            return st;
    }
    *wait = BRAID_WAIT_PEER;
    if (done != BRAID_OK)
        return done;
    /* In rank order, own part from sendbuf: the same bits everywhere. */
    memcpy(s->in + (size_t)task->rank * len, task->sendbuf, len);
    memcpy(task->recvbuf, s->in, len);
    for (int r = 1; r < s->n; r++)
        task->svc->reduce(task->recvbuf, s->in + (size_t)r * len, task->count,
                          task->dtype, task->op);
    task->svc->finish_avg(task->recvbuf, task->count, task->dtype, task->op,
                          s->n);
    return BRAID_OK;
}

static void ctr_finish(braid_task_t *task)
{
    ctr_t *s = task->priv;
    contract_finishes++;
    contract_running--;
    if (s != NULL && s->reqs != NULL) {
        for (int i = 0; i < 2 * s->n; i++)
            if (s->reqs[i].active)
                task->tl->ops->cancel(task->tl->tcomm, &s->reqs[i]);
        for (int i = 0; i < 2 * s->n; i++)
            contract_left_active += s->reqs[i].active;
        free(s->reqs);
    }
    if (s != NULL)
        free(s->in);
    free(s);
    task->priv = NULL;
}

static const braid_algo_t ctr = {
    .struct_size = sizeof(braid_algo_t),
    .name        = "ctr",
    .coll        = BRAID_COLL_ALLREDUCE,
    .needs_caps  = BRAID_CAP_SENDRECV,
    .estimate    = ctr_estimate,
    .start       = ctr_start,
    .progress    = ctr_progress,
    .finish      = ctr_finish,
};

/* ---------------------------------------------------------------- oobsum */

typedef struct oobsum {
    braid_oob_t oob; /* a copy of the communicator's channel */
} oobsum_t;

static braid_status_t oobsum_create(const braid_algo_t     *self,
                                    const braid_services_t *svc,
                                    const braid_oob_t      *oob,
                                    const braid_topo_t *topo, void **state)
{
    (void)self, (void)topo;
    oobsum_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return svc->error(BRAID_ERR_NO_MEMORY, "oobsum: out of memory");
    s->oob = *oob;
    /* Collective, as a backend's setup would be (NCCL's unique id). */
    int            one = 1, all[256];
    braid_status_t st =
        oob->size <= 256
            ? oob->allgather(oob->ctx, &one, all, sizeof(one))
            : svc->error(BRAID_ERR_UNAVAILABLE, "oobsum: "
                                                "at most 256 ranks");
    if (st != BRAID_OK) {
        free(s);
        return st;
    }
    contract_backends++;
    *state = s;
    return BRAID_OK;
}

static void oobsum_free(void *state, braid_tl_t *tl)
{
    if (state != NULL && tl == NULL)
        contract_backends_freed++;
    free(state);
}

static double oobsum_estimate(const braid_algo_t    *self,
                              const braid_cost_in_t *in)
{
    (void)self;
    return 2e6 + (double)in->bytes; /* never chosen unless forced */
}

static braid_status_t oobsum_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    return task->tl == NULL && *task->comm_state != NULL
               ? BRAID_OK
               : task->svc->error(BRAID_ERR_INTERNAL,
                                  "oobsum: the core "
                                  "gave a backend a transport or no state");
}

/* The whole call in one step over the oob (blocking: fine for a test). */
static braid_status_t oobsum_progress(braid_task_t *task, braid_wait_t *wait)
{
    oobsum_t *s   = *task->comm_state;
    size_t    len = task->count * task->dtsize;
    char     *all = malloc((size_t)task->size * len);
    (void)wait;
    if (all == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY, "oobsum: out of memory");
    braid_status_t st = s->oob.allgather(s->oob.ctx, task->sendbuf, all, len);
    if (st == BRAID_OK) {
        memcpy(task->recvbuf, all, len);
        for (int r = 1; r < task->size; r++)
            task->svc->reduce(task->recvbuf, all + (size_t)r * len,
                              task->count, task->dtype, task->op);
        task->svc->finish_avg(task->recvbuf, task->count, task->dtype,
                              task->op, task->size);
        contract_backend_calls++;
    }
    free(all);
    return st;
}

static void oobsum_finish(braid_task_t *task) { task->priv = NULL; }

static const braid_algo_t oobsum = {
    .struct_size     = sizeof(braid_algo_t),
    .flags           = BRAID_ALGO_BACKEND,
    .name            = "oobsum",
    .coll            = BRAID_COLL_ALLREDUCE,
    .estimate        = oobsum_estimate,
    .start           = oobsum_start,
    .progress        = oobsum_progress,
    .finish          = oobsum_finish,
    .comm_state_free = oobsum_free,
    .comm_create     = oobsum_create,
};

/* --------------------------------------------------------------- devonly */

static double dev_estimate(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self, (void)in;
    return 0.001; /* the cheapest of all, were it allowed to run */
}

static braid_status_t dev_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    return task->svc->error(BRAID_ERR_INTERNAL, "devonly: given a call on "
                                                "host memory");
}

static braid_status_t dev_progress(braid_task_t *task, braid_wait_t *wait)
{
    (void)task, (void)wait;
    return BRAID_ERR_INTERNAL;
}

static void dev_finish(braid_task_t *task) { (void)task; }

static const braid_algo_t devonly = {
    .struct_size = sizeof(braid_algo_t),
    .name        = "devonly",
    .coll        = BRAID_COLL_ALLREDUCE,
    .needs_caps  = BRAID_CAP_SENDRECV,
    .mem_types   = BRAID_MEM_BIT(BRAID_MEM_CUDA),
    .estimate    = dev_estimate,
    .start       = dev_start,
    .progress    = dev_progress,
    .finish      = dev_finish,
};

/* ---------------------------------------------------------------- plugin */

static braid_status_t contract_probe(const braid_plugin_t   *self,
                                     const braid_services_t *svc, char *why,
                                     size_t why_len)
{
    (void)self, (void)svc, (void)why, (void)why_len;
    return BRAID_OK;
}

static const braid_algo_t *const algos[] = {&ctr, &oobsum, &devonly};

EXPORT const braid_plugin_t braid_plugin_v4 = {
    .abi_version = BRAID_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(braid_plugin_t),
    .name        = "contract",
    .version     = "1",
    .probe       = contract_probe,
    .n_algos     = 3,
    .algos       = algos,
};
