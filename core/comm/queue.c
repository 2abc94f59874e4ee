/* The communicator's FIFO of calls, the life of a call (start, progress,
 * finish), and the non-blocking request API.  Only the head call
 * progresses, which is what makes calls complete in the order they were
 * issued.  How a rank waits, and the timeout, are wait.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/api.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "comm"

void braid_comm_fail(braid_comm_t *comm, braid_status_t status,
                     const char *msg)
{
    if (comm->failed != BRAID_OK)
        return;
    comm->failed = status;
    snprintf(comm->failed_msg, sizeof(comm->failed_msg), "%s", msg);
    BRAID_LOG(BRAID_LOG_ERROR, LOG_COMP, "communicator failed: %s (%s)", msg,
              braid_status_str(status));
    /* The peers may be waiting for this rank in a collective it will never
     * finish: failing the bootstrap channel tells them now, and why. */
    braid_bootstrap_abort(comm->bs, status, msg);
}

braid_status_t braid_call_complete(braid_comm_t *comm, braid_call_t *call,
                                   braid_status_t st)
{
    /* The message first: a finish() that cancels requests may go through a
     * transport that records errors of its own, which must not replace the
     * one that ended the call. */
    if (st != BRAID_OK)
        snprintf(call->error, sizeof(call->error), "%s", braid_last_error());
    /* Once start() ran, finish() follows whatever it returned. */
    if (call->started && call->cand != NULL)
        call->cand->algo->finish(&call->task);
    if (__builtin_expect(call->widen != NULL, 0))
        braid_avg_finish(call, comm->size, st);
    /* A call that failed is not done: ranks that look at the board later
     * must still see it as the one that failed here. */
    if (st == BRAID_OK)
        braid_progress_done(comm->progress, call->task.seq);
    else
        atomic_store(&comm->progress->failed, 1);
    call->done   = 1;
    call->status = st;
    if (st != BRAID_OK)
        braid_comm_fail(comm, st, call->error);
    comm->head = call->next;
    if (comm->head == NULL)
        comm->tail = NULL;
    return st;
}

/* The local part of calls that need no communication (one rank, no data). */
static void call_run_local(braid_call_t *call)
{
    braid_task_t *t     = &call->task;
    size_t        bytes = t->count * t->dtsize;
    if (t->coll == BRAID_COLL_BROADCAST || t->coll == BRAID_COLL_BARRIER ||
        bytes == 0 || t->sendbuf == t->recvbuf)
        return;
    /* size 1: allreduce, reduce_scatter and allgather all copy one block. */
    memcpy(t->recvbuf, t->sendbuf, bytes);
}

static braid_status_t call_progress(braid_comm_t *comm, braid_call_t *call)
{
    braid_status_t st;
    if (comm->failed != BRAID_OK) {
        st = braid_error(BRAID_ERR_STATE, "communicator failed earlier: %s",
                         comm->failed_msg);
        return braid_call_complete(comm, call, st);
    }
    if (call->cand == NULL) {
        call_run_local(call);
        return braid_call_complete(comm, call, BRAID_OK);
    }
    if (!call->started) {
        call->started = 1;
        call->wait    = BRAID_WAIT_LOCAL;
        st            = call->cand->algo->start(&call->task, &call->wait);
        if (st != BRAID_OK)
            return braid_call_failed(comm, call, st, 1);
        if (braid_wait_after_start(comm, call))
            return BRAID_INPROGRESS;
    }
    call->wait = BRAID_WAIT_LOCAL;
    st         = call->cand->algo->progress(&call->task, &call->wait);
    if (st == BRAID_INPROGRESS)
        return braid_wait_check(comm, call);
    if (st != BRAID_OK)
        return braid_call_failed(comm, call, st, 1);
    return braid_call_complete(comm, call, st);
}

braid_status_t braid_comm_progress(braid_comm_t *comm)
{
    while (comm->head != NULL) {
        braid_status_t st = call_progress(comm, comm->head);
        if (st == BRAID_INPROGRESS)
            return st;
    }
    return BRAID_OK;
}

BRAID_API braid_status_t braid_iallreduce(const void *sendbuf, void *recvbuf,
                                          size_t count, braid_dtype_t dtype,
                                          braid_op_t op, braid_comm_t *comm,
                                          braid_request_t **req)
{
    braid_error_clear();
    if (req == NULL || comm == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "iallreduce: %s is NULL",
                           req == NULL ? "req" : "comm");
    *req               = NULL;
    braid_request_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "iallreduce: out of memory");
    braid_status_t st = braid_comm_enter(comm, BRAID_API_IALLREDUCE);
    if (st != BRAID_OK) {
        free(r);
        return st;
    }
    st = braid_call_prepare(&r->call, comm, "iallreduce", BRAID_COLL_ALLREDUCE,
                            sendbuf, recvbuf, count, dtype, op, 0);
    if (st != BRAID_OK) {
        braid_comm_leave(comm);
        free(r);
        return st;
    }
    r->comm = comm;
    comm->pending_requests++;
    braid_call_enqueue(comm, &r->call);
    braid_comm_progress(comm); /* start it now so that it overlaps */
    braid_comm_leave(comm);
    *req = r;
    return BRAID_OK;
}

static braid_status_t request_release(braid_request_t *req)
{
    braid_status_t st = req->call.status;
    if (st != BRAID_OK)
        braid_error(st, "%s", req->call.error);
    req->comm->pending_requests--;
    free(req);
    return st;
}

BRAID_API braid_status_t braid_test(braid_request_t *req, int *done)
{
    braid_error_clear();
    if (req == NULL || done == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_test: %s is NULL",
                           req == NULL ? "req" : "done");
    *done              = 0;
    braid_comm_t *comm = req->comm;
    /* Another thread inside the communicator is progressing it: "not done
     * yet" is the truth, and a polling thread must not fail for it. */
    if (!braid_comm_try_enter(comm, BRAID_API_TEST))
        return BRAID_OK;
    braid_status_t st = BRAID_OK;
    if (!req->call.done)
        braid_comm_progress(comm);
    if (req->call.done) {
        *done = 1;
        st    = request_release(req);
    }
    braid_comm_leave(comm);
    return st;
}

BRAID_API braid_status_t braid_wait(braid_request_t *req)
{
    braid_error_clear();
    if (req == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_wait: req is NULL");
    braid_comm_t  *comm = req->comm;
    braid_status_t st   = braid_comm_enter_wait(comm, BRAID_API_WAIT);
    if (st != BRAID_OK)
        return st;
    braid_call_wait(comm, &req->call);
    st = request_release(req);
    braid_comm_leave(comm);
    return st;
}
