/* The stages of allreduce and reduce_scatter "recdbl" (recdbl.h). */
#include "recdbl.h"

static int folded(const braid_task_t *task, const braid_p2p_recdbl_t *g)
{
    return task->rank < 2 * g->rem;
}

braid_status_t braid_p2p_recdbl_start(braid_task_t *task, size_t size,
                                      const braid_p2p_recdbl_ops_t *ops,
                                      size_t in_bytes, size_t out_bytes,
                                      size_t scratch_bytes)
{
    const int      n = task->size;
    braid_status_t st =
        braid_p2p_state(task, size, offsetof(braid_p2p_recdbl_t, reqs), 2);
    if (st != BRAID_OK)
        return st;
    braid_p2p_recdbl_t *g = task->priv;
    g->ops                = ops;
    g->p                  = braid_p2p_pow2_floor(n);
    g->rem                = n - g->p;
    g->nsteps             = braid_p2p_log2_ceil(g->p);
    g->in_bytes           = in_bytes;
    g->out_bytes          = out_bytes;
    if (folded(task, g))
        g->vrank = task->rank % 2 ? task->rank / 2 : -1;
    else
        g->vrank = task->rank - g->rem;
    if (g->vrank >= 0 && n > 1)
        return braid_p2p_scratch(task, scratch_bytes, &g->tmp);
    return BRAID_OK; /* on error finish() gives the state back */
}

static braid_status_t post(braid_task_t *task, braid_p2p_recdbl_t *g)
{
    const int  me       = task->rank;
    const long out_step = 1 + g->nsteps;

    switch (g->stage) {
    case BRAID_P2P_ST_FOLD_IN:
        return braid_p2p_recv(task, me - 1, 0, g->tmp, g->in_bytes,
                              &g->reqs[0]);
    case BRAID_P2P_ST_MAIN: return g->ops->post(task);
    case BRAID_P2P_ST_FOLD_OUT:
        return braid_p2p_send(task, me - 1, out_step,
                              g->ops->idle_result(task), g->out_bytes,
                              &g->reqs[0]);
    case BRAID_P2P_ST_IDLE_SEND:
        return braid_p2p_send(task, me + 1, 0, task->sendbuf, g->in_bytes,
                              &g->reqs[0]);
    case BRAID_P2P_ST_IDLE_RECV:
        /* Only now: in place, the buffer was being sent until this point. */
        return braid_p2p_recv(task, me + 1, out_step, task->recvbuf,
                              g->out_bytes, &g->reqs[0]);
    default: return BRAID_OK;
    }
}

static void enter_main(braid_task_t *task, braid_p2p_recdbl_t *g)
{
    if (g->ops->begin != NULL)
        g->ops->begin(task);
    g->stage = BRAID_P2P_ST_MAIN;
}

/* Local work once the stage's messages are done; chooses the next stage. */
static void complete(braid_task_t *task, braid_p2p_recdbl_t *g)
{
    switch (g->stage) {
    case BRAID_P2P_ST_INIT:
        if (task->count == 0) {
            g->stage = BRAID_P2P_ST_DONE;
        } else if (task->size == 1) {
            braid_p2p_local(task);
            g->stage = BRAID_P2P_ST_DONE;
        } else if (folded(task, g)) {
            g->stage = task->rank % 2 == 0 ? BRAID_P2P_ST_IDLE_SEND
                                           : BRAID_P2P_ST_FOLD_IN;
        } else {
            enter_main(task, g);
        }
        break;
    case BRAID_P2P_ST_FOLD_IN:
        g->ops->fold_in(task);
        enter_main(task, g);
        break;
    case BRAID_P2P_ST_MAIN:
        if (g->ops->step_done(task))
            g->stage =
                folded(task, g) ? BRAID_P2P_ST_FOLD_OUT : BRAID_P2P_ST_DONE;
        break;
    case BRAID_P2P_ST_IDLE_SEND: g->stage = BRAID_P2P_ST_IDLE_RECV; break;
    default: g->stage = BRAID_P2P_ST_DONE; break;
    }
}

braid_status_t braid_p2p_recdbl_progress(braid_task_t *task,
                                         braid_wait_t *wait)
{
    *wait = BRAID_WAIT_PEER; /* only its requests are ever left */
    braid_p2p_recdbl_t *g = task->priv;
    braid_status_t      st;

    for (;;) {
        if ((st = braid_p2p_test(task)) != BRAID_OK)
            return st;
        complete(task, g);
        if (g->stage == BRAID_P2P_ST_DONE)
            return BRAID_OK;
        if ((st = post(task, g)) != BRAID_OK)
            return st;
    }
}
