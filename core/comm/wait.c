/* The waiting policy: how a rank waits for its calls, all of it here and in
 * wait.h (the per-call decisions, inline).  Algorithms only report what a
 * call waits for (braid_wait_t, from start and progress); the core decides
 * here whether to poll again at once, yield the CPU or sleep, and it alone
 * bounds every call by BRAID_TIMEOUT and watches the failure detector.
 * docs/architecture.md ("Waiting") explains the rules; docs/performance.md has
 * what they were measured to give.
 *
 *   every rank has a core    spin, pausing, for BRAID_SPIN_BUDGET_S; then
 *                            as below
 *   more ranks than cores    yield after every poll (the rank waited for may
 *                            need this very CPU), except:
 *     - a stream call (the same collective, size and candidate as the call
 *       before it) reporting BRAID_WAIT_REMOTE polls again, up to
 *       BRAID_REMOTE_SPIN_POLLS times in a wait: yielding would hand the
 *       CPU to a rank that has nothing to do, and polling lets this rank
 *       finish the call and post the next in the same turn;
 *     - a lone call (not a stream) whose start() reported
 *       BRAID_WAIT_REMOTE while this rank has CPU mates yields once before
 *       its first progress (wait.h, braid_wait_after_start);
 *     - after BRAID_SLEEP_POLLS polls in a row reporting BRAID_WAIT_PEER
 *       (0: never), the rank sleeps in the transport's wait hook, at most
 *       BRAID_SLEEP_MAX_S. */
#include <sched.h>
#include <stdio.h>

#include "comm/comm.h"
#include "util/env.h"
#include "util/log.h"

#define BRAID_HEALTH_PERIOD_S 0.005
/* Spinning is fastest while a waiting rank owns its core; once the wait has
 * lasted longer than a hand-off between ranks would take, the peer it waits
 * for is probably runnable on this very core (oversubscribed host, or other
 * load), and yielding after every poll lets it run. */
#define BRAID_SPIN_BUDGET_S 20e-6
/* Polls a rank may spend waiting for ranks on other CPUs
 * (BRAID_WAIT_REMOTE) before it yields anyway: longer than a hand-off
 * between two ranks of another CPU takes. */
#define BRAID_REMOTE_SPIN_POLLS 128u
/* The longest sleep in a transport's wait hook: a safety net, wake-ups are
 * the transport's business. */
#define BRAID_SLEEP_MAX_S 1e-3

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

braid_status_t braid_wait_clock(braid_comm_t *comm, braid_call_t *call)
{
    double now = braid_now_s();
    if (call->t_start == 0)
        call->t_start = now;
    /* A dead peer shows up on the bootstrap channel long before the
     * timeout; look every few milliseconds, not on every poll. */
    if (now - comm->last_health >= BRAID_HEALTH_PERIOD_S) {
        comm->last_health = now;
        braid_status_t st = braid_bootstrap_health(comm->bs);
        if (st != BRAID_OK)
            return braid_call_failed(comm, call, st, 0);
    }
    if (now - call->t_start <= comm->timeout_s)
        return BRAID_INPROGRESS;
    /* The failure inquiry (inquiry.c) finds out which rank is behind or
     * silent and what each has entered; the message says what it found. */
    braid_error(BRAID_ERR_TIMEOUT, "no progress within BRAID_TIMEOUT=%.1f s",
                comm->timeout_s);
    return braid_call_failed(comm, call, BRAID_ERR_TIMEOUT, 1);
}

/* State of one braid_call_wait. */
typedef struct waiter {
    unsigned polls;    /* spinning polls, to look at the clock now and then */
    unsigned spins;    /* polls spent on BRAID_WAIT_REMOTE */
    unsigned idle;     /* BRAID_WAIT_PEER polls in a row */
    int      yielding; /* past the spin budget, or oversubscribed */
    double   t0;
} waiter_t;

/* Sleeps in the head call's transport when the policy says so; returns
 * whether it did. */
static int maybe_sleep(braid_comm_t *comm, const braid_call_t *head,
                       waiter_t *w)
{
    if (head->wait != BRAID_WAIT_PEER) {
        w->idle = 0;
        return 0;
    }
    if (comm->sleep_polls == 0 || !comm->oversubscribed ||
        ++w->idle < comm->sleep_polls)
        return 0;
    w->idle              = 0;
    const braid_tl_t *tl = head->task.tl;
    if (tl == NULL || tl->ops->wait == NULL)
        return 0;
    tl->ops->wait(tl->tcomm, BRAID_SLEEP_MAX_S < comm->timeout_s
                                 ? BRAID_SLEEP_MAX_S
                                 : comm->timeout_s);
    return 1;
}

/* One decision after a poll that left the head call running. */
static void wait_once(braid_comm_t *comm, waiter_t *w)
{
    const braid_call_t *head = comm->head;
    if (!w->yielding) {
        if ((++w->polls & 63) == 0) {
            double now = braid_now_s();
            if (w->t0 == 0)
                w->t0 = now;
            else if (now - w->t0 > BRAID_SPIN_BUDGET_S)
                w->yielding = 1;
        }
        return;
    }
    if (head == NULL)
        return;
    if (head->stream && head->wait == BRAID_WAIT_REMOTE &&
        w->spins < BRAID_REMOTE_SPIN_POLLS) {
        w->spins++;
        cpu_relax();
        return;
    }
    if (!maybe_sleep(comm, head, w))
        sched_yield();
}

braid_status_t braid_call_wait(braid_comm_t *comm, braid_call_t *call)
{
    waiter_t w = {.yielding = comm->oversubscribed};
    while (!call->done) {
        braid_comm_progress(comm);
        if (call->done)
            break;
        wait_once(comm, &w);
    }
    if (call->status != BRAID_OK)
        return braid_error(call->status, "%s", call->error);
    return BRAID_OK;
}
