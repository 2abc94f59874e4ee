/* Unit tests of online tuning's pure parts (comm/online.c): which candidate
 * each trial call runs, which calls are timed, the medians, the decision,
 * the rivals of the cost model's pick and of a tuning file's, and the
 * environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "comm/online.h"

static void test_turns(void)
{
    /* Three candidates: A A B B C C A A ...; the second call of a turn is
     * timed, in the round of its turn. */
    int counts[BRAID_ONLINE_MAX_CANDS]     = {0},
        timed[BRAID_ONLINE_MAX_CANDS]      = {0};
    int last_round[BRAID_ONLINE_MAX_CANDS];
    for (int k = 0; k < BRAID_ONLINE_MAX_CANDS; k++)
        last_round[k] = -1;
    for (int c = 0; c < BRAID_ONLINE_CALLS(3, BRAID_ONLINE_ROUNDS); c++) {
        int round, k = braid_online_turn(&round, c, 3);
        CHECK(k == (c / 2) % 3, "call %d runs candidate %d", c, k);
        counts[k]++;
        CHECK((round >= 0) == (c % 2 == 1), "call %d timed: round %d", c,
              round);
        if (round >= 0) {
            CHECK(round == last_round[k] + 1 && round < BRAID_ONLINE_ROUNDS,
                  "candidate %d timed in round %d after %d", k, round,
                  last_round[k]);
            last_round[k] = round;
            timed[k]++;
        }
    }
    for (int k = 0; k < 3; k++)
        CHECK(counts[k] == 2 * BRAID_ONLINE_ROUNDS &&
                  timed[k] == BRAID_ONLINE_ROUNDS &&
                  last_round[k] == BRAID_ONLINE_ROUNDS - 1,
              "candidate %d: %d calls, %d timed", k, counts[k], timed[k]);
}

static void test_mine(void)
{
    braid_online_slot_t s;
    memset(&s, 0, sizeof(s));
    /* The warm-up rounds are huge and must not count. */
    s.rounds = BRAID_ONLINE_ROUNDS;
    s.warm   = BRAID_ONLINE_WARM;
    for (int r = 0; r < BRAID_ONLINE_ROUNDS; r++)
        s.us[1][r] = r < BRAID_ONLINE_WARM ? 1e6 : 10.0 + r;
    double m  = braid_online_mine(&s, 1);
    double lo = 10.0 + BRAID_ONLINE_WARM, hi = 10.0 + BRAID_ONLINE_ROUNDS - 1;
    double mid = (lo + hi) / 2;
    CHECK(m == mid, "median of the timed rounds %.2f, want %.2f", m, mid);
    CHECK(s.us[1][BRAID_ONLINE_WARM] == lo, "the slot is left as it was");
    /* A large class's shorter trial: its timed rounds alone, two of them
     * stalled (the median of five holds). */
    s.rounds = BRAID_ONLINE_ROUNDS_LARGE;
    s.warm   = BRAID_ONLINE_WARM_LARGE;
    CHECK(BRAID_ONLINE_ROUNDS_LARGE - BRAID_ONLINE_WARM_LARGE == 5 &&
              BRAID_ONLINE_ROUNDS_LARGE < BRAID_ONLINE_ROUNDS,
          "a large class times 5 rounds, fewer than a small one");
    double large[] = {1e6, 30, 10, 20, 900, 800, 1e6};
    memcpy(s.us[2], large, sizeof(large)); /* [6]: never read */
    m = braid_online_mine(&s, 2);
    CHECK(m == 30, "median of a large class's 5 timed rounds %.2f", m);
}

