/* braid-tune's timing: every series of one collective at every size, in
 * rounds.  Within a round the series take turns, so that a shared, noisy
 * machine hits them alike: two calls each (the second timed) up to the
 * large sizes and a call each for those (turn_at()), in an order shuffled
 * turn by turn (tune_order.h); then the series that race on (within
 * RACE_WITHIN of the fastest, and auto and tuned) take more turns
 * among themselves, up to --race timed calls.  A series' figure at a size
 * is the median over rounds of the median call of the round, each call
 * timed alone after a barrier and taken from the slowest rank, as
 * braid-bench and mpi-allreduce-bench time theirs. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tune.h"
#include "tune_order.h"
#include "util/stats.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static braid_status_t call(tune_t *t, braid_comm_t *comm, braid_coll_t coll,
                           size_t count)
{
    switch (coll) {
    case BRAID_COLL_ALLREDUCE:
        return braid_allreduce(t->sbuf, t->rbuf, count, BRAID_F32, BRAID_SUM,
                               comm);
    case BRAID_COLL_REDUCE_SCATTER:
        return braid_reduce_scatter(t->sbuf, t->rbuf, count, BRAID_F32,
                                    BRAID_SUM, comm);
    case BRAID_COLL_ALLGATHER:
        return braid_allgather(t->sbuf, t->rbuf, count, BRAID_F32, comm);
    case BRAID_COLL_BROADCAST:
        return braid_broadcast(t->rbuf, count, BRAID_F32, 0, comm);
    default: return braid_barrier(comm);
    }
}

/* Inputs: element i of rank r's send buffer is (i % 7) + r, small integers
 * whose f32 sums are exact. */
static void fill(tune_t *t, braid_coll_t coll, size_t count)
{
    float *s = (float *)t->sbuf, *r = (float *)t->rbuf;
    size_t n =
        coll == BRAID_COLL_REDUCE_SCATTER ? count * (size_t)t->size : count;
    for (size_t i = 0; coll != BRAID_COLL_BARRIER && i < n; i++)
        s[i] = (float)(i % 7 + (size_t)t->rank);
    if (coll == BRAID_COLL_BROADCAST)
        for (size_t i = 0; i < count; i++)
            r[i] = t->rank == 0 ? (float)(i % 7) : -1.0f;
}

/* Elements of this rank's result that are wrong. */
static size_t wrong(const tune_t *t, braid_coll_t coll, size_t count)
{
    const float *r = (const float *)t->rbuf;
    double       n = t->size, base = n * (n - 1) / 2;
    size_t       bad = 0;
    for (size_t i = 0;
         i < count * (coll == BRAID_COLL_ALLGATHER ? (size_t)t->size : 1);
         i++) {
        double want;
        switch (coll) {
        case BRAID_COLL_ALLREDUCE: want = n * (double)(i % 7) + base; break;
        case BRAID_COLL_REDUCE_SCATTER:
            want = n * (double)(((size_t)t->rank * count + i) % 7) + base;
            break;
        case BRAID_COLL_ALLGATHER:
            want = (double)((i % count) % 7 + i / count);
            break;
        case BRAID_COLL_BROADCAST: want = (double)(i % 7); break;
        default: return 0;
        }
        bad += (double)r[i] != want;
    }
    return bad;
}

static void die(tune_t *t, braid_status_t st, const char *what)
{
    fprintf(stderr, "braid-tune rank %d: %s: %s: %s\n", t->rank, what,
            braid_status_str(st), braid_last_error());
    exit(1);
}

static int iters_for(const tune_t *t, size_t size)
{
    /* About the same time per size: fewer calls for large messages. */
    double scaled =
        (double)t->o.iters * (double)TUNE_SMALL / (double)(size ? size : 1);
    int n = scaled < t->o.iters ? (int)scaled : t->o.iters;
    return n < 3 ? 3 : n;
}

/* The calls the series' dispatcher has made of its trial for this size
 * (braid_comm_choice's reason: "on trial (k of N calls: ..."), or -1 where
 * it is timing no candidates for it. */
