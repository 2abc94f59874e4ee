/* What lowhop reports to the core's waiting policy (braid_wait_t): which
 * peers are pinned to this rank's CPU (the core's topo->mates, from
 * braid_cpu_mates, mapped to slots by braid_lowhop_slot_mates), and that an
 * exchange says "only peers on other CPUs are missing" (BRAID_WAIT_REMOTE)
 * exactly when every such mate has delivered and something is still missing
 * (braid_lowhop_xchg_arrived, braid_lowhop_xchg_mates_in).  The flags are
 * written by hand into a plain buffer: no transport, no threads, every step
 * deterministic.  The services are the core's own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange.h"
#include "loader/loader.h"
#include "lowhop.h"

static int failures;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            failures++;                                                       \
        }                                                                     \
    } while (0)

/* slot_mates of rank me of 4 under topo, whose mates the core fills as it
 * does for a communicator of that rank (topo.c). */
static int mates(unsigned char *mate, braid_topo_t *topo, int me)
{
    static unsigned char by_rank[4];
    if (topo != NULL) {
        topo->nmates = braid_cpu_mates(topo, me, by_rank);
        topo->mates  = by_rank;
    }
    braid_task_t task;
    memset(&task, 0, sizeof(task));
    task.struct_size = sizeof(task);
    task.size        = 4;
    task.rank        = me;
    task.topo        = topo;
    task.svc         = braid_core_services();
    return braid_lowhop_slot_mates(mate, &task);
}

static void test_mates(void)
{
    unsigned char mate[8], by_rank[4];
    int           node1[4] = {0, 0, 0, 0}, node2[4] = {0, 0, 1, 1};
    int           alt[4] = {0, 1, 0, 1}, free4[4] = {-1, -1, -1, -1};
    int           one[4] = {3, 3, 3, 3};
    braid_topo_t  t;

    /* No topology (in-process tests), or no CPU list: unknown (-1). */
    CHECK(mates(mate, NULL, 0) == -1, "NULL topo");
    memset(&t, 0, sizeof(t));
    t.struct_size  = sizeof(t);
    t.size         = 4;
    t.node_of_rank = node1;
    CHECK(mates(mate, &t, 0) == -1, "no cpu list");

    /* The core's service, by rank: rank 0's mate on CPUs 0 1 0 1 is 2. */
    t.cpu_of_rank = alt;
    CHECK(braid_core_services()->cpu_mates(&t, 0, by_rank) == 1 &&
              by_rank[0] == 0 && by_rank[1] == 0 && by_rank[2] == 1 &&
              by_rank[3] == 0,
          "svc->cpu_mates: %d %d %d %d, want 0 0 1 0", by_rank[0], by_rank[1],
          by_rank[2], by_rank[3]);

    /* 4 ranks, one host, CPUs 0 1 0 1: rank 0's slots are written by ranks
     * 1, 2, 3 (slot k by rank k+1): only slot 1 (rank 2) is a mate. */
    CHECK(mates(mate, &t, 0) == 1, "alt: count");
    CHECK(mate[0] == 0 && mate[1] == 1 && mate[2] == 0,
          "alt rank 0: mates %d %d %d, want 0 1 0", mate[0], mate[1], mate[2]);
    /* Rank 3's slots: ranks 0, 1, 2: rank 1 (slot 1) is its mate. */
    CHECK(mates(mate, &t, 3) == 1, "alt rank 3: count");
    CHECK(mate[0] == 0 && mate[1] == 1 && mate[2] == 0,
          "alt rank 3: mates %d %d %d, want 0 1 0", mate[0], mate[1], mate[2]);

    /* What twoshot and allgather direct ask: has every mate's part come? */
    {
        braid_lowhop_area_t a;
        unsigned char       got1[3] = {1, 0, 1}, got2[3] = {0, 1, 0};
        memset(&a, 0, sizeof(a));
        a.mate   = mate;
        a.nmates = mates(mate, &t, 0); /* 0 1 0 */
        CHECK(braid_lowhop_mates_in(&a, got1, 4) == 0,
              "mates_in: the mate's slot is missing");
        CHECK(braid_lowhop_mates_in(&a, got2, 4) == 1,
              "mates_in: only the mate's slot is in, and that is enough");
        a.nmates = 0;
        memset(mate, 0, 3);
        CHECK(braid_lowhop_mates_in(&a, got1, 4) == 1, "mates_in: no mates");
        a.nmates = -1;
        CHECK(braid_lowhop_mates_in(&a, got2, 4) == 0,
              "mates_in: not pinned, so never only-remote");
    }

    /* Same CPU number on another host is not the same CPU. */
    t.node_of_rank = node2;
    CHECK(mates(mate, &t, 0) == 0, "two hosts");
    t.cpu_of_rank = one;
    CHECK(mates(mate, &t, 0) == 1 && mate[0] == 1,
          "two hosts, one CPU each: rank 1 only");

    /* Unpinned ranks: who shares the CPU is unknown. */
    t.node_of_rank = node1;
    t.cpu_of_rank  = free4;
    CHECK(mates(mate, &t, 2) == -1, "unpinned");
    CHECK(mate[0] == 0 && mate[1] == 0 && mate[2] == 0, "unpinned: no mates");
}