static void test_rounds(void)
{
    /* Below 64 KiB a trial times more turns than up to 1 MiB, and from
     * 1 MiB fewer; each class's turns fit a slot (that a small trial of
     * the most candidates stays under 200 calls, online.h asserts). */
    struct {
        size_t bytes;
        int    rounds, warm;
    } want[] = {
        {8, BRAID_ONLINE_ROUNDS_SMALL, BRAID_ONLINE_WARM_SMALL},
        {8192, BRAID_ONLINE_ROUNDS_SMALL, BRAID_ONLINE_WARM_SMALL},
        {BRAID_ONLINE_SMALL - 1, BRAID_ONLINE_ROUNDS_SMALL,
         BRAID_ONLINE_WARM_SMALL},
        {BRAID_ONLINE_SMALL, BRAID_ONLINE_ROUNDS, BRAID_ONLINE_WARM},
        {BRAID_ONLINE_LARGE - 1, BRAID_ONLINE_ROUNDS, BRAID_ONLINE_WARM},
        {BRAID_ONLINE_LARGE, BRAID_ONLINE_ROUNDS_LARGE,
         BRAID_ONLINE_WARM_LARGE},
        {(size_t)256 << 20, BRAID_ONLINE_ROUNDS_LARGE,
         BRAID_ONLINE_WARM_LARGE},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        int warm = -1, rounds = braid_online_rounds(&warm, want[i].bytes);
        CHECK(rounds == want[i].rounds && warm == want[i].warm,
              "%zu B: %d turns, %d warm (want %d, %d)", want[i].bytes, rounds,
              warm, want[i].rounds, want[i].warm);
        CHECK(rounds <= BRAID_ONLINE_ROUNDS_MAX && rounds - warm >= 5,
              "%zu B: %d turns fit a slot, %d timed", want[i].bytes, rounds,
              rounds - warm);
    }
    CHECK(BRAID_ONLINE_ROUNDS_SMALL - BRAID_ONLINE_WARM_SMALL >
              2 * (BRAID_ONLINE_ROUNDS - BRAID_ONLINE_WARM),
          "a small class times more than twice the calls of a mid one");
    /* The median of a small class's 14 timed calls, 6 of them stalled,
     * is an unstalled one. */
    braid_online_slot_t s;
    memset(&s, 0, sizeof(s));
    s.rounds = braid_online_rounds(&s.warm, 8192);
    for (int r = 0; r < s.rounds; r++)
        s.us[0][r] = r < s.warm              ? 1e6
                     : r % 2 == 1 && r < 15 ? 50.0
                                            : 10.0 + r * 0.01;
    double m = braid_online_mine(&s, 0);
    CHECK(m < 11.0, "median of 14 calls, 6 of them stalled: %.2f", m);
}

static void test_decide(void)
{
    braid_why_t file = BRAID_WHY_TUNE, model = BRAID_WHY_COST;
    double      a[] = {10.0, 10.4, 12.0};
    CHECK(braid_online_decide(a, 3, file) == 0,
          "a tuning file's pick stays within the margin");
    double b[] = {10.0, 9.0, 9.4};
    CHECK(braid_online_decide(b, 3, file) == 1, "a rival 10%% faster wins");
    double c[] = {10.0, 8.0, 8.0};
    CHECK(braid_online_decide(c, 3, file) == 1, "ties go to the lower index");
    double d[] = {10.0};
    CHECK(braid_online_decide(d, 1, file) == 0, "one candidate");
    double e[] = {10.0, 9.6};
    CHECK(braid_online_decide(e, 2, file) == 0,
          "a rival 4%% faster does not replace the file's pick");
    CHECK(braid_online_decide(e, 2, model) == 1,
          "a rival 4%% faster replaces the model's pick (no margin)");
    double f[] = {10.0, 10.0};
    CHECK(braid_online_decide(f, 2, model) == 0,
          "the model's pick keeps a tie");
}

static double est_linear(const braid_algo_t *self, const braid_cost_in_t *in)
{
    /* The name's first digit scales the estimate: "a1" 1x, "a3" 3x. */
    return (self->name[1] - '0') * (1.0 + in->bytes * 0.01);
}

static double est_never(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self, (void)in;
    return -1.0;
}

/* A selector over cands on one host of nranks ranks, no override, an
 * empty tuning file. */
static void selector(braid_selector_t *sel, braid_candidate_t *cands, int n,
                     braid_algo_spec_t *none, braid_tune_t *tune, int nranks)
{
    braid_algo_spec_parse(none, NULL);
    *sel = (braid_selector_t){.ncands   = n,
                              .cands    = cands,
                              .override = none,
                              .tune     = tune,
                              .nranks   = nranks,
                              .nnodes   = 1,
                              .ppn      = nranks};
    braid_selector_init(sel);
}

