/* The waiting policy's decisions that do not need a clock: which calls are
 * streams, and which lone calls yield once after start (wait.c). */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "comm/comm.h"

int main(void)
{
    static braid_comm_t comm;
    static braid_call_t a, b;
    braid_candidate_t   c1, c2;

    memset(&comm, 0, sizeof(comm));
    a.cand      = &c1;
    a.task.coll = BRAID_COLL_ALLREDUCE;
    b           = a;

    /* Streams: the same candidate, collective and size as the call before. */
    braid_wait_note_call(&comm, &a, 8);
    CHECK(!a.stream, "the first call is not a stream");
    braid_wait_note_call(&comm, &b, 8);
    CHECK(b.stream, "the same call again is a stream");
    braid_wait_note_call(&comm, &b, 16);
    CHECK(!b.stream, "another size is not");
    b.cand = &c2;
    braid_wait_note_call(&comm, &b, 16);
    CHECK(!b.stream, "another candidate is not");

    /* Yield once after start: oversubscribed, CPU mates, a lone call, and
     * start() said the mates have delivered (BRAID_WAIT_REMOTE). */
    comm.oversubscribed = 1;
    comm.topo.nmates    = 1;
    a.stream            = 0;
    a.wait              = BRAID_WAIT_REMOTE;
    CHECK(braid_wait_after_start(&comm, &a), "lone call, mates first: yield");
    a.stream = 1;
    CHECK(!braid_wait_after_start(&comm, &a), "a stream never yields first");
    a.stream = 0;
    a.wait   = BRAID_WAIT_LOCAL;
    CHECK(!braid_wait_after_start(&comm, &a), "mates still to come: no");
    a.wait           = BRAID_WAIT_REMOTE;
    comm.topo.nmates = 0;
    CHECK(!braid_wait_after_start(&comm, &a), "no mates: nobody to yield to");
    comm.topo.nmates = -1;
    CHECK(!braid_wait_after_start(&comm, &a), "not pinned: unknown, no");
    comm.topo.nmates    = 1;
    comm.oversubscribed = 0;
    CHECK(!braid_wait_after_start(&comm, &a), "a core each: no");
    return check_summary("test_wait");
}
