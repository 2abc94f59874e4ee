/* The ABI-3 adapter: an ABI-4 view of a plugin built for ABI 3, so that the
 * core never refuses one it can run.
 *
 * ABI 4 changed layouts (struct_size fields, memory types), entry-point
 * signatures (self arguments, the wait report) and the task (no stream, no
 * remote_wait).  The adapter builds ABI-4 descriptors whose functions call
 * the ABI-3 ones, converting every struct on the way:
 *   - plugin and transport functions find their ABI-3 original through
 *     self (the ABI-4 descriptor is the first member of a wrapper);
 *   - an ABI-3 transport's communicator is a box holding its tcomm and the
 *     ABI-3 copies of oob and topology it was given (they must outlive it);
 *   - an ABI-3 algorithm's per-communicator state is a box holding its own
 *     state, an ABI-3 view of the ABI-4 transport it runs on, and the
 *     ABI-3 topology; each call gets an ABI-3 task in task->priv.
 * What ABI 3 cannot say: a wait report other than remote_wait (mapped to
 * BRAID_WAIT_REMOTE, else LOCAL), memory types (host only), backends.
 * ABI 3's de facto rule that finish() does not follow a failed start() is
 * kept for ABI-3 algorithms.  task->stream is rebuilt from the calls this
 * candidate saw: the call right after one of the same size. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/reduce.h"
#include "loader/abi3.h"
#include "loader/adapt.h"
#include "loader/loader.h"
#include "util/env.h"
#include "util/log.h"

/* ---------------------------------------------------------------- services */

static const braid_services_v3_t svc3 = {
    .log        = braid_services_log,
    .error      = braid_services_error,
    .reduce     = braid_kernel_reduce,
    .reduce2    = braid_kernel_reduce2,
    .finish_avg = braid_kernel_finish_avg,
    .timeout_s  = braid_timeout_s,
    .now        = braid_now_s,
};

static void topo3_of(braid_topo_v3_t *t3, const braid_topo_t *t)
{
    memset(t3, 0, sizeof(*t3));
    if (t == NULL)
        return;
    t3->kind         = t->kind;
    t3->nnodes       = t->nnodes;
    t3->ppn          = t->ppn;
    t3->node_of_rank = t->node_of_rank;
    t3->cpu_of_rank  = t->cpu_of_rank;
}

static void link3_of(braid_link_v3_t *l3, const braid_link_t *l)
{
    l3->alpha_us      = l->alpha_us;
    l3->beta_gbps     = l->beta_gbps;
    l3->put_alpha_us  = l->put_alpha_us;
    l3->put_beta_gbps = l->put_beta_gbps;
}

/* ----------------------------------------- ABI-3 transports, seen as ABI 4 */

typedef struct ad_tl {
    braid_transport_t           t; /* first: self points here */
    const braid_transport_v3_t *v3;
} ad_tl_t;

/* One ABI-3 transport on one communicator. */
typedef struct ad_tcomm {
    const braid_transport_v3_t *v3;
    void                       *tcomm;
    braid_oob_v3_t              oob;
    braid_topo_v3_t             topo;
} ad_tcomm_t;

static braid_status_t tl_probe(const braid_transport_t *self,
                               const braid_services_t *svc, char *why,
                               size_t why_len)
{
    (void)svc;
    return ((const ad_tl_t *)self)->v3->probe(&svc3, why, why_len);
}

static braid_status_t tl_comm_create(const braid_transport_t *self,
                                     const braid_services_t  *svc,
                                     const braid_oob_t       *oob,
                                     const braid_topo_t *topo, void **tcomm)
{
    const braid_transport_v3_t *v3 = ((const ad_tl_t *)self)->v3;
    ad_tcomm_t                 *c  = calloc(1, sizeof(*c));
    (void)svc;
    if (c == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY,
                           "adapter: out of memory for "
                           "transport %s",
                           v3->name);
    c->v3            = v3;
    c->oob.rank      = oob->rank;
    c->oob.size      = oob->size;
    c->oob.ctx       = oob->ctx;
    c->oob.allgather = oob->allgather;
    c->oob.barrier   = oob->barrier;
    topo3_of(&c->topo, topo);
    braid_status_t st = v3->comm_create(&svc3, &c->oob, &c->topo, &c->tcomm);
    if (st != BRAID_OK) {
        free(c);
        return st;
    }
    *tcomm = c;
    return BRAID_OK;
}

