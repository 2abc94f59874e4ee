/* Public blocking collectives: validate, choose a candidate, run in order. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "util/api.h"
#include "util/env.h"
#include "util/log.h"
#include "util/names.h"

static int overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

/* Bytes each buffer spans; 0 on overflow. */
static braid_status_t spans(size_t *send_len, size_t *recv_len,
                            const braid_comm_t *comm, braid_coll_t coll,
                            size_t count, size_t dtsize, const char *fn)
{
    size_t block;
    if (__builtin_mul_overflow(count, dtsize, &block) ||
        __builtin_mul_overflow(block, (size_t)comm->size, send_len))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s: count %zu of %zu-byte "
                           "elements on %d ranks overflows the address space",
                           fn, count, dtsize, comm->size);
    switch (coll) {
    case BRAID_COLL_REDUCE_SCATTER:
        *recv_len = block;
        break; /* send = n*block */
    case BRAID_COLL_ALLGATHER:
        *recv_len = *send_len;
        *send_len = block;
        break;
    default: *send_len = *recv_len = block; break;
    }
    return BRAID_OK;
}

/* The one aliasing each collective allows is its in-place form. */
static braid_status_t check_aliasing(const braid_comm_t *comm,
                                     braid_coll_t coll, const void *sendbuf,
                                     size_t send_len, const void *recvbuf,
                                     size_t recv_len, size_t block,
                                     const char *fn)
{
    if (coll == BRAID_COLL_BROADCAST || sendbuf == recvbuf)
        return coll == BRAID_COLL_ALLREDUCE || coll == BRAID_COLL_BROADCAST ||
                       send_len == 0 || comm->rank == 0
                   ? BRAID_OK
                   : braid_error(BRAID_ERR_INVALID_ARG,
                                 "%s: sendbuf == recvbuf "
                                 "is in place only on rank 0; on rank %d in "
                                 "place means %s",
                                 fn, comm->rank,
                                 coll == BRAID_COLL_ALLGATHER
                                     ? "sendbuf == recvbuf + rank*sendcount"
                                     : "recvbuf == sendbuf + rank*recvcount");
    const char *s = sendbuf;
    const char *r = recvbuf;
    if (coll == BRAID_COLL_ALLGATHER && s == r + (size_t)comm->rank * block)
        return BRAID_OK;
    if (coll == BRAID_COLL_REDUCE_SCATTER &&
        r == s + (size_t)comm->rank * block)
        return BRAID_OK;
    if (overlaps(sendbuf, send_len, recvbuf, recv_len))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s: sendbuf and recvbuf "
                           "overlap without being the in-place form",
                           fn);
    return BRAID_OK;
}

static inline __attribute__((always_inline)) braid_status_t
validate(braid_comm_t *comm, const char *fn, braid_coll_t coll,
         const void *sendbuf, void *recvbuf, size_t count, braid_dtype_t dtype,
         braid_op_t op, int root)
{
    size_t         send_len = 0, recv_len = 0;
    braid_status_t st;

    if ((unsigned)dtype >= BRAID_DTYPE_COUNT)
        return braid_error(BRAID_ERR_INVALID_ARG, "%s: invalid dtype %d", fn,
                           (int)dtype);
    if ((unsigned)op >= BRAID_OP_COUNT)
        return braid_error(BRAID_ERR_INVALID_ARG, "%s: invalid op %d", fn,
                           (int)op);
    if (coll == BRAID_COLL_BROADCAST && (root < 0 || root >= comm->size))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s: root %d is not a rank "
                           "of this %d-rank communicator",
                           fn, root, comm->size);
    size_t dtsize = braid_dtsize(dtype);
    if ((st = spans(&send_len, &recv_len, comm, coll, count, dtsize, fn)) !=
        BRAID_OK)
        return st;
    if ((send_len > 0 && sendbuf == NULL) || (recv_len > 0 && recvbuf == NULL))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s: %s is NULL with count "
                           "%zu",
                           fn,
                           coll == BRAID_COLL_BROADCAST ? "buf"
                           : sendbuf == NULL            ? "sendbuf"
                                                        : "recvbuf",
                           count);
    return check_aliasing(comm, coll, sendbuf, send_len, recvbuf, recv_len,
                          count * dtsize, fn);
}

/* Inlined into every blocking collective: on an 8-byte call, passing a
 * dozen arguments through a call costs as much as a check or two. */