static void test_rivals(void)
{
    braid_transport_t shm = {.name = "shm"};
    braid_tl_t        tl  = {.ops = &shm};
    const uint32_t    ro  = BRAID_ALGO_RANK_ORDER;
    braid_algo_t      a1 = {.name = "a1", .flags = ro, .estimate = est_linear};
    braid_algo_t      a2 = {.name = "a2", .flags = ro, .estimate = est_linear};
    braid_algo_t      a3 = {.name = "a3", .flags = ro, .estimate = est_linear};
    braid_algo_t      a5 = {.name = "a5", .flags = ro, .estimate = est_linear};
    braid_algo_t no = {.name = "a1no", .flags = ro, .estimate = est_never};
    braid_algo_t a4 = {.name = "a4", .estimate = est_linear};
    a1.coll = a2.coll = a3.coll = a5.coll = no.coll = BRAID_COLL_ALLREDUCE;
    a4.coll                                         = BRAID_COLL_ALLGATHER;
    const uint32_t host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    const uint32_t dev  = BRAID_MEM_BIT(BRAID_MEM_CUDA);
    /* Name order, as the selector keeps them; a2 takes device memory only. */
    braid_candidate_t cands[] = {
        {"a1@shm", &a1, &tl, "shm", host, NULL, NULL},
        {"a1no@shm", &no, &tl, "shm", host, NULL, NULL},
        {"a2@shm", &a2, &tl, "shm", dev, NULL, NULL},
        {"a3@shm", &a3, &tl, "shm", host, NULL, NULL},
        {"a4@shm", &a4, &tl, "shm", host, NULL, NULL},
        {"a5@shm", &a5, &tl, "shm", host, NULL, NULL},
    };
    braid_algo_spec_t none;
    braid_tune_t      tune = {0};
    braid_selector_t  sel;
    selector(&sel, cands, 6, &none, &tune, 4);
    int idx[BRAID_ONLINE_MAX_CANDS] = {0};
    int n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64,
                                host, 2.0);
    CHECK(n == 1, "nothing within 2x of a1 (a3 is 3x): %d", n);
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            5.0);
    CHECK(n == 3 && idx[0] == 0 && idx[1] == 3 && idx[2] == 5,
          "within 5x: a1, then a3 and a5 cheapest first; not a1no (cannot "
          "run), a2 (device memory), a4 (allgather): n %d [%d %d %d]",
          n, idx[0], idx[1], idx[2]);
    idx[0] = 5; /* the pick need not be the cheapest (a tuning file's) */
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            1.0);
    CHECK(n == 3 && idx[0] == 5 && idx[1] == 0 && idx[2] == 3,
          "rivals of a5 within 1x: a1 and a3, cheapest first: n %d", n);
    /* A reduction that does not fold in rank order is neither a rival
     * nor a pick with rivals; an allgather needs no such promise. */
    a3.flags = 0;
    idx[0]   = 0;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            5.0);
    CHECK(n == 2 && idx[1] == 5, "a3 without the flag is no rival: n %d", n);
    idx[0] = 3;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            5.0);
    CHECK(n == 1, "a3 without the flag has no rivals: n %d", n);
    /* One that combines through the core's kernels stands in for the
     * rank-order ones on two ranks only, where its result is x0 op x1 or
     * x1 op x0, the same bits. */
    a3.flags = BRAID_ALGO_CORE_REDUCE;
    idx[0]   = 0;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            5.0);
    CHECK(n == 2 && idx[1] == 5, "core-reduce a3 on 4 ranks is no rival: %d",
          n);
    sel.nranks = 3;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            5.0);
    CHECK(n == 2 && idx[1] == 5, "core-reduce a3 on 3 ranks is no rival: %d",
          n);
    sel.nranks = 2;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            5.0);
    CHECK(n == 3 && idx[1] == 3 && idx[2] == 5,
          "core-reduce a3 on 2 ranks is a rival: n %d [%d %d]", n, idx[1],
          idx[2]);
    idx[0] = 3;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            5.0);
    CHECK(n == 3 && idx[1] == 0 && idx[2] == 5,
          "core-reduce a3 on 2 ranks has rivals: n %d", n);
    sel.nranks      = 4;
    a3.flags        = ro;
    braid_algo_t g1 = {
        .name = "a1", .coll = BRAID_COLL_ALLGATHER, .estimate = est_linear};
    braid_candidate_t gathers[] = {
        {"a1@shm", &g1, &tl, "shm", host, NULL, NULL},
        {"a4@shm", &a4, &tl, "shm", host, NULL, NULL},
    };
    sel.ncands = 2;
    sel.cands  = gathers;
    braid_selector_init(&sel);
    idx[0] = 0;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLGATHER, 64, host,
                            5.0);
    CHECK(n == 2 && idx[1] == 1, "allgathers without the flag: n %d", n);
    /* A full list keeps the cheapest: twelve candidates, every other one
     * at 1x (a1) and 3x (a3) -- six places below BRAID_ONLINE_LARGE, four
     * from it. */
    braid_candidate_t many[12];
    for (int i = 0; i < 12; i++)
        many[i] = (braid_candidate_t){
            "m@shm", i % 2 ? &a1 : &a3, &tl, "shm", host, NULL, NULL};
    sel.ncands = 12;
    sel.cands  = many;
    braid_selector_init(&sel);
    idx[0] = 1;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE, 64, host,
                            3.0);
    CHECK(n == 6 && BRAID_ONLINE_MAX_CANDS == 6 && idx[0] == 1 &&
              idx[1] == 3 && idx[2] == 5 && idx[3] == 7 && idx[4] == 9 &&
              idx[5] == 11,
          "a full list of a small call holds six, the cheapest (a1s, not "
          "a3s): n %d: %d %d %d %d %d %d",
          n, idx[0], idx[1], idx[2], idx[3], idx[4], idx[5]);
    idx[0] = 1;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLREDUCE,
                            BRAID_ONLINE_LARGE, host, 3.0);
    CHECK(n == BRAID_ONLINE_MAX_CANDS_LARGE && n == 4 && idx[0] == 1 &&
              idx[1] == 3 && idx[2] == 5 && idx[3] == 7,
          "a full list of a large call holds four: n %d: %d %d %d %d", n,
          idx[0], idx[1], idx[2], idx[3]);
}