static void tl_comm_destroy(void *tcomm)
{
    ad_tcomm_t *c = tcomm;
    c->v3->comm_destroy(c->tcomm);
    free(c);
}

static void tl_link(void *tcomm, braid_link_t *link)
{
    ad_tcomm_t     *c  = tcomm;
    braid_link_v3_t l3 = {0};
    c->v3->link(c->tcomm, &l3);
    link->alpha_us      = l3.alpha_us;
    link->beta_gbps     = l3.beta_gbps;
    link->put_alpha_us  = l3.put_alpha_us;
    link->put_beta_gbps = l3.put_beta_gbps;
}

static braid_status_t tl_isend(void *tcomm, int peer, uint64_t tag,
                               const void *buf, size_t len, braid_treq_t *req)
{
    ad_tcomm_t *c = tcomm;
    return c->v3->isend(c->tcomm, peer, tag, buf, len, req);
}

static braid_status_t tl_irecv(void *tcomm, int peer, uint64_t tag, void *buf,
                               size_t len, braid_treq_t *req)
{
    ad_tcomm_t *c = tcomm;
    return c->v3->irecv(c->tcomm, peer, tag, buf, len, req);
}

static braid_status_t tl_test(void *tcomm, braid_treq_t *req)
{
    ad_tcomm_t *c = tcomm;
    return c->v3->test(c->tcomm, req);
}

static braid_status_t tl_progress(void *tcomm)
{
    ad_tcomm_t *c = tcomm;
    return c->v3->progress(c->tcomm);
}

static void tl_cancel(void *tcomm, braid_treq_t *req)
{
    ad_tcomm_t *c = tcomm;
    c->v3->cancel(c->tcomm, req);
}

static braid_status_t tl_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem)
{
    ad_tcomm_t *c = tcomm;
    return c->v3->mem_alloc(c->tcomm, len, mem);
}

static void tl_mem_free(void *tcomm, braid_rmem_t *mem)
{
    ad_tcomm_t *c = tcomm;
    c->v3->mem_free(c->tcomm, mem);
}

static braid_status_t tl_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                    size_t dst_off, const void *src,
                                    size_t len, size_t flag_off,
                                    uint64_t flag_val, braid_treq_t *req)
{
    ad_tcomm_t *c = tcomm;
    return c->v3->put_signal(c->tcomm, mem, peer, dst_off, src, len, flag_off,
                             flag_val, req);
}

static void adapt_transport(ad_tl_t *a, const braid_transport_v3_t *v3)
{
    braid_transport_t *t = &a->t;
    a->v3                = v3;
    t->struct_size       = sizeof(*t);
    t->caps              = v3->caps;
    t->mem_types         = 0; /* ABI 3 knew host memory only */
    t->name              = v3->name;
    t->probe             = v3->probe ? tl_probe : NULL;
    t->comm_create       = tl_comm_create;
    t->comm_destroy      = tl_comm_destroy;
    t->link              = tl_link;
    t->isend             = v3->isend ? tl_isend : NULL;
    t->irecv             = v3->irecv ? tl_irecv : NULL;
    t->test              = v3->test ? tl_test : NULL;
    t->progress          = v3->progress ? tl_progress : NULL;
    t->cancel            = tl_cancel;
    t->mem_alloc         = v3->mem_alloc ? tl_mem_alloc : NULL;
    t->mem_free          = v3->mem_free ? tl_mem_free : NULL;
    t->put_signal        = v3->put_signal ? tl_put_signal : NULL;
    t->wait              = NULL; /* the core never sleeps on it */
}

/* ---------------------- ABI-4 transports, seen by an ABI-3 algorithm */

/* tcomm of the ABI-3 view: the ABI-4 handle it stands for. */
typedef struct v3_view {
    braid_tl_t *tl;
} v3_view_t;

