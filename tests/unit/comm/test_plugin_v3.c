/* A plugin built for ABI 3 (against the frozen header in tests/abi3), for
 * the loader's adapter: one transport and one algorithm, both as small as
 * they can be while still doing real work.
 *
 *   transport "loop3"  one rank only: a send lands in the matching posted
 *                      receive (or waits for it), completion is seen by test
 *   algorithm "copy3"  allreduce over send/receive to itself: posts the
 *                      receive in start, the send in the first progress,
 *                      and reports ABI 3's remote_wait once it waits; it
 *                      records task->stream so the test can read what the
 *                      adapter rebuilt
 *
 * TEST_KIND 0: the good one ("tv3"); 1: the same with a transport that has
 * no cancel ("tv3bad"), which the adapter must refuse. */
#include <stdlib.h>
#include <string.h>

#include <braid/plugin.h> /* tests/abi3/braid/plugin.h: ABI 3 */

#define EXPORT __attribute__((visibility("default")))

_Static_assert(BRAID_PLUGIN_ABI_VERSION == 3,
               "built against the ABI-3 header");

/* ------------------------------------------------------------- transport */

typedef struct loop_op {
    int         send; /* 1: a send waiting for its receive */
    uint64_t    tag;
    void       *buf;
    const void *sbuf;
    size_t      len;
    int         done;
} loop_op_t;

typedef struct loop {
    loop_op_t ops[8];
    int       nops;
} loop_t;

static braid_status_t loop_create(const braid_services_v3_t *svc,
                                  const braid_oob_t         *oob,
                                  const braid_topo_t *topo, void **tcomm)
{
    (void)topo;
    if (oob->size != 1)
        return svc->error(BRAID_ERR_UNAVAILABLE, "loop3: one rank only");
    *tcomm = calloc(1, sizeof(loop_t));
    return *tcomm ? BRAID_OK : BRAID_ERR_NO_MEMORY;
}

static void loop_destroy(void *tcomm) { free(tcomm); }

static void loop_link(void *tcomm, braid_link_t *link)
{
    (void)tcomm;
    link->alpha_us  = 2.5;
    link->beta_gbps = 4.0;
}

/* Pairs a new op with a waiting one of the other kind, or queues it. */
static braid_status_t loop_post(loop_t *l, int send, uint64_t tag, void *buf,
                                const void *sbuf, size_t len,
                                braid_treq_t *req)
{
    for (int i = 0; i < l->nops; i++) {
        loop_op_t *o = &l->ops[i];
        if (!o->done && o->send != send && o->tag == tag && o->len == len) {
            memcpy(send ? o->buf : buf, send ? sbuf : o->sbuf, len);
            o->done     = 1;
            req->handle = NULL; /* complete at once */
            req->active = 0;
            return BRAID_OK;
        }
    }
    if (l->nops == 8)
        return BRAID_ERR_NO_MEMORY;
    l->ops[l->nops] = (loop_op_t){send, tag, buf, sbuf, len, 0};
    req->handle     = &l->ops[l->nops++];
    req->active     = 1;
    return BRAID_OK;
}

static braid_status_t loop_isend(void *tcomm, int peer, uint64_t tag,
                                 const void *buf, size_t len,
                                 braid_treq_t *req)
{
    (void)peer;
    return loop_post(tcomm, 1, tag, NULL, buf, len, req);
}

static braid_status_t loop_irecv(void *tcomm, int peer, uint64_t tag,
                                 void *buf, size_t len, braid_treq_t *req)
{
    (void)peer;
    return loop_post(tcomm, 0, tag, buf, NULL, len, req);
}

static braid_status_t loop_test(void *tcomm, braid_treq_t *req)
{
    loop_op_t *o = req->handle;
    (void)tcomm;
    if (!req->active || o == NULL || o->done) {
        req->active = 0;
        req->handle = NULL;
        return BRAID_OK;
    }
    return BRAID_INPROGRESS;
}

