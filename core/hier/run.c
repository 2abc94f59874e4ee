/* A composite call: for each piece, its steps one after another, each an
 * ordinary call of the candidate its level's cost model picks.  The call is
 * one call of the communicator -- one entry of its queue, one number on its
 * progress board, bounded by its timeout and judged by its failure inquiry
 * -- and its steps are calls on the levels, which plugins run as they run
 * any call on a communicator of that size. */
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "util/log.h"

braid_status_t braid_hier_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    braid_hier_t     *h = *task->comm_state;
    braid_hier_run_t *r = &h->run;
    memset(r, 0, sizeof(*r));
    int p = braid_hier_pieces(h, task->coll, task->count * task->dtsize);
    r->piece_count = (task->count + (size_t)p - 1) / (size_t)p;
    r->npieces = (int)((task->count + r->piece_count - 1) / r->piece_count);
    task->priv = r;
    return BRAID_OK;
}

/* Starts the current step: the candidate its level picks, and the step as
 * that candidate's algorithm sees it. */
static braid_status_t step_start(braid_hier_t *h, const braid_task_t *call,
                                 braid_wait_t *wait)
{
    static const braid_task_t zero_task;
    braid_hier_run_t         *r = &h->run;
    braid_hier_step_t        *s = &r->steps[r->step];
    braid_status_t            st =
        braid_select(&r->cand, s->sel, s->coll, s->count * call->dtsize,
                     BRAID_MEM_BIT(BRAID_MEM_HOST));
    if (st != BRAID_OK)
        return st;
    braid_task_t *t = &r->sub;
    *t              = zero_task;
    t->struct_size  = sizeof(*t);
    t->coll         = s->coll;
    t->sendbuf      = s->sendbuf;
    t->recvbuf      = s->recvbuf;
    t->count        = s->count;
    t->dtype        = call->dtype;
    t->op           = call->op == BRAID_AVG ? BRAID_SUM : call->op;
    t->root         = s->root;
    t->dtsize       = call->dtsize;
    t->rank         = s->lvl->rank;
    t->size         = s->lvl->size;
    t->seq          = s->lvl->seq++;
    t->topo         = &s->lvl->topo;
    t->tl           = r->cand->tl;
    t->svc          = call->svc;
    t->comm_state   = &r->cand->comm_state;
    t->res          = r->cand->res;
    t->sig32        = braid_task_sig32(call); /* the composite call's */
    t->algo         = r->cand->algo;
    t->send_mem     = BRAID_MEM_HOST;
    t->recv_mem     = BRAID_MEM_HOST;
    /* finish follows whatever start returns. */
    r->started = 1;
    return r->cand->algo->start(t, wait);
}

/* A step's error, saying which step it was. */
static braid_status_t step_failed(const braid_hier_t *h, braid_status_t st)
{
    const braid_hier_run_t  *r = &h->run;
    const braid_hier_step_t *s = &r->steps[r->step];
    char                     msg[400];
    snprintf(msg, sizeof(msg), "%s", braid_last_error());
    return braid_error(st, "hier: %s step %s (%s, rank %d of %d there): %s",
                       s->lvl->name, braid_coll_name(s->coll),
                       r->cand != NULL ? r->cand->name : "no candidate",
                       s->lvl->rank, s->lvl->size, msg);
}

braid_status_t braid_hier_progress(braid_task_t *task, braid_wait_t *wait)
{
    braid_hier_t     *h = *task->comm_state;
    braid_hier_run_t *r = &h->run;
    braid_status_t    st;
    while (r->piece < r->npieces) {
        if (!r->planned) {
            if ((st = braid_hier_plan(h, task)) != BRAID_OK)
                return st;
            r->planned = 1;
            r->step    = 0;
        }
        for (; r->step < r->nsteps; r->step++) {
            const braid_hier_step_t *s = &r->steps[r->step];
            if (s->lvl != NULL) {
                *wait = BRAID_WAIT_LOCAL;
                if (!r->started &&
                    (st = step_start(h, task, wait)) != BRAID_OK)
                    return step_failed(h, st);
                *wait = BRAID_WAIT_LOCAL;
                st    = r->cand->algo->progress(&r->sub, wait);
                if (st == BRAID_INPROGRESS)
                    return st;
                /* A failed step is finished by braid_hier_finish, after
                 * the core has kept this message. */
                if (st != BRAID_OK)
                    return step_failed(h, st);
                r->started = 0;
                r->cand->algo->finish(&r->sub);
            }
            braid_hier_after_step(h, task, r->step);
        }
        braid_hier_piece_done(h, task);
        r->piece++;
        r->planned = 0;
    }
    return BRAID_OK;
}

void braid_hier_finish(braid_task_t *task)
{
    braid_hier_run_t *r = task->priv;
    /* A step still running (the call failed): its algorithm cancels what it
     * posted. */
    if (r != NULL && r->started) {
        r->started = 0;
        r->cand->algo->finish(&r->sub);
    }
    task->priv = NULL;
}