static inline __attribute__((always_inline)) braid_status_t
call_prepare(braid_call_t *call, braid_comm_t *comm, const char *fn,
             braid_coll_t coll, const void *sendbuf, void *recvbuf,
             size_t count, braid_dtype_t dtype, braid_op_t op, int root,
             int on_stream, void *stream, int trial_ok)
{
    braid_status_t st;
    braid_route_t  route;
    braid_route_host(&route);
    if (comm->failed != BRAID_OK)
        return braid_error(BRAID_ERR_STATE,
                           "%s: communicator failed earlier: "
                           "%s",
                           fn, comm->failed_msg);
    st = validate(comm, fn, coll, sendbuf, recvbuf, count, dtype, op, root);
    /* Where the buffers live is part of the arguments (cuda/route.c);
     * nothing to ask in a process that can have no device memory. */
    if (st == BRAID_OK && (on_stream || braid_devptr_possible()))
        st = braid_route_call(&route, coll, sendbuf, recvbuf,
                              count * braid_dtsize(dtype), on_stream, stream);
    if (comm->check) {
        /* Every rank takes part, valid or not, so that nobody waits for a
         * rank that already returned; its own error message wins. */
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", braid_last_error());
        braid_status_t cst = braid_check_call(
            comm, coll, count, dtype, op, root, route.need, st == BRAID_OK);
        if (st != BRAID_OK || cst != BRAID_OK) {
            /* Nothing is issued anywhere, but every rank counted the call,
             * so later fingerprints stay comparable.  No call of this
             * number will run: it counts as entered and done. */
            comm->seq++;
            atomic_store(&comm->progress->entered, comm->seq);
            atomic_store(&comm->progress->completed, comm->seq);
            return st != BRAID_OK ? braid_error(st, "%s", msg) : cst;
        }
    }
    if (st != BRAID_OK)
        return st;

    /* Field by field rather than one memset of the call: a memset this
     * size compiles to `rep stos`, whose start-up costs more than the
     * stores of the few fields a call uses (docs/performance.md). */
    call->cand      = NULL;
    call->started   = 0;
    call->done      = 0;
    call->status    = BRAID_OK;
    call->t_start   = 0;
    call->polls     = 0;
    call->widen     = NULL;
    call->trial     = NULL;
    call->next      = NULL;
    call->error[0]  = '\0';
    braid_sig_t sig = braid_sig_make(coll, count, dtype, op, root);
    if (__builtin_expect(op == BRAID_AVG, 0) &&
        braid_avg_needs_widen(coll, count, dtype, op, comm->size) &&
        (st = braid_avg_widen(call, comm, fn, coll, &sendbuf, &recvbuf, &count,
                              &dtype, &op)) != BRAID_OK)
        return st;
    /* Every field a plugin may read starts at zero, those added later
     * included: copied from a zero task (vector moves) and then set. */
    static const braid_task_t zero_task;
    size_t                    dtsize = braid_dtsize(dtype);
    braid_task_t             *t      = &call->task;
    *t                               = zero_task;
    t->struct_size                   = sizeof(*t);
    t->coll                          = coll;
    t->sendbuf                       = sendbuf;
    t->recvbuf                       = recvbuf;
    t->count                         = count;
    t->dtype                         = dtype;
    t->op                            = op;
    t->root                          = root;
    t->dtsize                        = dtsize;
    t->rank                          = comm->rank;
    t->size                          = comm->size;
    t->seq                           = comm->seq++;
    t->sig32                         = braid_sig_hash32(&sig, t->seq);
    t->topo                          = &comm->topo;
    t->svc                           = &braid_services;
    braid_progress_enter(comm->progress, t->seq, &sig);

    size_t bytes = count * dtsize;
    /* Completed locally, in order (cand stays NULL): no data, or one rank
     * with host memory.  One rank's device memory or stream still needs a
     * candidate that can copy there. */
    if ((bytes == 0 && coll != BRAID_COLL_BARRIER) ||
        (comm->size == 1 &&
         (route.mem == BRAID_MEM_HOST || coll == BRAID_COLL_BARRIER)))
        return BRAID_OK;
    t->send_mem  = route.mem;
    t->recv_mem  = route.mem;
    t->on_stream = route.on_stream;
    t->stream    = route.stream;
    /* The one-entry cache answers a repeated size; anything else asks the
     * table and online tuning (online.c), which may hand a blocking call
     * on host memory a candidate on trial. */
    braid_candidate_t *cand;
    if (!braid_select_cached(&cand, &comm->sel, coll, bytes, route.need) &&
        (st = braid_online_select(&cand, &call->trial, comm, coll, bytes,
                                  route.need, trial_ok && !route.on_stream)) !=
            BRAID_OK) {
        comm->seq--; /* nothing was issued */
        atomic_store(&comm->progress->entered, comm->seq);
        braid_avg_finish(call, comm->size, st);
        return st;
    }
    call->cand    = cand;
    t->tl         = cand->tl;
    t->comm_state = &cand->comm_state;
    t->res        = cand->res;
    t->algo       = cand->algo;
    braid_wait_note_call(comm, call, bytes);
    return BRAID_OK;
}