/* A tuning-file row's pick has as rivals what the row measured within the
 * factor of the pick's time, fastest first, among those that can run the
 * call; the model's estimates play no part. */
static void test_table_rivals(void)
{
    braid_transport_t shm = {.name = "shm"};
    braid_tl_t        tl  = {.ops = &shm};
    braid_algo_t      g[5];
    const char       *names[5] = {"a1", "a1no", "a2", "a3", "a5"};
    for (int i = 0; i < 5; i++)
        g[i] = (braid_algo_t){.name     = names[i],
                              .coll     = BRAID_COLL_ALLGATHER,
                              .estimate = i == 1 ? est_never : est_linear};
    const uint32_t    host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    braid_candidate_t cands[5] = {
        {"a1@shm", &g[0], &tl, "shm", host, NULL, NULL},
        {"a1no@shm", &g[1], &tl, "shm", host, NULL, NULL},
        {"a2@shm", &g[2], &tl, "shm", host, NULL, NULL},
        {"a3@shm", &g[3], &tl, "shm", host, NULL, NULL},
        {"a5@shm", &g[4], &tl, "shm", host, NULL, NULL},
    };
    braid_algo_spec_t none;
    braid_tune_t      tune = {0};
    braid_selector_t  sel;
    selector(&sel, cands, 5, &none, &tune, 2);
    /* The row picked a5 (measured 40 us); a3 took 60, a1no 10 (it cannot
     * run this call), a1 300; a2 was not measured. */
    braid_tune_row_t row     = {.coll = BRAID_COLL_ALLGATHER, .nmeas = 4};
    const char      *algo[4] = {"a5", "a3", "a1no", "a1"};
    const double     us[4]   = {40.0, 60.0, 10.0, 300.0};
    for (int i = 0; i < 4; i++) {
        snprintf(row.meas[i].cand.algo, sizeof(row.meas[i].cand.algo), "%s",
                 algo[i]);
        snprintf(row.meas[i].cand.tl, sizeof(row.meas[i].cand.tl), "shm");
        row.meas[i].us = us[i];
    }
    int idx[BRAID_ONLINE_MAX_CANDS] = {4};
    int n = braid_online_rivals(idx, &sel, &row, BRAID_COLL_ALLGATHER, 64,
                                host, 5.0);
    CHECK(n == 2 && idx[0] == 4 && idx[1] == 3,
          "within 5x of a5's 40 us: a3 (60 us); not a1 (300 us, though the "
          "model ranks it first), a1no (cannot run), a2 (not measured): n %d",
          n);
    n = braid_online_rivals(idx, &sel, &row, BRAID_COLL_ALLGATHER, 64, host,
                            10.0);
    CHECK(n == 3 && idx[1] == 3 && idx[2] == 0,
          "within 10x: a3 then a1, fastest first: n %d [%d %d]", n, idx[1],
          idx[2]);
    idx[0] = 2; /* a pick the row has no time for: no rivals */
    n = braid_online_rivals(idx, &sel, &row, BRAID_COLL_ALLGATHER, 64, host,
                            10.0);
    CHECK(n == 1, "a pick the row did not measure has no rivals: n %d", n);
}