static braid_status_t v3_isend(void *tcomm, int peer, uint64_t tag,
                               const void *buf, size_t len, braid_treq_t *req)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    return tl->ops->isend(tl->tcomm, peer, tag, buf, len, req);
}

static braid_status_t v3_irecv(void *tcomm, int peer, uint64_t tag, void *buf,
                               size_t len, braid_treq_t *req)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    return tl->ops->irecv(tl->tcomm, peer, tag, buf, len, req);
}

static braid_status_t v3_test(void *tcomm, braid_treq_t *req)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    return tl->ops->test(tl->tcomm, req);
}

static braid_status_t v3_progress(void *tcomm)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    return tl->ops->progress ? tl->ops->progress(tl->tcomm) : BRAID_OK;
}

static void v3_cancel(void *tcomm, braid_treq_t *req)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    tl->ops->cancel(tl->tcomm, req);
}

static braid_status_t v3_mem_alloc(void *tcomm, size_t len, braid_rmem_t *mem)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    return tl->ops->mem_alloc(tl->tcomm, len, mem);
}

static void v3_mem_free(void *tcomm, braid_rmem_t *mem)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    tl->ops->mem_free(tl->tcomm, mem);
}

static braid_status_t v3_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                    size_t dst_off, const void *src,
                                    size_t len, size_t flag_off,
                                    uint64_t flag_val, braid_treq_t *req)
{
    braid_tl_t *tl = ((v3_view_t *)tcomm)->tl;
    return tl->ops->put_signal(tl->tcomm, mem, peer, dst_off, src, len,
                               flag_off, flag_val, req);
}

/* ------------------------------------------ ABI-3 algorithms, seen as ABI 4
 */

typedef struct ad_algo {
    braid_algo_t           a; /* first: self and task->algo point here */
    const braid_algo_v3_t *v3;
} ad_algo_t;

/* Per (communicator, candidate): what the ABI-3 algorithm sees. */
typedef struct ad_state {
    const braid_algo_v3_t *v3;
    void                  *state; /* the algorithm's own comm_state */
    v3_view_t              view;
    braid_transport_v3_t   ops; /* the ABI-3 view of view.tl */
    braid_tl_v3_t          tl;
    braid_topo_v3_t        topo;
    uint64_t               last_seq;
    size_t                 last_count;
    int                    calls;
} ad_state_t;

/* Per call, in task->priv. */
typedef struct ad_call {
    braid_task_v3_t task;
    int             started; /* the ABI-3 start succeeded */
} ad_call_t;

static double algo_estimate(const braid_algo_t    *self,
                            const braid_cost_in_t *in)
{
    braid_cost_in_v3_t in3;
    memset(&in3, 0, sizeof(in3));
    in3.coll   = in->coll;
    in3.bytes  = in->bytes;
    in3.nranks = in->nranks;
    in3.nnodes = in->nnodes;
    in3.ppn    = in->ppn;
    in3.topo   = in->topo;
    link3_of(&in3.link, &in->link);
    in3.reduce_gbps = in->reduce_gbps;
    in3.stage_us    = in->stage_us;
    return ((const ad_algo_t *)self)->v3->estimate(&in3);
}

static braid_status_t state_get(ad_state_t **out, braid_task_t *task,
                                const braid_algo_v3_t *v3)
{
    ad_state_t *s = *task->comm_state;
    if (s == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL)
            return braid_error(BRAID_ERR_NO_MEMORY,
                               "adapter: out of memory "
                               "for %s's state",
                               v3->name);
        s->v3      = v3;
        s->view.tl = task->tl;
        if (task->tl != NULL) {
            const braid_transport_t *t = task->tl->ops;
            s->ops.name                = t->name;
            s->ops.caps                = t->caps;
            s->ops.isend               = t->isend ? v3_isend : NULL;
            s->ops.irecv               = t->irecv ? v3_irecv : NULL;
            s->ops.test                = t->test ? v3_test : NULL;
            s->ops.progress            = v3_progress;
            s->ops.cancel              = v3_cancel;
            s->ops.mem_alloc           = t->mem_alloc ? v3_mem_alloc : NULL;
            s->ops.mem_free            = t->mem_free ? v3_mem_free : NULL;
            s->ops.put_signal          = t->put_signal ? v3_put_signal : NULL;
            s->tl.ops                  = &s->ops;
            s->tl.tcomm                = &s->view;
            link3_of(&s->tl.link, &task->tl->link);
        }
        topo3_of(&s->topo, task->topo);
        *task->comm_state = s;
    }
    *out = s;
    return BRAID_OK;
}