braid_status_t braid_call_prepare_on(braid_call_t *call, braid_comm_t *comm,
                                     const char *fn, braid_coll_t coll,
                                     const void *sendbuf, void *recvbuf,
                                     size_t count, braid_dtype_t dtype,
                                     braid_op_t op, int root, int on_stream,
                                     void *stream)
{
    return call_prepare(call, comm, fn, coll, sendbuf, recvbuf, count, dtype,
                        op, root, on_stream, stream, 0);
}

static inline __attribute__((always_inline)) braid_status_t
coll_run(braid_comm_t *comm, braid_api_t api, braid_coll_t coll,
         const void *sendbuf, void *recvbuf, size_t count, braid_dtype_t dtype,
         braid_op_t op, int root, int on_stream, void *stream)
{
    braid_call_t   call;
    braid_status_t st;
    const char    *fn = braid_coll_str(coll);
    braid_error_clear();
    if (comm == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    if ((st = braid_comm_enter(comm, api)) != BRAID_OK)
        return st;
    st = call_prepare(&call, comm, fn, coll, sendbuf, recvbuf, count, dtype,
                      op, root, on_stream, stream, !on_stream);
    if (st == BRAID_OK) {
        /* A trial's (or a watch's) time runs from here.  A call issued
         * behind pending non-blocking ones waits for them too, but it goes
         * on trial all the same: whether a request is still pending
         * differs from rank to rank, and every rank must run the same
         * candidate. */
        double t0 = call.trial != NULL ? braid_now_s() : 0;
        braid_call_enqueue(comm, &call);
        st = braid_call_wait(comm, &call);
        if (st == BRAID_OK && call.trial != NULL)
            st = braid_online_record(comm, call.trial, braid_now_s() - t0);
    }
    braid_comm_leave(comm);
    return st;
}

braid_status_t braid_coll_run(braid_comm_t *comm, braid_api_t api,
                              braid_coll_t coll, const void *sendbuf,
                              void *recvbuf, size_t count, braid_dtype_t dtype,
                              braid_op_t op, int root, int on_stream,
                              void *stream)
{
    return coll_run(comm, api, coll, sendbuf, recvbuf, count, dtype, op, root,
                    on_stream, stream);
}

BRAID_API braid_status_t braid_allreduce(const void *sendbuf, void *recvbuf,
                                         size_t count, braid_dtype_t dtype,
                                         braid_op_t op, braid_comm_t *comm)
{
    return coll_run(comm, BRAID_API_ALLREDUCE, BRAID_COLL_ALLREDUCE, sendbuf,
                    recvbuf, count, dtype, op, 0, 0, NULL);
}

BRAID_API braid_status_t braid_reduce_scatter(const void *sendbuf,
                                              void *recvbuf, size_t recvcount,
                                              braid_dtype_t dtype,
                                              braid_op_t    op,
                                              braid_comm_t *comm)
{
    return coll_run(comm, BRAID_API_REDUCE_SCATTER, BRAID_COLL_REDUCE_SCATTER,
                    sendbuf, recvbuf, recvcount, dtype, op, 0, 0, NULL);
}

BRAID_API braid_status_t braid_allgather(const void *sendbuf, void *recvbuf,
                                         size_t sendcount, braid_dtype_t dtype,
                                         braid_comm_t *comm)
{
    return coll_run(comm, BRAID_API_ALLGATHER, BRAID_COLL_ALLGATHER, sendbuf,
                    recvbuf, sendcount, dtype, BRAID_SUM, 0, 0, NULL);
}

BRAID_API braid_status_t braid_broadcast(void *buf, size_t count,
                                         braid_dtype_t dtype, int root,
                                         braid_comm_t *comm)
{
    return coll_run(comm, BRAID_API_BROADCAST, BRAID_COLL_BROADCAST, buf, buf,
                    count, dtype, BRAID_SUM, root, 0, NULL);
}

BRAID_API braid_status_t braid_barrier(braid_comm_t *comm)
{
    return coll_run(comm, BRAID_API_BARRIER, BRAID_COLL_BARRIER, NULL, NULL, 0,
                    BRAID_U8, BRAID_SUM, 0, 0, NULL);
}