static void test_env(void)
{
    braid_online_t o;
    unsetenv("BRAID_ONLINE");
    unsetenv("BRAID_ONLINE_WITHIN");
    unsetenv("BRAID_ONLINE_MAX");
    CHECK(braid_online_read_env(&o) == BRAID_OK && o.on == 1 &&
              o.within == BRAID_ONLINE_WITHIN_DEFAULT &&
              o.max_bytes == BRAID_ONLINE_MAX_DEFAULT,
          "defaults: on");
    setenv("BRAID_ONLINE", "off", 1);
    CHECK(braid_online_read_env(&o) == BRAID_OK && o.on == 0, "off");
    setenv("BRAID_ONLINE", "maybe", 1);
    CHECK(braid_online_read_env(&o) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "BRAID_ONLINE='maybe'") != NULL &&
              strstr(braid_last_error(), "position 0") != NULL,
          "a bad value is named with its position: %s", braid_last_error());
    setenv("BRAID_ONLINE", "on", 1);
    setenv("BRAID_ONLINE_WITHIN", "0.5", 1);
    CHECK(braid_online_read_env(&o) == BRAID_ERR_PARSE,
          "a factor below 1 is refused: %s", braid_last_error());
    setenv("BRAID_ONLINE_WITHIN", "1.25", 1);
    setenv("BRAID_ONLINE_MAX", "1Mx", 1);
    CHECK(braid_online_read_env(&o) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "BRAID_ONLINE_MAX") != NULL,
          "a bad size is refused: %s", braid_last_error());
    setenv("BRAID_ONLINE_MAX", "1MiB", 1);
    CHECK(braid_online_read_env(&o) == BRAID_OK && o.within == 1.25 &&
              o.max_bytes == (1u << 20),
          "factor and size read");
    setenv("BRAID_ONLINE_DRIFT", "0.5", 1);
    CHECK(braid_online_read_env(&o) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "BRAID_ONLINE_DRIFT='0.5'") != NULL,
          "a drift factor below 1 is refused: %s", braid_last_error());
    setenv("BRAID_ONLINE_DRIFT", "2x", 1);
    CHECK(braid_online_read_env(&o) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "BRAID_ONLINE_DRIFT") != NULL,
          "a malformed drift factor is refused: %s", braid_last_error());
    setenv("BRAID_ONLINE_DRIFT", "0", 1);
    CHECK(braid_online_read_env(&o) == BRAID_OK && o.drift == 0.0,
          "drift 0: no watch");
    setenv("BRAID_ONLINE_DRIFT", "2", 1);
    CHECK(braid_online_read_env(&o) == BRAID_OK && o.drift == 2.0,
          "drift 2 read");
    unsetenv("BRAID_ONLINE_DRIFT");
    CHECK(braid_online_read_env(&o) == BRAID_OK &&
              o.drift == BRAID_ONLINE_DRIFT_DEFAULT &&
              o.stand_in == BRAID_ONLINE_STAND_IN_DEFAULT,
          "drift and stand-in defaults");
    setenv("BRAID_ONLINE_STAND_IN", "0.9", 1);
    CHECK(braid_online_read_env(&o) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "BRAID_ONLINE_STAND_IN='0.9'") !=
                  NULL &&
              strstr(braid_last_error(), "0 (no stand-in)") != NULL,
          "a stand-in factor below 1 is refused: %s", braid_last_error());
    setenv("BRAID_ONLINE_STAND_IN", "1.5q", 1);
    CHECK(braid_online_read_env(&o) == BRAID_ERR_PARSE &&
              strstr(braid_last_error(), "BRAID_ONLINE_STAND_IN") != NULL,
          "a malformed stand-in factor is refused: %s", braid_last_error());
    setenv("BRAID_ONLINE_STAND_IN", "0", 1);
    CHECK(braid_online_read_env(&o) == BRAID_OK && o.stand_in == 0.0,
          "stand-in 0: none");
    unsetenv("BRAID_ONLINE_STAND_IN");
    unsetenv("BRAID_ONLINE");
    unsetenv("BRAID_ONLINE_WITHIN");
    unsetenv("BRAID_ONLINE_MAX");
}