static braid_status_t loop_progress(void *tcomm)
{
    (void)tcomm;
    return BRAID_OK;
}

__attribute__((unused)) static void loop_cancel(void *tcomm, braid_treq_t *req)
{
    (void)tcomm;
    req->active = 0;
    req->handle = NULL;
}

static const braid_transport_v3_t loop3 = {
    .name         = "loop3",
    .caps         = BRAID_CAP_SENDRECV,
    .comm_create  = loop_create,
    .comm_destroy = loop_destroy,
    .link         = loop_link,
    .isend        = loop_isend,
    .irecv        = loop_irecv,
    .test         = loop_test,
    .progress     = loop_progress,
#if TEST_KIND == 0
    .cancel = loop_cancel,
#endif
};

/* ------------------------------------------------------------- algorithm */

EXPORT int tv3_last_stream = -1; /* task->stream of the last start */

typedef struct copy_state {
    braid_treq_t reqs[2];
    int          sent;
} copy_state_t;

static double copy_estimate(const braid_cost_in_t *in)
{
    return in->link.alpha_us + (double)in->bytes / (in->link.beta_gbps * 1e3);
}

static braid_status_t copy_start(braid_task_t *task)
{
    copy_state_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return BRAID_ERR_NO_MEMORY;
    task->priv      = s;
    tv3_last_stream = task->stream;
    return task->tl->ops->irecv(task->tl->tcomm, task->rank,
                                BRAID_TAG(task->seq, 0), task->recvbuf,
                                task->count * task->dtsize, &s->reqs[0]);
}

static braid_status_t copy_progress(braid_task_t *task)
{
    copy_state_t  *s = task->priv;
    braid_status_t st;
    if (!s->sent) {
        s->sent = 1;
        st      = task->tl->ops->isend(task->tl->tcomm, task->rank,
                                       BRAID_TAG(task->seq, 0), task->sendbuf,
                                       task->count * task->dtsize, &s->reqs[1]);
        if (st != BRAID_OK)
            return st;
        task->remote_wait = 1; /* ABI 3's hint: the adapter maps it */
        return BRAID_INPROGRESS;
    }
    for (int i = 0; i < 2; i++)
        if ((st = task->tl->ops->test(task->tl->tcomm, &s->reqs[i])) !=
            BRAID_OK)
            return st;
    return BRAID_OK;
}

static void copy_finish(braid_task_t *task)
{
    copy_state_t *s = task->priv;
    for (int i = 0; s != NULL && i < 2; i++)
        task->tl->ops->cancel(task->tl->tcomm, &s->reqs[i]);
    free(s);
    task->priv = NULL;
}

static const braid_algo_v3_t copy3 = {
    .name       = "copy3",
    .coll       = BRAID_COLL_ALLREDUCE,
    .needs_caps = BRAID_CAP_SENDRECV,
    .estimate   = copy_estimate,
    .start      = copy_start,
    .progress   = copy_progress,
    .finish     = copy_finish,
};

/* ---------------------------------------------------------------- plugin */

EXPORT int tv3_unloaded;

static braid_status_t v3_probe(const braid_services_v3_t *svc, char *why,
                               size_t why_len)
{
    (void)svc, (void)why, (void)why_len;
    return BRAID_OK;
}

static void v3_unload(void) { tv3_unloaded = 1; }

static const braid_transport_v3_t *const transports[] = {&loop3};
static const braid_algo_v3_t *const      algos[]      = {&copy3};

EXPORT const braid_plugin_v3_t braid_plugin_v3 = {
    .abi_version = BRAID_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(braid_plugin_v3_t),
#if TEST_KIND == 0
    .name = "tv3",
#else
    .name = "tv3bad",
#endif
    .version      = "3.0",
    .probe        = v3_probe,
    .n_transports = 1,
    .transports   = transports,
    .n_algos      = 1,
    .algos        = algos,
    .unload       = v3_unload,
};