static int trial_calls(series_t *s, braid_coll_t coll, size_t bytes)
{
    char ran[BRAID_CAND_LEN], why[256];
    int  k;
    if (s->kind == SERIES_CAND ||
        braid_comm_choice(s->comm, coll, bytes, ran, sizeof(ran), why,
                          sizeof(why)) != BRAID_OK ||
        strncmp(why, "on trial", 8) != 0)
        return -1;
    return sscanf(why, "on trial (%d of", &k) == 1 ? k : 0;
}

/* Whether the series' dispatcher is still timing candidates for this
 * size. */
static int on_trial(series_t *s, braid_coll_t coll, size_t bytes)
{
    return trial_calls(s, coll, bytes) >= 0;
}

/* A fresh communicator's first calls fault in its transports' pages
 * (shm: every cell of a peer on first use), which an application pays
 * once: the first time a series runs, it warms up with this many calls
 * (sizes up to 1 MiB). */
#define FIRST_WARMUP 64

/* Where the series take turns call by call within a round, not block by
 * block: where the buffers of the host's ranks together (a send and a
 * receive buffer each) exceed its last-level cache INTERLEAVE_LLC times,
 * so that a call streams from memory whatever ran before it.  Such a call
 * lasts long enough that the machine can change under a block of them (on
 * this VM the two vCPUs move between cores that share a cache and cores
 * that do not, a 2-3x difference for the same call: docs/performance.md),
 * and then the series timed in that block pay for it alone; call by call,
 * every series has the others beside it in time.  Smaller calls take turns
 * of two (below). */
#define INTERLEAVE_LLC 4
#define LLC_UNKNOWN    ((size_t)32 << 20)

static int interleaved(const tune_t *t, size_t size)
{
    int ppn = t->world->topo.ppn > 0 ? t->world->topo.ppn : 1;
    return (double)ppn * 2.0 * (double)size >=
           (double)INTERLEAVE_LLC * (double)(t->llc ? t->llc : LLC_UNKNOWN);
}

/* Below the interleaved sizes the series take turns of TURN_CALLS calls,
 * the last one timed.  A block of calls each is over quickly enough that
 * the machine changes between one series' block and the next rather than
 * under it -- the placement of the vCPUs for calls of a millisecond, the
 * scheduling of more ranks than cores for calls of microseconds -- and two
 * series of one candidate then time up to 2x apart in one round
 * (docs/performance.md, "braid-tune: mid sizes in turns" and "small sizes
 * in turns"); turn by turn every series is timed beside the others.  The
 * untimed call first brings the series' own areas back into the caches,
 * so that the timed one follows a call of its own as in an application's
 * stream, as the dispatcher's own trials time (comm/online.h).  From
 * --small-max on such a turn costs a millisecond or so, so a round takes
 * at least TURN_MIN_ITERS of them (-n permitting) where the scaled count
 * would take 3. */
#define TURN_CALLS     2
#define TURN_MIN_ITERS 8

typedef enum {
    TURN_PAIR, /* TURN_CALLS calls each, the last timed */
    TURN_CALL  /* a call each */
} turn_t;

static turn_t turn_at(const tune_t *t, size_t size)
{
    return interleaved(t, size) ? TURN_CALL : TURN_PAIR;
}

static const char *turn_note(turn_t turn)
{
    return turn == TURN_CALL ? " (series call by call)"
                             : " (series in turns of two calls)";
}

/* The warm-up calls of one series before it is timed at one size; with
 * wait_trial, more while its dispatcher has candidates on trial for the
 * size. */