/* The watch of a settled class: checks hold their exchange to about 1% of
 * the class's time, at least a window apart and at most the cap, doubling
 * with every re-opened trial; drift counts either way, strictly beyond
 * the factor. */
static void test_watch(void)
{
    int p = braid_online_period(1000.0, 0);
    CHECK(p == 100, "1 ms calls: a check every 100 (1%% of 1 s): %d", p);
    p = braid_online_period(1000.0, 2);
    CHECK(p == 400, "after two re-opened trials, every 400: %d", p);
    p = braid_online_period(1e6, 0);
    CHECK(p == BRAID_ONLINE_WINDOW, "1 s calls: a window apart: %d", p);
    p = braid_online_period(1.0, 0);
    CHECK(p == BRAID_ONLINE_PERIOD_MAX, "1 us calls: the cap: %d", p);
    p = braid_online_period(0.0, 0);
    CHECK(p == BRAID_ONLINE_PERIOD_MAX, "no time: the cap: %d", p);
    p = braid_online_period(1e6, 20);
    CHECK(p == BRAID_ONLINE_WINDOW << 6, "the doubling stops: %d", p);
    CHECK(!braid_online_drifted(100.0, 150.0, 1.5) &&
              !braid_online_drifted(100.0, 100.0 / 1.5, 1.5),
          "at the factor: no drift");
    CHECK(braid_online_drifted(100.0, 151.0, 1.5) &&
              braid_online_drifted(100.0, 66.0, 1.5),
          "beyond it, slower or faster: drift");
    CHECK(!braid_online_drifted(100.0, 100.0, 1.0) &&
              braid_online_drifted(100.0, 100.001, 1.0),
          "factor 1: any change");
}

/* A model pick that does not fold in rank order has a stand-in that does:
 * the cheapest within the factor, of the same collective and memory. */
static void test_stand_in(void)
{
    braid_transport_t shm = {.name = "shm"};
    braid_tl_t        tl  = {.ops = &shm};
    const uint32_t    ro  = BRAID_ALGO_RANK_ORDER;
    braid_algo_t      a1  = {.name = "a1", .estimate = est_linear};
    braid_algo_t      a2 = {.name = "a2", .flags = ro, .estimate = est_linear};
    braid_algo_t      a3 = {.name = "a3", .flags = ro, .estimate = est_linear};
    braid_algo_t      g1 = {.name = "a1", .flags = ro, .estimate = est_linear};
    a1.coll = a2.coll = a3.coll = BRAID_COLL_ALLREDUCE;
    g1.coll                     = BRAID_COLL_ALLGATHER;
    const uint32_t    host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    const uint32_t    dev  = BRAID_MEM_BIT(BRAID_MEM_CUDA);
    braid_candidate_t cands[] = {
        {"a1@shm", &a1, &tl, "shm", host, NULL, NULL},
        {"a2@shm", &a2, &tl, "shm", host, NULL, NULL},
        {"a3@shm", &a3, &tl, "shm", host, NULL, NULL},
        {"g1@shm", &g1, &tl, "shm", host, NULL, NULL},
    };
    braid_algo_spec_t none;
    braid_tune_t      tune = {0};
    braid_selector_t  sel;
    selector(&sel, cands, 4, &none, &tune, 4);
    const braid_coll_t ar = BRAID_COLL_ALLREDUCE;
    int                k  = braid_online_stand_in(&sel, 0, ar, 64, host, 2.0);
    CHECK(k == 1, "a2 (2x a1, rank order) stands in for a1: %d", k);
    k = braid_online_stand_in(&sel, 0, ar, 64, host, 1.5);
    CHECK(k == 0, "nothing within 1.5x: a1 stays: %d", k);
    k = braid_online_stand_in(&sel, 0, ar, 64, host, 5.0);
    CHECK(k == 1, "within 5x the cheapest, a2, not a3: %d", k);
    k = braid_online_stand_in(&sel, 2, ar, 64, host, 2.0);
    CHECK(k == 2, "a rank-order pick is its own: %d", k);
    cands[1].mem_types = dev;
    k = braid_online_stand_in(&sel, 0, ar, 64, host, 2.0);
    CHECK(k == 0, "a2 on device memory only is no stand-in: %d", k);
    cands[1].mem_types = host;
    /* On two ranks a core-reduce pick is swappable: no stand-in needed. */
    a1.flags   = BRAID_ALGO_CORE_REDUCE;
    sel.nranks = 2;
    k          = braid_online_stand_in(&sel, 0, ar, 64, host, 2.0);
    CHECK(k == 0, "core-reduce a1 on 2 ranks keeps its place: %d", k);
    sel.nranks = 4;
    k          = braid_online_stand_in(&sel, 0, ar, 64, host, 2.0);
    CHECK(k == 1, "core-reduce a1 on 4 ranks: a2 stands in: %d", k);
}

