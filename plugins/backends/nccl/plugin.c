/* The NCCL backend as a braid plugin: the only file that speaks the plugin
 * ABI (version 3 here).  Everything else in this folder takes plain
 * arguments, so a new ABI changes this file only.
 *
 * NCCL is a whole-collective library: it brings its own transport, here a
 * transport named "nccl" with no send/recv or put capabilities (so no
 * generic algorithm runs on it) whose per-communicator state is the NCCL
 * side of the communicator, and one algorithm per collective restricted to
 * it, which the core names "nccl".
 *
 * ABI 3 has no memory types: a task does not say whether its buffers are
 * device memory, and the estimate cannot either.  Host memory must never
 * reach NCCL, so under ABI 3 the candidate declines every call (estimate
 * -1) and the core refuses device buffers itself (core/cuda/route.c).  With
 * ABI 4's memory types the estimate becomes braid_nccl_model_time for
 * device buffers only, and the stream of a stream-ordered call reaches
 * start (see docs/nccl.md, "Porting"). */
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"

#define EXPORT __attribute__((visibility("default")))

braid_nccl_host_t braid_nccl_host;
static const braid_nccl_lib_t *lib;

static braid_status_t nccl_probe(const braid_services_v3_t *svc, char *why,
                                 size_t why_len)
{
    braid_nccl_host = (braid_nccl_host_t){svc->log, svc->error,
                                          svc->finish_avg, svc->timeout_s,
                                          svc->now};
    return braid_nccl_lib_open(&lib, why, why_len);
}

/* --------------------------------------------------------------- transport */

static braid_status_t tl_comm_create(const braid_services_v3_t *svc,
                                     const braid_oob_t *oob,
                                     const braid_topo_t *topo, void **tcomm)
{
    (void)svc;
    (void)topo;
    return braid_nccl_comm_create((braid_nccl_comm_t **)tcomm, lib, oob);
}

static void tl_comm_destroy(void *tcomm)
{
    braid_nccl_comm_destroy(tcomm);
}

/* NCCL's model needs more than a latency and a bandwidth; under ABI 3 its
 * inputs travel in the link: alpha_us holds the intra-node link class,
 * beta_gbps its bandwidth, put_beta_gbps the network's. */
static void tl_link(void *tcomm, braid_link_t *link)
{
    const braid_nccl_comm_t *c = tcomm;
    *link = (braid_link_t){(double)c->model.intra, c->model.intra_gbps, 0,
                           c->model.inter_gbps};
}

static braid_status_t tl_none(void *tcomm, int peer, uint64_t tag,
                              const void *buf, size_t len, braid_treq_t *req)
{
    (void)tcomm, (void)peer, (void)tag, (void)buf, (void)len, (void)req;
    return braid_nccl_fail(BRAID_ERR_NOT_SUPPORTED, "nccl: the nccl "
                           "transport has no point-to-point operations");
}

static braid_status_t tl_none_recv(void *tcomm, int peer, uint64_t tag,
                                   void *buf, size_t len, braid_treq_t *req)
{
    return tl_none(tcomm, peer, tag, buf, len, req);
}

static braid_status_t tl_test(void *tcomm, braid_treq_t *req)
{
    (void)tcomm;
    req->active = 0;
    return BRAID_OK;
}

static braid_status_t tl_progress(void *tcomm)
{
    (void)tcomm;
    return BRAID_OK;
}

static void tl_cancel(void *tcomm, braid_treq_t *req)
{
    (void)tcomm;
    req->active = 0;
}

static const braid_transport_v3_t nccl_transport = {
    .name        = "nccl",
    .caps        = 0,
    .comm_create = tl_comm_create,
    .comm_destroy = tl_comm_destroy,
    .link        = tl_link,
    .isend       = tl_none,
    .irecv       = tl_none_recv,
    .test        = tl_test,
    .progress    = tl_progress,
    .cancel      = tl_cancel,
};

/* --------------------------------------------------------------- algorithm */

static double nccl_estimate(const braid_cost_in_t *in)
{
    (void)in;
    return -1.0; /* ABI 3: the memory type is unknown (see the top) */
}

static braid_status_t nccl_start(braid_task_t *task)
{
    braid_nccl_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return braid_nccl_fail(BRAID_ERR_NO_MEMORY, "nccl: out of memory");
    *op = (braid_nccl_op_t){.coll = task->coll, .sendbuf = task->sendbuf,
                            .recvbuf = task->recvbuf, .count = task->count,
                            .dtype = task->dtype, .op = task->op,
                            .root = task->root, .on_stream = 0};
    task->priv = op;
    return braid_nccl_coll_start(task->tl->tcomm, op);
}

static braid_status_t nccl_progress(braid_task_t *task)
{
    return braid_nccl_coll_test(task->tl->tcomm, task->priv);
}

static void nccl_finish(braid_task_t *task)
{
    if (task->priv != NULL)
        braid_nccl_coll_cancel(task->tl->tcomm, task->priv);
    free(task->priv);
    task->priv = NULL;
}

#define NCCL_ALGO(c)                                                         \
    {                                                                        \
        .name = "nccl", .coll = (c), .needs_caps = 0, .transport = "nccl",  \
        .estimate = nccl_estimate, .start = nccl_start,                      \
        .progress = nccl_progress, .finish = nccl_finish,                    \
    }

static const braid_algo_v3_t algos[] = {
    NCCL_ALGO(BRAID_COLL_ALLREDUCE), NCCL_ALGO(BRAID_COLL_REDUCE_SCATTER),
    NCCL_ALGO(BRAID_COLL_ALLGATHER), NCCL_ALGO(BRAID_COLL_BROADCAST),
    NCCL_ALGO(BRAID_COLL_BARRIER),
};
static const braid_algo_v3_t *const algo_list[] = {
    &algos[0], &algos[1], &algos[2], &algos[3], &algos[4]};
static const braid_transport_v3_t *const transports[] = {&nccl_transport};

EXPORT const braid_plugin_v3_t braid_plugin_v3 = {
    .abi_version  = BRAID_PLUGIN_ABI_VERSION,
    .struct_size  = sizeof(braid_plugin_v3_t),
    .name         = "nccl",
    .version      = "1.0",
    .probe        = nccl_probe,
    .n_transports = 1,
    .transports   = transports,
    .n_algos      = 5,
    .algos        = algo_list,
};