static void warm_up(tune_t *t, series_t *s, braid_coll_t coll, size_t count,
                    size_t size, int check, int wait_trial)
{
    braid_status_t st;
    int            warm = t->o.warmup;
    if (size >= (8u << 20) && warm > 1)
        warm = 1;
    if (!s->warmed && size <= (1u << 20) && warm < FIRST_WARMUP)
        warm = FIRST_WARMUP;
    s->warmed = 1;
    /* Warm-up calls come as the timed ones do, each after a barrier, and
     * (wait_trial) go on while the series' dispatcher has candidates on
     * trial for this size (online tuning, docs/tuning.md): what is timed
     * is its steady state.  Every rank sees the same trial state. */
    for (int i = 0; i < warm || (check && i == 0) ||
                    (wait_trial && i < warm + 256 &&
                     on_trial(s, coll, count * sizeof(float)));
         i++) {
        if ((st = braid_barrier(t->world)) != BRAID_OK)
            die(t, st, "barrier");
        if (check && i == 0)
            fill(t, coll, count);
        if ((st = call(t, s->comm, coll, count)) != BRAID_OK)
            die(t, st, s->name);
        if (check && i == 0) {
            int64_t bad = (int64_t)wrong(t, coll, count), all = 0;
            if ((st = braid_allreduce(&bad, &all, 1, BRAID_I64, BRAID_SUM,
                                      t->world)) != BRAID_OK)
                die(t, st, "allreduce of the check");
            if (all != 0) {
                if (t->rank == 0)
                    fprintf(stderr,
                            "braid-tune: %s of %zu B with %s gave "
                            "%lld wrong elements\n",
                            braid_coll_name(coll), size, s->name,
                            (long long)all);
                exit(1);
            }
        }
    }
}

/* One untimed call of one series, after a barrier. */
static void untimed_call(tune_t *t, series_t *s, braid_coll_t coll,
                         size_t count)
{
    braid_status_t st;
    if ((st = braid_barrier(t->world)) != BRAID_OK)
        die(t, st, "barrier");
    if ((st = call(t, s->comm, coll, count)) != BRAID_OK)
        die(t, st, s->name);
}

/* One timed call of one series, after a barrier, in microseconds. */
static double timed_call(tune_t *t, series_t *s, braid_coll_t coll,
                         size_t count)
{
    braid_status_t st;
    if ((st = braid_barrier(t->world)) != BRAID_OK)
        die(t, st, "barrier");
    double t0 = now_s();
    if ((st = call(t, s->comm, coll, count)) != BRAID_OK)
        die(t, st, s->name);
    return (now_s() - t0) * 1e6;
}

/* Below TRIAL_TURNS_MAX (at the sizes of turns of two calls) the trials
 * of the automatic series run in untimed turns of every series, as the
 * timed calls do, not in a block of the series' own calls.  A small
 * call's time depends on what ran between it and its series' previous
 * call: other series' traffic evicts the areas that its puts and cells
 * write from the cache of the core that read them last, and a put into
 * lines no other core holds is several times cheaper (docs/performance.md,
 * "A trial in the series' context").  A trial must
 * see its candidates in the context its series is timed in, as an
 * application's trial sees them among the application's own work.  Above
 * it a call streams from memory whatever ran before, and a turn of every
 * series per trial call would take seconds. */
#define TRIAL_TURNS_MAX ((size_t)1 << 20)
/* More than the longest trial's calls over TURN_CALLS (comm/online.h). */
#define TRIAL_TURNS_LIMIT 128

static int trial_in_turns(const tune_t *t, size_t size)
{
    return size < TRIAL_TURNS_MAX && turn_at(t, size) == TURN_PAIR;
}

/* Untimed turns of the series order[0..m) at size i while any of them has
 * a trial open; a series on trial first makes its trial's calls even, so
 * that each of its turns is one turn of its trial, the untimed call and
 * then the timed one (comm/online.h). */
static void trial_turns(tune_t *t, sweep_t *sw, int i, int r, const int *order,
                        int m)
{
    size_t bytes = sw->count[i] * sizeof(float); /* as warm_up() asks */
    for (int q = 0; q < m; q++) {
        series_t *s = &t->series[order[q]];
        if (trial_calls(s, sw->coll, bytes) % TURN_CALLS == 1)
            untimed_call(t, s, sw->coll, sw->count[i]);
    }
    for (int c = 0; c < TRIAL_TURNS_LIMIT; c++) {
        int any = 0;
        for (int q = 0; q < m && !any; q++)
            any = on_trial(&t->series[order[q]], sw->coll, bytes);
        if (!any)
            return;
        int perm[TUNE_MAX_SERIES];
        tune_turn_order(perm, m, i, r, c);
        for (int v = 0; v < m; v++)
            for (int u = 0; u < TURN_CALLS; u++)
                untimed_call(t, &t->series[order[perm[v]]], sw->coll,
                             sw->count[i]);
    }
}

