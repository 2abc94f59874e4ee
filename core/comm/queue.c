/* The communicator's FIFO of calls, its progress engine, and the
 * non-blocking request API.  Only the head call progresses, which is what
 * makes calls complete in the order they were issued; every wait is bounded
 * by BRAID_TIMEOUT. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/api.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "comm"
#define BRAID_HEALTH_PERIOD_S 0.005
/* A running call looks at the clock (for its timeout and the failure
 * detector) once every this many polls, not on every one: a small call
 * completes in one or two polls, and two clock reads a call were 4-5% of an
 * 8-byte all-reduce on an oversubscribed host.  64 polls take well under a
 * millisecond even when every poll yields, so the timeout starts that much
 * late at most. */
#define BRAID_CLOCK_POLLS 64u /* a power of two */

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

void braid_call_enqueue(braid_comm_t *comm, braid_call_t *call)
{
    call->next = NULL;
    if (comm->tail != NULL)
        comm->tail->next = call;
    else
        comm->head = call;
    comm->tail = call;
}

braid_status_t braid_call_complete(braid_comm_t *comm, braid_call_t *call,
                                   braid_status_t st)
{
    /* The message first: a finish() that cancels requests may go through a
     * transport that records errors of its own, which must not replace the
     * one that ended the call. */
    if (st != BRAID_OK)
        snprintf(call->error, sizeof(call->error), "%s", braid_last_error());
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
    braid_task_t *t = &call->task;
    size_t bytes    = t->count * t->dtsize;
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
        st = call->cand->algo->start(&call->task);
        if (st != BRAID_OK)
            return braid_call_failed(comm, call, st, 1);
        call->started = 1;
    }
    call->task.remote_wait = 0;
    st = call->cand->algo->progress(&call->task);
    if (st == BRAID_OK)
        return braid_call_complete(comm, call, st);
    if (st != BRAID_INPROGRESS)
        return braid_call_failed(comm, call, st, 1);
    if ((++call->polls & (BRAID_CLOCK_POLLS - 1)) != 0)
        return BRAID_INPROGRESS;
    double now = braid_now_s();
    if (call->t_start == 0)
        call->t_start = now;
    /* A dead peer, or a failure inquiry another rank started, shows up on
     * the bootstrap channel long before the timeout; look every few
     * milliseconds, not on every poll. */
    if (now - comm->last_health >= BRAID_HEALTH_PERIOD_S) {
        comm->last_health = now;
        if ((st = braid_bootstrap_health(comm->bs)) != BRAID_OK)
            return braid_call_failed(comm, call, st, 0);
    }
    if (now - call->t_start <= comm->timeout_s)
        return BRAID_INPROGRESS;
    braid_error(BRAID_ERR_TIMEOUT, "no progress within BRAID_TIMEOUT=%.1f s",
                comm->timeout_s);
    return braid_call_failed(comm, call, BRAID_ERR_TIMEOUT, 1);
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

/* Spinning is fastest while a waiting rank owns its core; once the wait has
 * lasted longer than a hand-off between ranks would take, the peer it waits
 * for is probably runnable on this very core (oversubscribed host, or other
 * load), and yielding after every poll lets it run. */
#define BRAID_SPIN_BUDGET_S 20e-6
/* Polls an oversubscribed rank may spend waiting for ranks on other CPUs
 * (task->remote_wait) before it yields anyway: a few microseconds, longer
 * than a hand-off between two ranks of another CPU takes. */
#define BRAID_REMOTE_SPIN_POLLS 128u

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Whether an oversubscribed rank should poll again rather than yield: the
 * running call waits only for ranks pinned to other CPUs (the ranks that
 * share this CPU have all done their part, so yielding would hand the CPU
 * to one that can do nothing), and it is one of a stream of identical
 * calls.  Polling then lets this rank finish the call when the data lands
 * and go straight on to post the next one, so the CPU changes hands about
 * once per call instead of twice.  It is unfair, though: a mate that
 * entered the call first finishes only after this rank moves on, so for a
 * call that is not part of a stream (a barrier before it, say) the rank
 * that started first should not wait for that, and the rank yields. */
static int spin_for_remote(const braid_comm_t *comm, unsigned *spins)
{
    const braid_call_t *head = comm->head;
    if (head == NULL || !head->task.stream || !head->task.remote_wait ||
        *spins >= BRAID_REMOTE_SPIN_POLLS)
        return 0;
    ++*spins;
    return 1;
}

braid_status_t braid_call_wait(braid_comm_t *comm, braid_call_t *call)
{
    unsigned polls    = 0;
    unsigned spins    = 0;
    int      yielding = comm->oversubscribed;
    double   t0       = 0;
    while (!call->done) {
        braid_comm_progress(comm);
        if (call->done)
            break;
        if (yielding) {
            if (spin_for_remote(comm, &spins))
                cpu_relax();
            else
                sched_yield();
        } else if ((++polls & 63) == 0) {
            double now = braid_now_s();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 > BRAID_SPIN_BUDGET_S)
                yielding = 1;
        }
    }
    if (call->status != BRAID_OK)
        return braid_error(call->status, "%s", call->error);
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
    *req = NULL;
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
    *done = 0;
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