static braid_status_t algo_start(braid_task_t *task, braid_wait_t *wait)
{
    const braid_algo_v3_t *v3 = ((const ad_algo_t *)task->algo)->v3;
    ad_state_t            *s  = NULL;
    braid_status_t         st = state_get(&s, task, v3);
    if (st != BRAID_OK)
        return st;
    ad_call_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY,
                           "adapter: out of memory for "
                           "a call of %s",
                           v3->name);
    task->priv         = c;
    braid_task_v3_t *t = &c->task;
    t->coll            = task->coll;
    t->sendbuf         = task->sendbuf;
    t->recvbuf         = task->recvbuf;
    t->count           = task->count;
    t->dtype           = task->dtype;
    t->op              = task->op;
    t->root            = task->root;
    t->dtsize          = task->dtsize;
    t->rank            = task->rank;
    t->size            = task->size;
    t->seq             = task->seq;
    t->topo            = &s->topo;
    t->tl              = task->tl != NULL ? &s->tl : NULL;
    t->svc             = &svc3;
    t->comm_state      = &s->state;
    /* ABI 3's stream: this call repeats the one right before it. */
    t->stream = s->calls > 0 && s->last_seq + 1 == task->seq &&
                s->last_count == task->count;
    s->calls++;
    s->last_seq   = task->seq;
    s->last_count = task->count;
    *wait         = BRAID_WAIT_LOCAL;
    if ((st = v3->start(t)) == BRAID_OK)
        c->started = 1;
    return st;
}

static braid_status_t algo_progress(braid_task_t *task, braid_wait_t *wait)
{
    const braid_algo_v3_t *v3 = ((const ad_algo_t *)task->algo)->v3;
    ad_call_t             *c  = task->priv;
    c->task.remote_wait       = 0;
    braid_status_t st         = v3->progress(&c->task);
    *wait = c->task.remote_wait ? BRAID_WAIT_REMOTE : BRAID_WAIT_LOCAL;
    return st;
}

static void algo_finish(braid_task_t *task)
{
    const braid_algo_v3_t *v3 = ((const ad_algo_t *)task->algo)->v3;
    ad_call_t             *c  = task->priv;
    if (c != NULL && c->started)
        v3->finish(&c->task);
    free(c);
    task->priv = NULL;
}

static void algo_comm_state_free(void *state, braid_tl_t *tl)
{
    ad_state_t *s = state;
    (void)tl;
    if (s == NULL)
        return;
    if (s->state != NULL && s->v3->comm_state_free != NULL)
        s->v3->comm_state_free(s->state, s->tl.ops != NULL ? &s->tl : NULL);
    free(s);
}

static void adapt_algo(ad_algo_t *a, const braid_algo_v3_t *v3)
{
    braid_algo_t *t    = &a->a;
    a->v3              = v3;
    t->struct_size     = sizeof(*t);
    t->name            = v3->name;
    t->coll            = v3->coll;
    t->needs_caps      = v3->needs_caps;
    t->transport       = v3->transport;
    t->estimate        = algo_estimate;
    t->start           = algo_start;
    t->progress        = algo_progress;
    t->finish          = algo_finish;
    t->comm_state_free = algo_comm_state_free;
}

/* ------------------------------------------------------------------ plugin */

typedef struct ad_plugin {
    braid_plugin_t            p; /* first: self points here */
    const braid_plugin_v3_t  *v3;
    const braid_transport_t **tls;
    const braid_algo_t      **algos;
    ad_tl_t                  *tlv;
    ad_algo_t                *algov;
} ad_plugin_t;