/* Every rank's times of n calls from times[off] replaced by the slowest
 * rank's, in tmax[off]. */
static void slowest(tune_t *t, int off, int n)
{
    braid_status_t st =
        braid_allreduce(t->times + off, t->tmax + off, (size_t)n, BRAID_F64,
                        BRAID_MAX, t->world);
    if (st != BRAID_OK)
        die(t, st, "allreduce of the times");
}

/* An untimed round of one series at one size, its calls in a block (the
 * first size's, before anything is timed: tune_sweep). */
static void untimed_round(tune_t *t, series_t *s, braid_coll_t coll,
                          size_t count, size_t size)
{
    warm_up(t, s, coll, count, size, 0, !trial_in_turns(t, size));
    for (int i = 0; i < iters_for(t, size); i++)
        (void)timed_call(t, s, coll, count);
}

/* Series within this factor of the fastest after a round's first calls
 * race on (tune_race): wider than the oracle gap's limits, so that every
 * candidate that could be the best, or the table's pick, is among them. */
#define RACE_WITHIN 1.25

/* Turn c of the series order[race[0..n)] at size i in round r, in the
 * shuffled order of that turn: the timed call of order[race[j]] into
 * times[off + j * stride]. */
static void one_turn(tune_t *t, sweep_t *sw, int i, int r, int c, turn_t turn,
                     const int *order, const int *race, int n, int off,
                     int stride)
{
    int perm[TUNE_MAX_SERIES];
    tune_turn_order(perm, n, i, r, c);
    for (int v = 0; v < n; v++) {
        int       q = perm[v];
        series_t *s = &t->series[order[race[q]]];
        for (int u = 1; turn == TURN_PAIR && u < TURN_CALLS; u++)
            untimed_call(t, s, sw->coll, sw->count[i]);
        t->times[off + q * stride] = timed_call(t, s, sw->coll, sw->count[i]);
    }
}

/* Round r of every series that runs at size i, the series taking turns
 * (turn_at(): TURN_PAIR or TURN_CALL) in an order shuffled turn by turn;
 * then, where --race asks for more calls than that gave, the series that
 * race on (tune_race) take the turns still missing among themselves.
 * Each one's median timed call of the slowest rank goes into its
 * round_us[r]. */
static void time_round_turns(tune_t *t, sweep_t *sw, int i, int r, turn_t turn)
{
    int order[TUNE_MAX_SERIES], all[TUNE_MAX_SERIES], m = 0;
    int iters = iters_for(t, sw->size[i]);
    int least = t->o.iters < TURN_MIN_ITERS ? t->o.iters : TURN_MIN_ITERS;
    if (turn == TURN_PAIR && iters < least)
        iters = least;
    for (int k = 0; k < t->nseries; k++)
        if (sw->pt[i][k].state == POINT_OK) {
            all[m]     = m;
            order[m++] = k;
        }
    int in_turns = trial_in_turns(t, sw->size[i]);
    for (int q = 0; q < m; q++)
        warm_up(t, &t->series[order[q]], sw->coll, sw->count[i], sw->size[i],
                t->o.check && r == 0, !in_turns);
    if (in_turns)
        trial_turns(t, sw, i, r, order, m);
    /* times[q * iters + c]: call c of the series order[q] */
    for (int c = 0; c < iters; c++)
        one_turn(t, sw, i, r, c, turn, order, all, m, c, iters);
    slowest(t, 0, m * iters);

    double med[TUNE_MAX_SERIES], *v = t->one;
    int    always[TUNE_MAX_SERIES], race[TUNE_MAX_SERIES];
    for (int q = 0; q < m; q++) {
        memcpy(v, &t->tmax[q * iters], sizeof(double) * (size_t)iters);
        med[q]    = braid_median(v, iters);
        always[q] = t->series[order[q]].kind == SERIES_AUTO ||
                    t->series[order[q]].kind == SERIES_TUNED;
        sw->pt[i][order[q]].round_us[r] = med[q];
        if (sw->pt[i][order[q]].calls < iters)
            sw->pt[i][order[q]].calls = iters;
    }
    int extra = t->o.race - iters;
    if (extra <= 0)
        return;
    int n = tune_race(race, med, always, m, RACE_WITHIN);
    /* times[base + j * extra + e]: extra call e of the series
     * order[race[j]], after the first m * iters */
    int base = m * iters;
    for (int e = 0; e < extra; e++)
        one_turn(t, sw, i, r, iters + e, turn, order, race, n, base + e,
                 extra);
    slowest(t, base, n * extra);
    for (int j = 0; j < n; j++) {
        int q = race[j];
        memcpy(v, &t->tmax[q * iters], sizeof(double) * (size_t)iters);
        memcpy(v + iters, &t->tmax[base + j * extra],
               sizeof(double) * (size_t)extra);
        sw->pt[i][order[q]].round_us[r] = braid_median(v, iters + extra);
        sw->pt[i][order[q]].calls       = iters + extra;
    }
}