/* A pull-like estimate: all of it reading at the get path's bandwidth. */
static double est_reads(const braid_algo_t *self, const braid_cost_in_t *in)
{
    (void)self;
    return in->get_beta_gbps > 0 ? 16.4 / in->get_beta_gbps : -1.0;
}

/* The window takes each rival's lower estimate, for buffers from anywhere
 * and from braid_mem_alloc: a candidate that reads the peers' buffers, 10x
 * the pick's estimate on malloc's memory and at it on braid_mem_alloc's
 * (the calibration's mget figure), goes on trial; without that figure it
 * stays out. */
static void test_mapped_rivals(void)
{
    braid_transport_t shm = {.name = "shm"};
    braid_tl_t        tl  = {.struct_size   = sizeof(braid_tl_t),
                             .ops           = &shm,
                             .caps          = BRAID_CAP_GET,
                             .get_alpha_us  = 0.0,
                             .get_beta_gbps = 1.0};
    braid_algo_t      a1  = {.name     = "a1",
                             .coll     = BRAID_COLL_ALLGATHER,
                             .estimate = est_linear};
    braid_algo_t      rd  = {.name     = "reads",
                             .coll     = BRAID_COLL_ALLGATHER,
                             .estimate = est_reads};
    const uint32_t    host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    braid_candidate_t cands[] = {
        {"a1@shm", &a1, &tl, "shm", host, NULL, NULL},
        {"reads@shm", &rd, &tl, "shm", host, NULL, NULL},
    };
    braid_algo_spec_t none;
    braid_tune_t      tune = {0};
    braid_selector_t  sel;
    selector(&sel, cands, 2, &none, &tune, 4);
    int idx[BRAID_ONLINE_MAX_CANDS] = {0};
    /* a1 at 64 B: 1.64; reads: 16.4 on malloc's memory */
    int n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLGATHER, 64,
                                host, 5.0);
    CHECK(n == 1, "no mget figure: reads (10x) is no rival: n %d", n);
    sel.nbw = 1;
    memset(&sel.bw[0], 0, sizeof(sel.bw[0]));
    sel.bw[0].tl             = &tl;
    sel.bw[0].mget_alpha_us  = 0.0;
    sel.bw[0].mget_beta_gbps = 10.0;
    n = braid_online_rivals(idx, &sel, NULL, BRAID_COLL_ALLGATHER, 64, host,
                            5.0);
    CHECK(n == 2 && idx[0] == 0 && idx[1] == 1,
          "reads at 1x on braid_mem_alloc's memory is a rival: n %d", n);
    braid_selector_fini(&sel);
}

int main(void)
{
    test_turns();
    test_mine();
    test_rounds();
    test_decide();
    test_rivals();
    test_mapped_rivals();
    test_table_rivals();
    test_stand_in();
    test_env();
    test_watch();
    return check_summary("online");
}
