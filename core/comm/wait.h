/* The waiting policy, part one: the decisions taken on every call, inline
 * because they run on the small-call path (a decode step's all-reduce is a
 * few hundred instructions).  Part two, wait.c, has the wait loop, the
 * sleep, the clock and the overview of all the rules.  Included by comm.h
 * after the types it needs. */
#ifndef BRAID_CORE_WAIT_H
#define BRAID_CORE_WAIT_H

/* A running call looks at the clock (for its timeout and the failure
 * detector) once every this many polls, not on every one: a small call
 * completes in one or two polls, and clock reads are a visible part of an
 * 8-byte all-reduce on an oversubscribed host.  64 polls take well under a
 * millisecond even when every poll yields, so the timeout starts that much
 * late at most. */
#define BRAID_CLOCK_POLLS 64u /* a power of two */

/* Sets call->stream -- the same candidate, collective and size as the call
 * before it on this communicator, as in a decode loop -- and remembers the
 * call for the next one. */
static inline void braid_wait_note_call(braid_comm_t *comm, braid_call_t *call,
                                        size_t bytes)
{
    call->stream = comm->last_cand == call->cand &&
                   comm->last_coll == call->task.coll &&
                   comm->last_bytes == bytes;
    comm->last_cand  = call->cand;
    comm->last_coll  = call->task.coll;
    comm->last_bytes = bytes;
}

/* Whether a call that just started lets the CPU go before its first
 * progress: a lone call (not a stream) on a host with more ranks than cores
 * whose start() reported BRAID_WAIT_REMOTE -- every rank sharing this CPU
 * delivered before this rank even started, so they entered first and now
 * wait only for what this rank just posted: they finish first. */
static inline int braid_wait_after_start(const braid_comm_t *comm,
                                         const braid_call_t *call)
{
    return comm->oversubscribed && comm->topo.nmates > 0 && !call->stream &&
           call->wait == BRAID_WAIT_REMOTE;
}

/* wait.c: the clock of a running call, every BRAID_CLOCK_POLLS polls. */
braid_status_t braid_wait_clock(braid_comm_t *comm, braid_call_t *call);

/* After a progress that left the head call running: BRAID_INPROGRESS while
 * it may go on, else the call's error (the call is then completed: a dead
 * peer, or BRAID_TIMEOUT). */
static inline braid_status_t braid_wait_check(braid_comm_t *comm,
                                              braid_call_t *call)
{
    if ((++call->polls & (BRAID_CLOCK_POLLS - 1)) != 0)
        return BRAID_INPROGRESS;
    return braid_wait_clock(comm, call);
}

/* wait.c: polls the communicator until call is done, deciding after every
 * poll whether to poll again, yield or sleep. */
braid_status_t braid_call_wait(braid_comm_t *comm, braid_call_t *call);

#endif
