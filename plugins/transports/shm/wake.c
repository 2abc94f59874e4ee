/* The transport's wait hook: sleeping instead of spinning, for send/receive
 * on an oversubscribed host.  When to sleep is the core's decision (its
 * waiting policy calls wait() after BRAID_SLEEP_POLLS polls in a row that
 * waited on requests only; 0, the default, never); this file is how.
 *
 * With more ranks than cores, a rank that waits for a message holds a core
 * its sender may need.  The core's wait loop already calls sched_yield after
 * each poll there, but every waiter keeps coming back to poll.  In wait() a
 * rank sleeps on a futex in its fifo segment (its doorbell) until a peer
 * gives it work: a cell in one of its rings, or room in a ring it is
 * sending into.  Waiters then leave the run queue, and the core goes to
 * whoever can use it.  Why the core leaves it off by default:
 * docs/performance.md.
 *
 * Lost-wakeup freedom: the sleeper announces itself on `sleeping`, then
 * re-checks its rings; the waker publishes its cells, then looks at
 * `sleeping`.  Both sides do so with a read-modify-write of `sleeping`
 * (acq_rel), not a plain store/load behind a fence: RMWs of one word are
 * totally ordered and each reads the one before it, so whichever comes
 * second either sees the sleeper's 1 (the waker rings) or synchronises with
 * the waker's release (the sleeper's re-check sees its cells).  That
 * argument holds in the C11 model itself, not just on x86, and it is one
 * ThreadSanitizer can follow: TSan does not model standalone fences (gcc
 * rejects __atomic_thread_fence under -fsanitize=thread), and on x86 an
 * RMW costs what an SC fence would: one locked instruction.  The sleep is
 * also bounded, so a wake-up that never comes (a peer that waits on
 * something else for long) costs time, not a hang.
 * Senders ring only while the core may sleep (wake_ok): BRAID_SLEEP_POLLS
 * is the same on every rank, so nobody sleeps on wake-ups its peers do not
 * send.
 *
 * put_signal never sleeps its target: the target polls its own memory (the
 * algorithm's loop), and the put costs no more than a copy and a store. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

static long futex(uint32_t *addr, int op, uint32_t val,
                  const struct timespec *timeout)
{
    /* Not FUTEX_PRIVATE: the word is in memory shared between processes. */
    return syscall(SYS_futex, addr, op, val, timeout, NULL, 0);
}

void braid_shm_wake_peer(braid_shm_comm_t *comm, int peer)
{
    braid_shm_hdr_t *h = comm->fifo.base[peer];

    /* Adding 0 changes nothing but makes this read an RMW (see the top). */
    if (__atomic_fetch_add(&h->sleeping, 0, __ATOMIC_ACQ_REL)) {
        __atomic_fetch_add(&h->doorbell, 1, __ATOMIC_SEQ_CST);
        futex(&h->doorbell, FUTEX_WAKE, INT_MAX, NULL);
        comm->n_wakes++;
    }
}

/* Whether a poll would move anything now. */
static int work_ready(braid_shm_comm_t *comm)
{
    for (int p = 0; p < comm->size; p++) {
        braid_shm_out_t *out = &comm->out[p];

        if (braid_shm_ring_peek(&comm->in[p]) != NULL) {
            return 1;
        }
        if (out->head != NULL &&
            __atomic_load_n(&out->ring->tail, __ATOMIC_ACQUIRE) !=
                out->tail_seen) {
            return 1;
        }
    }
    return 0;
}

void braid_shm_wait(void *tcomm, double max_s)
{
    braid_shm_comm_t *comm = tcomm;
    braid_shm_hdr_t  *h    = comm->hdr;
    long              ns   = max_s > 0 ? (long)(max_s * 1e9) : 0;
    struct timespec   ts   = {ns / 1000000000L, ns % 1000000000L};
    uint32_t          bell;

    if (!comm->wake_ok || ns == 0) {
        return; /* nobody would ring */
    }
    __atomic_exchange_n(&h->sleeping, 1, __ATOMIC_ACQ_REL);
    bell = __atomic_load_n(&h->doorbell, __ATOMIC_SEQ_CST);
    if (!work_ready(comm)) {
        comm->n_sleeps++;
        if (futex(&h->doorbell, FUTEX_WAIT, bell, &ts) != 0 &&
            errno == ETIMEDOUT) {
            comm->n_sleep_timeouts++;
        }
    }
    __atomic_store_n(&h->sleeping, 0, __ATOMIC_RELAXED);
}
