/* The thread model: a communicator is used by one thread at a time.
 *
 * Any thread may call braid, and different communicators run in parallel,
 * but every call that works on a communicator first takes it: an atomic
 * word holds the thread inside (its id) and what it called.  A second
 * thread that finds it taken is refused with BRAID_ERR_STATE naming both
 * callers, and nothing is done; braid_test answers "not done yet" and
 * braid_wait waits for the communicator instead (see braid.h, Threads).
 *
 * Why refuse rather than queue the second thread behind a lock: calls on
 * one communicator must come in the same order on every rank, and two
 * threads racing for it cannot keep that order -- serialising them would
 * turn the race into calls paired with the wrong calls of the peers,
 * silently.  Refusing makes the race loud, and costs one compare-and-swap
 * and one store per call. */
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "comm/comm.h"
#include "util/env.h"
#include "util/log.h"

static const char *const api_names[BRAID_API_COUNT] = {
    [BRAID_API_ALLREDUCE]      = "braid_allreduce",
    [BRAID_API_REDUCE_SCATTER] = "braid_reduce_scatter",
    [BRAID_API_ALLGATHER]      = "braid_allgather",
    [BRAID_API_BROADCAST]      = "braid_broadcast",
    [BRAID_API_BARRIER]        = "braid_barrier",
    [BRAID_API_IALLREDUCE]     = "braid_iallreduce",
    [BRAID_API_TEST]           = "braid_test",
    [BRAID_API_WAIT]           = "braid_wait",
    [BRAID_API_SPLIT]          = "braid_comm_split",
    [BRAID_API_FINALIZE]       = "braid_finalize",
};

_Thread_local uint32_t braid_self_tid
    __attribute__((tls_model("initial-exec")));

uint32_t braid_thread_id_slow(void)
{
    return braid_self_tid = (uint32_t)syscall(SYS_gettid);
}

static uint32_t thread_id(void) { return braid_thread_id(); }

const char *braid_api_name(braid_api_t fn)
{
    return (unsigned)fn < BRAID_API_COUNT ? api_names[fn] : "braid";
}

static uint64_t word_of(uint32_t tid, braid_api_t fn)
{
    return (uint64_t)tid << 8 | (uint64_t)fn;
}

braid_status_t braid_comm_refuse(braid_api_t fn, uint64_t owner, uint32_t me)
{
    uint32_t    tid   = (uint32_t)(owner >> 8);
    const char *there = braid_api_name((braid_api_t)(owner & 0xff));
    if (tid == me)
        return braid_error(BRAID_ERR_STATE,
                           "%s: refused: thread %u is "
                           "already inside %s on this communicator (a signal "
                           "handler or callback called braid again)",
                           braid_api_name(fn), (unsigned)me, there);
    return braid_error(BRAID_ERR_STATE,
                       "%s: refused: thread %u called it "
                       "while thread %u is inside %s on this communicator; "
                       "a communicator is used by one thread at a time "
                       "(braid.h, Threads)",
                       braid_api_name(fn), (unsigned)me, (unsigned)tid, there);
}

int braid_comm_try_enter(braid_comm_t *comm, braid_api_t fn)
{
    uint64_t cur = 0;
    return atomic_compare_exchange_strong_explicit(
        &comm->inside, &cur, word_of(thread_id(), fn), memory_order_acquire,
        memory_order_relaxed);
}

braid_status_t braid_comm_enter_wait(braid_comm_t *comm, braid_api_t fn)
{
    uint32_t me       = thread_id();
    double   deadline = 0;
    for (;;) {
        uint64_t cur = 0;
        if (atomic_compare_exchange_strong_explicit(
                &comm->inside, &cur, word_of(me, fn), memory_order_acquire,
                memory_order_relaxed))
            return BRAID_OK;
        /* Waiting for ourselves would never end. */
        if ((uint32_t)(cur >> 8) == me)
            return braid_comm_refuse(fn, cur, me);
        double now = braid_now_s();
        if (deadline == 0)
            deadline = now + comm->timeout_s;
        else if (now > deadline)
            return braid_error(BRAID_ERR_STATE,
                               "%s: thread %u waited "
                               "BRAID_TIMEOUT=%.1f s for thread %u to leave "
                               "%s on this communicator",
                               braid_api_name(fn), (unsigned)me,
                               comm->timeout_s, (unsigned)(cur >> 8),
                               braid_api_name((braid_api_t)(cur & 0xff)));
        sched_yield();
    }
}