static braid_status_t plugin_probe(const braid_plugin_t   *self,
                                   const braid_services_t *svc, char *why,
                                   size_t why_len)
{
    (void)svc;
    return ((const ad_plugin_t *)self)->v3->probe(&svc3, why, why_len);
}

static void plugin_unload(const braid_plugin_t *self)
{
    const braid_plugin_v3_t *v3 = ((const ad_plugin_t *)self)->v3;
    if (v3->unload != NULL)
        v3->unload();
}

void braid_adapt_v3_free(const braid_plugin_t *adapted)
{
    ad_plugin_t *a = (ad_plugin_t *)(uintptr_t)adapted;
    if (a == NULL)
        return;
    free(a->tls);
    free(a->algos);
    free(a->tlv);
    free(a->algov);
    free(a);
}

/* What an ABI-3 loader checked, plus what the adapter relies on. */
static const char *check_v3(const braid_plugin_v3_t *d)
{
    if (d->struct_size < sizeof(braid_plugin_v3_t))
        return "descriptor smaller than ABI 3's: corrupt or mismatched header";
    const char *bad =
        braid_loader_check_arrays(d->probe != NULL, d->n_transports,
                                  d->transports, d->n_algos, d->algos);
    if (bad != NULL)
        return bad;
    for (int t = 0; t < d->n_transports; t++) {
        const braid_transport_v3_t *tl = d->transports[t];
        if (tl == NULL || tl->name == NULL || tl->cancel == NULL ||
            tl->comm_create == NULL || tl->comm_destroy == NULL ||
            tl->link == NULL)
            return "a transport lacks its name, cancel, comm_create, "
                   "comm_destroy or link";
    }
    for (int i = 0; i < d->n_algos; i++) {
        const braid_algo_v3_t *a = d->algos[i];
        if (a == NULL || a->name == NULL || a->estimate == NULL ||
            a->start == NULL || a->progress == NULL || a->finish == NULL ||
            (unsigned)a->coll >= BRAID_COLL_COUNT)
            return "an algorithm lacks its name, collective, estimate, start, "
                   "progress or finish";
    }
    return NULL;
}

braid_status_t braid_adapt_v3(const braid_plugin_t **out, const void *desc,
                              char *why, size_t why_len)
{
    const braid_plugin_v3_t *d   = desc;
    const char              *bad = check_v3(d);
    *out                         = NULL;
    if (bad != NULL) {
        snprintf(why, why_len, "ABI 3 %s", bad);
        return BRAID_ERR_ABI;
    }
    ad_plugin_t *a = calloc(1, sizeof(*a));
    if (a != NULL) {
        a->tls   = calloc((size_t)d->n_transports + 1, sizeof(*a->tls));
        a->tlv   = calloc((size_t)d->n_transports + 1, sizeof(*a->tlv));
        a->algos = calloc((size_t)d->n_algos + 1, sizeof(*a->algos));
        a->algov = calloc((size_t)d->n_algos + 1, sizeof(*a->algov));
    }
    if (a == NULL || a->tls == NULL || a->tlv == NULL || a->algos == NULL ||
        a->algov == NULL) {
        braid_adapt_v3_free(a != NULL ? &a->p : NULL);
        snprintf(why, why_len, "out of memory adapting its ABI-3 descriptor");
        return BRAID_ERR_NO_MEMORY;
    }
    a->v3 = d;
    for (int t = 0; t < d->n_transports; t++) {
        adapt_transport(&a->tlv[t], d->transports[t]);
        a->tls[t] = &a->tlv[t].t;
    }
    for (int i = 0; i < d->n_algos; i++) {
        adapt_algo(&a->algov[i], d->algos[i]);
        a->algos[i] = &a->algov[i].a;
    }
    a->p.abi_version  = BRAID_PLUGIN_ABI_VERSION;
    a->p.struct_size  = sizeof(a->p);
    a->p.name         = d->name;
    a->p.version      = d->version;
    a->p.probe        = plugin_probe;
    a->p.n_transports = d->n_transports;
    a->p.transports   = a->tls;
    a->p.n_algos      = d->n_algos;
    a->p.algos        = a->algos;
    a->p.unload       = plugin_unload;
    *out              = &a->p;
    return BRAID_OK;
}