/* Rank 0 of 4 on CPUs 0 1 0 1 (mate: rank 2, slot 1) waits for a call. */
static void test_hint(void)
{
    int                 nodes[4] = {0, 0, 0, 0}, cpus[4] = {0, 1, 0, 1};
    braid_topo_t        topo = {.struct_size  = sizeof(braid_topo_t),
                                .size         = 4,
                                .kind         = BRAID_TOPO_SINGLE_HOST,
                                .nnodes       = 1,
                                .ppn          = 4,
                                .node_of_rank = nodes,
                                .cpu_of_rank  = cpus};
    braid_lowhop_area_t a;
    braid_lowhop_xchg_t x;
    braid_task_t        task;
    braid_wait_t        wait;
    unsigned char       mate[4], seen[4] = {0};
    const size_t        stride = BRAID_LOWHOP_LINE;
    uint64_t           *mem    = calloc(2 * 3, stride);

    memset(&a, 0, sizeof(a));
    memset(&x, 0, sizeof(x));
    memset(&task, 0, sizeof(task));
    a.base       = (unsigned char *)mem;
    a.nslots     = 3;
    a.stride     = stride;
    a.mate       = mate;
    a.nmates     = mates(mate, &topo, 0);
    x.area       = &a;
    x.bank       = 1;
    x.flag       = 7;
    x.seen       = seen;
    x.mates_left = a.nmates;
    task.size    = 4;
    task.rank    = 0;
    task.topo    = &topo;

    /* flag of slot k in bank b */
#define FLAG(b, k) mem[(((size_t)(b)*3 + (k)) * stride) / sizeof(uint64_t)]
#define ARRIVED()                                                             \
    (wait = BRAID_WAIT_LOCAL, braid_lowhop_xchg_arrived(&task, &x, &wait))

    CHECK(!ARRIVED() && wait == BRAID_WAIT_LOCAL,
          "nothing arrived: the mate is missing, so no remote wait");
    CHECK(!braid_lowhop_xchg_mates_in(&task, &x), "mates_in: mate missing");
    FLAG(1, 0) = 7; /* rank 1, another CPU */
    FLAG(0, 1) = 7; /* the mate, but in the other bank: not this call */
    FLAG(1, 1) = 6; /* the mate's previous flag value: not this call */
    CHECK(!ARRIVED() && wait == BRAID_WAIT_LOCAL,
          "rank 1 arrived, mate not (other bank, old flag): no remote wait");
    CHECK(!braid_lowhop_xchg_mates_in(&task, &x),
          "mates_in: other bank, old flag");
    FLAG(1, 1) = 7;
    CHECK(braid_lowhop_xchg_mates_in(&task, &x),
          "mates_in: the mate posted first (start reports REMOTE)");
    CHECK(!ARRIVED() && wait == BRAID_WAIT_REMOTE,
          "the mate arrived, rank 3 not: remote wait");
    CHECK(x.mates_left == 0 && x.nseen == 2,
          "counters: mates_left %d, "
          "nseen %d",
          x.mates_left, x.nseen);
    CHECK(!ARRIVED() && wait == BRAID_WAIT_REMOTE,
          "still waiting for rank 3 alone: remote wait again");
    FLAG(1, 2) = 7;
    CHECK(ARRIVED() == 1 && wait == BRAID_WAIT_LOCAL,
          "all arrived: done, and no report");

    /* The same rank unpinned: waiting never says "only remote". */
    int free4[4]     = {-1, -1, -1, -1};
    topo.cpu_of_rank = free4;
    a.nmates         = mates(mate, &topo, 0);
    memset(seen, 0, sizeof(seen));
    memset(mem, 0, 2 * 3 * stride);
    x.nseen      = 0;
    x.mates_left = a.nmates;
    FLAG(1, 0)   = 7;
    FLAG(1, 1)   = 7;
    CHECK(!ARRIVED() && wait == BRAID_WAIT_LOCAL,
          "unpinned, one peer missing: no remote report");
    CHECK(!braid_lowhop_xchg_mates_in(&task, &x),
          "unpinned: mates never known to be in");
#undef ARRIVED
#undef FLAG
    free(mem);
}

int main(void)
{
    test_mates();
    test_hint();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("lowhop wait report: all checks passed\n");
    return 0;
}