/* The world's candidate of this name for coll, or NULL. */
static const braid_candidate_t *world_cand(const tune_t *t, braid_coll_t coll,
                                           const char *name)
{
    const braid_selector_t *sel = &t->world->sel;
    for (int i = 0; i < sel->ncands; i++)
        if (sel->cands[i].algo->coll == coll &&
            strcmp(sel->cands[i].name, name) == 0)
            return &sel->cands[i];
    return NULL;
}

/* The cost model's estimate for the sweep's buffers: every rank's from
 * braid_mem_alloc (--memory braid) or from malloc. */
static double estimate(const tune_t *t, braid_coll_t coll, const char *name,
                       size_t bytes)
{
    const braid_candidate_t *c = world_cand(t, coll, name);
    uint32_t mem = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    if (c == NULL)
        return -1;
    return t->o.shared
               ? braid_candidate_estimate_mapped(&t->world->sel, c, coll,
                                                 bytes, mem)
               : braid_candidate_estimate(&t->world->sel, c, coll, bytes, mem);
}

int tune_best(const tune_t *t, const sweep_t *sw, int i)
{
    int best = -1;
    for (int k = 0; k < t->nseries; k++) {
        const point_t *p = &sw->pt[i][k];
        if (t->series[k].kind == SERIES_CAND && p->state == POINT_OK &&
            (best < 0 || p->us < sw->pt[i][best].us))
            best = k;
    }
    return best;
}

/* Whether series k's candidate may go on trial against the others at
 * all (the dispatcher's rule, braid_online_swappable). */
static int folds_in_order(const tune_t *t, const sweep_t *sw, int k)
{
    const braid_candidate_t *c = world_cand(t, sw->coll, t->series[k].name);
    return c != NULL &&
           braid_online_swappable(c, sw->coll, t->world->sel.nranks);
}

int tune_pick(const tune_t *t, const sweep_t *sw, int i)
{
    int best = tune_best(t, sw, i), alt = -1;
    if (best < 0 || folds_in_order(t, sw, best))
        return best;
    for (int k = 0; k < t->nseries; k++) {
        const point_t *p = &sw->pt[i][k];
        if (t->series[k].kind == SERIES_CAND && p->state == POINT_OK &&
            folds_in_order(t, sw, k) && (alt < 0 || p->us < sw->pt[i][alt].us))
            alt = k;
    }
    if (alt < 0)
        return best;
    /* By more than the margin a trial asks of a rival: a pick nothing will
     * correct must not rest on a lead that one placement of the vCPUs,
     * lasting the table's whole run, can give (docs/performance.md,
     * "A tuning file's pick that no trial corrects needs a margin"). */
    for (int r = 0; r < tune_rounds(t, sw->size[i]); r++)
        if (sw->pt[i][best].round_us[r] * (1.0 + BRAID_ONLINE_MARGIN) >=
            sw->pt[i][alt].round_us[r])
            return alt;
    return best;
}

/* What each series will do at size i: which candidate runs, its estimate,
 * or why it sits out. */
