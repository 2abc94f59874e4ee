/* The smallest real braid plugin: a linear broadcast.
 *
 * The root sends the whole buffer to every other rank; the others receive it.
 * One stage, (n-1) messages from the root: the best broadcast for tiny
 * messages on few ranks, the worst for large ones -- and the cost estimate
 * says so, so the dispatcher only picks it where it wins.
 *
 * It brings no transport: it runs on any transport with two-sided send/recv
 * (shm, ucx), which is the point of writing algorithms against braid_tl_t.
 * Copy this file to start a plugin (docs/writing-a-plugin.md). */
#include <stdlib.h>

#include <braid/plugin.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct linear_state {
    int           nreqs; /* requests posted so far */
    braid_treq_t *reqs;  /* root: one per peer; others: one */
} linear_state_t;

/* Time at the root, which sends n-1 copies back to back (us). */
static double linear_estimate(const braid_algo_t    *self,
                              const braid_cost_in_t *in)
{
    double n = in->nranks;
    (void)self;
    return (n - 1) * (in->link.alpha_us + in->stage_us +
                      (double)in->bytes / (in->link.beta_gbps * 1e3));
}

/* Posts every request of the call.  On an error it returns at once: what
 * it posted is in s->reqs, and finish(), which the core calls after a
 * failed start too, cancels it and frees the state. */
static braid_status_t linear_start(braid_task_t *task, braid_wait_t *wait)
{
    linear_state_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY, "linear: out of memory");
    task->priv = s;
    size_t len = task->count * task->dtsize;
    /* The call's signature bits in the tag: a rank that called something
     * else gets BRAID_ERR_MISMATCH from the transport, not wrong data. */
    uint64_t tag     = BRAID_TAG_CHECKED(task->seq, 0, braid_task_sig32(task));
    int      is_root = task->rank == task->root;
    s->reqs = calloc(is_root ? (size_t)task->size : 1, sizeof(braid_treq_t));
    if (s->reqs == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY, "linear: out of memory");

    const braid_transport_t *tl = task->tl->ops;
    *wait = BRAID_WAIT_PEER; /* from here on only the requests are left */
    if (!is_root) {
        s->nreqs = 1;
        return tl->irecv(task->tl->tcomm, task->root, tag, task->recvbuf, len,
                         &s->reqs[0]);
    }
    for (int peer = 0; peer < task->size; peer++) {
        if (peer == task->root)
            continue;
        braid_status_t st =
            tl->isend(task->tl->tcomm, peer, tag, task->recvbuf, len,
                      &s->reqs[s->nreqs++]);
        if (st != BRAID_OK)
            return st;
    }
    return BRAID_OK;
}

static braid_status_t linear_progress(braid_task_t *task, braid_wait_t *wait)
{
    linear_state_t *s    = task->priv;
    braid_status_t  done = BRAID_OK;
    for (int i = 0; i < s->nreqs; i++) {
        if (!s->reqs[i].active)
            continue; /* done, maybe already inside isend/irecv */
        braid_status_t st = task->tl->ops->test(task->tl->tcomm, &s->reqs[i]);
        if (st == BRAID_INPROGRESS)
            done = BRAID_INPROGRESS;
        else if (st != BRAID_OK)
            return st;
    }
    *wait = BRAID_WAIT_PEER;
    return done;
}

/* After an error (in start or later) some sends or the receive may still be
 * active: withdraw them before the request array goes, and before the
 * caller gets back the buffer they use (the rule every finish() follows). */
static void linear_finish(braid_task_t *task)
{
    linear_state_t *s = task->priv;
    if (s != NULL && s->reqs != NULL) {
        for (int i = 0; i < s->nreqs; i++)
            if (s->reqs[i].active)
                task->tl->ops->cancel(task->tl->tcomm, &s->reqs[i]);
        free(s->reqs);
    }
    free(s);
    task->priv = NULL;
}

static braid_status_t example_probe(const braid_plugin_t   *self,
                                    const braid_services_t *svc, char *why,
                                    size_t why_len)
{
    (void)self;
    (void)svc;
    (void)why;
    (void)why_len;
    return BRAID_OK; /* pure algorithm: nothing to probe */
}

static const braid_algo_t linear_bcast = {
    .struct_size = sizeof(braid_algo_t),
    .name        = "linear",
    .coll        = BRAID_COLL_BROADCAST,
    .needs_caps  = BRAID_CAP_SENDRECV,
    .mem_types   = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .estimate    = linear_estimate,
    .start       = linear_start,
    .progress    = linear_progress,
    .finish      = linear_finish,
};

static const braid_algo_t *const algos[] = {&linear_bcast};

EXPORT const braid_plugin_t braid_plugin_v4 = {
    .abi_version = BRAID_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(braid_plugin_t),
    .name        = "example",
    .version     = "1.0",
    .probe       = example_probe,
    .n_algos     = 1,
    .algos       = algos,
};