static void plan(tune_t *t, sweep_t *sw, int i)
{
    braid_coll_t coll = sw->coll;
    for (int k = 0; k < t->nseries; k++) {
        series_t *s = &t->series[k];
        point_t  *p = &sw->pt[i][k];
        memset(p, 0, sizeof(*p));
        p->us = -1;
        if (s->kind == SERIES_CAND) {
            snprintf(p->ran, sizeof(p->ran), "%s", s->name);
            p->est = estimate(t, coll, s->name, sw->bytes[i]);
            if (!(s->colls >> coll & 1) || p->est < 0)
                p->state = POINT_CANNOT;
        } else {
            char           why[256];
            braid_status_t st =
                braid_comm_choice(s->comm, coll, sw->bytes[i], p->ran,
                                  sizeof(p->ran), why, sizeof(why));
            if (st != BRAID_OK)
                die(t, st, "braid_comm_choice");
            p->est = estimate(t, coll, p->ran, sw->bytes[i]);
        }
    }
    /* --prune: a candidate far slower than the best at the size before
     * sits this one out (every rank decides alike: the times are the
     * slowest rank's, the same everywhere). */
    int prev = i > 0 ? tune_best(t, sw, i - 1) : -1;
    if (t->o.prune <= 0 || prev < 0 || sw->size[i] < (64u << 10))
        return;
    for (int k = 0; k < t->nseries; k++) {
        point_t *q = &sw->pt[i - 1][k];
        if (t->series[k].kind == SERIES_CAND &&
            sw->pt[i][k].state == POINT_OK &&
            (q->state == POINT_PRUNED ||
             (q->state == POINT_OK &&
              q->us > t->o.prune * sw->pt[i - 1][prev].us)))
            sw->pt[i][k].state = POINT_PRUNED;
    }
}

int tune_rounds(const tune_t *t, size_t size)
{
    return size <= t->o.small_max && t->o.small_rounds > t->o.rounds
               ? t->o.small_rounds
               : t->o.rounds;
}

int tune_sweep(tune_t *t, sweep_t *sw)
{
    for (int i = 0; i < sw->nsizes; i++) {
        int rounds = tune_rounds(t, sw->size[i]);
        plan(t, sw, i);
        /* The series that runs first in a fresh job times slower than the
         * same candidate later in it, whatever the candidate
         * (docs/performance.md): one untimed round of every series at the
         * first size puts them all past that before any is timed. */
        for (int k = 0; i == 0 && k < t->nseries; k++)
            if (sw->pt[i][k].state == POINT_OK)
                untimed_round(t, &t->series[k], sw->coll, sw->count[i],
                              sw->size[i]);
        turn_t turn = turn_at(t, sw->size[i]);
        for (int r = 0; r < rounds; r++)
            time_round_turns(t, sw, i, r, turn);
        /* What the automatic series ran once their trials settled. */
        for (int k = 0; k < t->nseries; k++) {
            point_t *p = &sw->pt[i][k];
            if (t->series[k].kind == SERIES_CAND || p->state != POINT_OK)
                continue;
            braid_status_t st =
                braid_comm_choice(t->series[k].comm, sw->coll, sw->bytes[i],
                                  p->ran, sizeof(p->ran), NULL, 0);
            if (st != BRAID_OK)
                die(t, st, "braid_comm_choice");
            p->est = estimate(t, sw->coll, p->ran, sw->bytes[i]);
        }
        for (int k = 0; k < t->nseries; k++) {
            point_t *p = &sw->pt[i][k];
            if (p->state == POINT_OK) {
                double v[TUNE_MAX_ROUNDS];
                memcpy(v, p->round_us, sizeof(double) * (size_t)rounds);
                p->us = braid_median(v, rounds);
            }
        }
        if (t->rank == 0 && !t->o.quiet) {
            int b = tune_best(t, sw, i);
            fprintf(stderr, "braid-tune: %s %zu B: best %s %.2f us%s\n",
                    braid_coll_name(sw->coll), sw->size[i],
                    b >= 0 ? t->series[b].name : "-",
                    b >= 0 ? sw->pt[i][b].us : 0.0, turn_note(turn));
        }
    }
    return 0;
}
