/* Online tuning (online.h): trials of close candidates on the live
 * communicator, and the agreement that settles each size class. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/online.h"
#include "util/env.h"
#include "util/log.h"
#include "util/stats.h"

#define LOG_COMP "online"

/* A factor read from name (in [0, 1000]) that is 0 (off: `off` says what
 * that means) or at least 1. */
static braid_status_t zero_or_factor(const char *name, double v,
                                     const char *off)
{
    if (v == 0.0 || v >= 1.0)
        return BRAID_OK;
    const char *text = braid_env_get(name);
    return braid_error(BRAID_ERR_PARSE,
                       "%s='%s': expected 0 (%s) or a factor >= 1 at "
                       "position 0",
                       name, braid_quote(text, strlen(text), 0).s, off);
}

braid_status_t braid_online_read_env(braid_online_t *o)
{
    memset(o, 0, sizeof(*o));
    o->on          = 1;
    const char *on = braid_env_get("BRAID_ONLINE");
    if (on != NULL) {
        if (strcmp(on, "on") == 0 || strcmp(on, "1") == 0)
            o->on = 1;
        else if (strcmp(on, "off") == 0 || strcmp(on, "0") == 0)
            o->on = 0;
        else
            return braid_error(BRAID_ERR_PARSE,
                               "BRAID_ONLINE='%s': expected 'on' or 'off' "
                               "at position 0",
                               braid_quote(on, strlen(on), 0).s);
    }
    braid_status_t st =
        braid_env_double("BRAID_ONLINE_WITHIN", BRAID_ONLINE_WITHIN_DEFAULT,
                         1.0, 1000.0, &o->within);
    if (st == BRAID_OK)
        st = braid_env_size("BRAID_ONLINE_MAX", BRAID_ONLINE_MAX_DEFAULT, 0,
                            SIZE_MAX, &o->max_bytes);
    if (st == BRAID_OK)
        st = braid_env_double("BRAID_ONLINE_DRIFT", BRAID_ONLINE_DRIFT_DEFAULT,
                              0.0, 1000.0, &o->drift);
    if (st == BRAID_OK)
        st = zero_or_factor("BRAID_ONLINE_DRIFT", o->drift, "no watch");
    if (st == BRAID_OK)
        st = braid_env_double("BRAID_ONLINE_STAND_IN",
                              BRAID_ONLINE_STAND_IN_DEFAULT, 0.0, 1000.0,
                              &o->stand_in);
    if (st == BRAID_OK)
        st = zero_or_factor("BRAID_ONLINE_STAND_IN", o->stand_in,
                            "no stand-in");
    return st;
}

void braid_online_free(braid_online_t *o)
{
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        free(o->slots[c]);
        o->slots[c] = NULL;
    }
}

int braid_online_turn(int *round, int call, int ncands)
{
    int turn = call / BRAID_ONLINE_TURN;
    *round =
        call % BRAID_ONLINE_TURN == BRAID_ONLINE_TURN - 1 ? turn / ncands : -1;
    return turn % ncands;
}

int braid_online_rounds(int *warm, size_t bytes)
{
    if (bytes >= BRAID_ONLINE_LARGE) {
        *warm = BRAID_ONLINE_WARM_LARGE;
        return BRAID_ONLINE_ROUNDS_LARGE;
    }
    if (bytes < BRAID_ONLINE_SMALL) {
        *warm = BRAID_ONLINE_WARM_SMALL;
        return BRAID_ONLINE_ROUNDS_SMALL;
    }
    *warm = BRAID_ONLINE_WARM;
    return BRAID_ONLINE_ROUNDS;
}

double braid_online_mine(const braid_online_slot_t *slot, int k)
{
    double v[BRAID_ONLINE_ROUNDS_MAX];
    int    n = slot->rounds - slot->warm;
    memcpy(v, &slot->us[k][slot->warm], sizeof(double) * (size_t)n);
    return braid_median(v, n);
}

int braid_online_decide(const double *agreed, int n, braid_why_t why)
{
    /* Why only a file's pick has a margin: online.h, BRAID_ONLINE_MARGIN. */
    double margin = why == BRAID_WHY_TUNE ? BRAID_ONLINE_MARGIN : 0.0;
    int    best   = 0;
    for (int k = 1; k < n; k++)
        if (agreed[k] < agreed[best])
            best = k;
    return agreed[0] <= agreed[best] * (1.0 + margin) ? 0 : best;
}

int braid_online_period(double us, int retrials)
{
    double p =
        us > 0.0
            ? ceil(BRAID_ONLINE_CHECK_US / (BRAID_ONLINE_CHECK_SHARE * us))
            : BRAID_ONLINE_PERIOD_MAX;
    if (p < BRAID_ONLINE_WINDOW)
        p = BRAID_ONLINE_WINDOW;
    if (p > BRAID_ONLINE_PERIOD_MAX)
        p = BRAID_ONLINE_PERIOD_MAX;
    return (int)p << (retrials < 6 ? retrials : 6);
}

int braid_online_drifted(double base, double now, double factor)
{
    return now > base * factor || now * factor < base;
}

int braid_online_swappable(const braid_candidate_t *c, braid_coll_t coll,
                           int nranks)
{
    /* A reduction's bits depend on the order it combines in: only
     * algorithms that fold in rank order may stand in for each other --
     * and on two ranks those that combine once through the core's
     * kernels, whose operations commute bit for bit (plugin.h). */
    uint32_t f = c->algo->flags;
    return (coll != BRAID_COLL_ALLREDUCE &&
            coll != BRAID_COLL_REDUCE_SCATTER) ||
           (f & BRAID_ALGO_RANK_ORDER) != 0 ||
           (nranks == 2 && (f & BRAID_ALGO_CORE_REDUCE) != 0);
}

/* What ranks candidate i: the row's measured time where a tuning-file row
 * picked, else the cost model's estimate -- the lower of its two, for
 * buffers from anywhere and for buffers from braid_mem_alloc, whichever
 * the application passes (every rank computes both alike, where the
 * buffers of one call may differ from rank to rank); -1 where it cannot
 * run the call or the row did not measure it. */
static double score(const braid_selector_t *sel, const braid_tune_row_t *row,
                    int i, braid_coll_t coll, size_t bytes, uint32_t mem)
{
    const braid_candidate_t *c = &sel->cands[i];
    double e = braid_candidate_estimate(sel, c, coll, bytes, mem);
    if (e < 0 || row != NULL)
        return e < 0 ? e : braid_tune_measured(row, c->name);
    double m = braid_candidate_estimate_mapped(sel, c, coll, bytes, mem);
    return m >= 0 && m < e ? m : e;
}

int braid_online_rivals(int *idx, const braid_selector_t *sel,
                        const braid_tune_row_t *row, braid_coll_t coll,
                        size_t bytes, uint32_t mem, double within)
{
    double est0 = score(sel, row, idx[0], coll, bytes, mem);
    double est[BRAID_ONLINE_MAX_CANDS];
    int    n   = 1;
    int    cap = bytes >= BRAID_ONLINE_LARGE ? BRAID_ONLINE_MAX_CANDS_LARGE
                                             : BRAID_ONLINE_MAX_CANDS;
    if (est0 < 0 ||
        !braid_online_swappable(&sel->cands[idx[0]], coll, sel->nranks))
        return 1;
    for (int i = 0; i < sel->ncands; i++) {
        if (i == idx[0] || sel->cands[i].algo->coll != coll ||
            (sel->cands[i].mem_types & mem) != mem ||
            !braid_online_swappable(&sel->cands[i], coll, sel->nranks))
            continue;
        double e = score(sel, row, i, coll, bytes, mem);
        if (e < 0 || e > est0 * within)
            continue;
        /* Insert in rising estimate; the dearest falls off a full list. */
        int at = n;
        while (at > 1 && e < est[at - 1])
            at--;
        if (at >= cap)
            continue;
        int last = n < cap ? n : cap - 1;
        for (int j = last; j > at; j--) {
            idx[j] = idx[j - 1];
            est[j] = est[j - 1];
        }
        idx[at] = i;
        est[at] = e;
        if (n < cap)
            n++;
    }
    return n;
}

int braid_online_stand_in(const braid_selector_t *sel, int pick,
                          braid_coll_t coll, size_t bytes, uint32_t mem,
                          double factor)
{
    const braid_candidate_t *c = &sel->cands[pick];
    double est0 = braid_candidate_estimate(sel, c, coll, bytes, mem);
    if (est0 < 0 || braid_online_swappable(c, coll, sel->nranks))
        return pick;
    int    best = pick;
    double eb   = est0 * factor;
    for (int i = 0; i < sel->ncands; i++) {
        const braid_candidate_t *r = &sel->cands[i];
        if (r->algo->coll != coll ||
            !braid_online_swappable(r, coll, sel->nranks))
            continue;
        double e = braid_candidate_estimate(sel, r, coll, bytes, mem);
        if (e >= 0 && e <= eb) {
            best = i;
            eb   = e;
        }
    }
    return best;
}

static int size_class(size_t bytes)
{
    return 63 - __builtin_clzll((unsigned long long)bytes);
}

/* The slot of the class of bytes, made on first use (NULL when out of
 * memory: the call then keeps the model's pick). */
static braid_online_slot_t *slot_of(braid_online_t *o, braid_coll_t coll,
                                    size_t bytes)
{
    if (o->slots[coll] == NULL)
        o->slots[coll] = calloc(BRAID_ONLINE_CLASSES, sizeof(**o->slots));
    return o->slots[coll] ? &o->slots[coll][size_class(bytes)] : NULL;
}

/* Whether online tuning has a say in a call of bytes on memory mem whose
 * table pick is pick: the cost model's picks and the tuning file's, on
 * host memory; never BRAID_ALGO's. */
static int has_say(const braid_online_t *o, braid_pick_t pick, size_t bytes,
                   uint32_t mem)
{
    return o->on && pick.idx >= 0 && pick.why != BRAID_WHY_OVERRIDE &&
           bytes > 0 && bytes <= o->max_bytes &&
           mem == braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
}

/* What a call of bytes runs when its class has settled: the winner, or
 * the pick where the winner cannot run this size of the class. */
static int settled_idx(const braid_selector_t    *sel,
                       const braid_online_slot_t *s, braid_coll_t coll,
                       size_t bytes, uint32_t mem, int pick)
{
    return braid_candidate_estimate(sel, &sel->cands[s->chosen], coll, bytes,
                                    mem) >= 0
               ? s->chosen
               : pick;
}

/* The tuning-file row a pick obeys (its ref is the row's cand), or NULL
 * for the cost model's picks. */
static const braid_tune_row_t *tune_row(braid_pick_t pick)
{
    if (pick.why != BRAID_WHY_TUNE || pick.ref == NULL)
        return NULL;
    return (const braid_tune_row_t *)(const void *)((const char *)pick.ref -
                                                    offsetof(braid_tune_row_t,
                                                             cand));
}

/* The slot that decides a host call of bytes whose table pick is pick, or
 * NULL where online tuning has no say. */
static braid_online_slot_t *slot_for(braid_comm_t *comm, braid_coll_t coll,
                                     size_t bytes, uint32_t mem,
                                     braid_pick_t pick)
{
    braid_online_t *o = &comm->online;
    if (!has_say(o, pick, bytes, mem))
        return NULL;
    braid_online_slot_t *s = slot_of(o, coll, bytes);
    if (s == NULL || s->state != BRAID_ONLINE_NEW)
        return s;
    /* The class's first call lists the rivals; every rank makes it with
     * the same size, so every rank lists the same.  A model pick that
     * cannot go on trial may have a stand-in that can (online.h). */
    s->coll   = coll;
    s->cls    = size_class(bytes);
    s->rounds = braid_online_rounds(&s->warm, bytes);
    s->idx[0] = pick.idx;
    s->model  = -1;
    s->why    = pick.why;
    if (pick.why == BRAID_WHY_COST && comm->sel.nnodes <= 1 &&
        o->stand_in >= 1.0) {
        s->idx[0] = braid_online_stand_in(&comm->sel, pick.idx, coll, bytes,
                                          mem, o->stand_in);
        if (s->idx[0] != pick.idx)
            s->model = pick.idx;
    }
    /* A tuning file's pick has as rivals what its row measured close to
     * it (none where the row has no times): the row was measured at one
     * size of its range, at another time, perhaps with the host otherwise
     * busy or its vCPUs elsewhere, so the live communicator settles those
     * that were close. */
    s->ncands = braid_online_rivals(s->idx, &comm->sel, tune_row(pick), coll,
                                    bytes, mem, o->within);
    s->state  = s->ncands > 1 ? BRAID_ONLINE_TRIAL : BRAID_ONLINE_OFF;
    if (s->state == BRAID_ONLINE_OFF)
        s->model = -1; /* nothing timed: the model's pick stays */
    return s;
}

/* Whether the settled class of s is watched (online.h): its winner's
 * calls are timed and now and then checked for drift. */
static int watching(const braid_online_t *o, const braid_online_slot_t *s)
{
    return o->drift > 0.0 && s->state == BRAID_ONLINE_SETTLED &&
           s->cls >= size_class(BRAID_ONLINE_LARGE) &&
           s->retrials < BRAID_ONLINE_RETRIALS;
}

/* What chose a slot's idx[0], for messages. */
static const char *pick_word(braid_why_t why)
{
    return why == BRAID_WHY_TUNE ? "tuning file" : "cost model";
}

/* What follows the name of the model's pick in a message: where idx[0]
 * stands in for it, which one and why; else nothing. */
static const char *stand_in_note(char *buf, size_t len,
                                 const braid_comm_t        *comm,
                                 const braid_online_slot_t *s)
{
    buf[0] = '\0';
    if (s->model >= 0)
        snprintf(buf, len, ", which does not fold in rank order (%s stood in)",
                 comm->sel.cands[s->idx[0]].name);
    return buf;
}

static void cache(braid_selector_t *sel, braid_coll_t coll, size_t bytes,
                  uint32_t mem, int idx)
{
    sel->last_bytes[coll] = bytes;
    sel->last_mem[coll]   = mem;
    sel->last_idx[coll]   = idx;
}

braid_status_t braid_online_select(braid_candidate_t   **cand,
                                   braid_online_slot_t **trial,
                                   braid_comm_t *comm, braid_coll_t coll,
                                   size_t bytes, uint32_t mem, int trial_ok)
{
    braid_selector_t *sel  = &comm->sel;
    braid_pick_t      pick = braid_select_find(sel, coll, bytes, mem);
    *trial                 = NULL;
    if (pick.idx < 0) /* the refusal, with its message */
        return braid_select(cand, sel, coll, bytes, mem);
    braid_online_slot_t *s   = slot_for(comm, coll, bytes, mem, pick);
    int                  idx = pick.idx;
    if (s != NULL && s->state == BRAID_ONLINE_SETTLED)
        idx = settled_idx(sel, s, coll, bytes, mem, pick.idx);
    if (s != NULL && s->state == BRAID_ONLINE_TRIAL) {
        /* Not cached: the next call of the class comes back here. */
        int round,
            turn = s->idx[braid_online_turn(&round, s->calls, s->ncands)];
        /* A size of the class that the candidate whose turn it is cannot
         * run (a cap inside the class) runs the pick, untimed. */
        if (trial_ok && braid_candidate_estimate(sel, &sel->cands[turn], coll,
                                                 bytes, mem) >= 0) {
            idx    = turn;
            *trial = s;
        }
    } else if (s != NULL && watching(&comm->online, s)) {
        /* Not cached either: every call of the class comes back here, and
         * the blocking ones that run the winner are timed. */
        if (trial_ok && idx == s->chosen) {
            s->last_bytes = bytes;
            *trial        = s;
        }
    } else
        cache(sel, coll, bytes, mem, idx);
    *cand = &sel->cands[idx];
    return BRAID_OK;
}

/* What each rank sends when a class settles: which class and candidates
 * (a rank whose calls differed would send others) and its medians. */
typedef struct settle_msg {
    int32_t coll, cls, ncands;
    int32_t idx[BRAID_ONLINE_MAX_CANDS];
    double  us[BRAID_ONLINE_MAX_CANDS];
} settle_msg_t;

static braid_status_t settle(braid_comm_t *comm, braid_online_slot_t *s)
{
    braid_coll_t c = s->coll;
    settle_msg_t msg;
    /* Padding included: the ranks compare the bytes before us. */
    memset(&msg, 0, sizeof(msg));
    msg.coll   = (int32_t)c;
    msg.cls    = s->cls;
    msg.ncands = s->ncands;
    for (int k = 0; k < s->ncands; k++) {
        msg.idx[k] = s->idx[k];
        msg.us[k]  = braid_online_mine(s, k);
    }
    for (int k = 0; k < s->ncands && braid_log_level() >= BRAID_LOG_DEBUG;
         k++) {
        char line[256] = "";
        for (int r = 0; r < s->rounds; r++)
            snprintf(line + strlen(line), sizeof(line) - strlen(line),
                     "%s%.1f",
                     r == s->warm ? " | "
                     : r          ? " "
                                  : "",
                     s->us[k][r]);
        braid_log(BRAID_LOG_DEBUG, LOG_COMP, "%s class %d: %s: %s us",
                  braid_coll_name(c), s->cls, comm->sel.cands[s->idx[k]].name,
                  line);
    }
    settle_msg_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t st =
        braid_bootstrap_allgather(comm->bs, &msg, all, sizeof(msg));
    for (int r = 0; st == BRAID_OK && r < comm->size; r++) {
        if (memcmp(&all[r], &msg, offsetof(settle_msg_t, us)) != 0) {
            st = braid_error(BRAID_ERR_MISMATCH,
                             "online tuning of %s: rank %d timed other "
                             "candidates than rank %d (their calls "
                             "differed)",
                             braid_coll_name(c), r, comm->rank);
            break;
        }
        for (int k = 0; k < s->ncands; k++)
            if (r == 0 || all[r].us[k] > s->agreed[k])
                s->agreed[k] = all[r].us[k];
    }
    free(all);
    if (st != BRAID_OK)
        return st;
    int won   = braid_online_decide(s->agreed, s->ncands, s->why);
    s->chosen = s->idx[won];
    s->period = braid_online_period(s->agreed[won], s->retrials);
    s->state  = BRAID_ONLINE_SETTLED;
    if (comm->rank == 0 && braid_log_level() >= BRAID_LOG_INFO) {
        char list[256] = "";
        for (int k = 0; k < s->ncands; k++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list),
                     "%s%s %.2f us", k ? ", " : "",
                     comm->sel.cands[s->idx[k]].name, s->agreed[k]);
        char note[128];
        braid_log(BRAID_LOG_INFO, LOG_COMP,
                  "%s of %zu-%zu B: %s (%s; %s: %s%s)", braid_coll_name(c),
                  (size_t)1 << msg.cls, ((size_t)2 << msg.cls) - 1,
                  comm->sel.cands[s->chosen].name, list, pick_word(s->why),
                  comm->sel.cands[s->model >= 0 ? s->model : s->idx[0]].name,
                  stand_in_note(note, sizeof(note), comm, s));
    }
    return BRAID_OK;
}

/* What each rank sends at a watch's check: which class (a rank whose calls
 * differed would send another) and its window's median. */
typedef struct check_msg {
    int32_t coll, cls, retrials, pad;
    double  us_per_byte;
} check_msg_t;

/* The end of a watch's period: the ranks agree on the fastest rank's
 * median, which sets the baseline after a trial or, off it by more than
 * the drift factor, re-opens the trial. */
static braid_status_t check(braid_comm_t *comm, braid_online_slot_t *s)
{
    int n =
        s->watched < BRAID_ONLINE_WINDOW ? s->watched : BRAID_ONLINE_WINDOW;
    double      v[BRAID_ONLINE_WINDOW];
    check_msg_t msg;
    memset(&msg, 0, sizeof(msg));
    memcpy(v, s->win, sizeof(double) * (size_t)n);
    msg.coll         = (int32_t)s->coll;
    msg.cls          = s->cls;
    msg.retrials     = s->retrials;
    msg.us_per_byte  = braid_median(v, n);
    s->watched       = 0;
    check_msg_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t st =
        braid_bootstrap_allgather(comm->bs, &msg, all, sizeof(msg));
    double now = msg.us_per_byte;
    for (int r = 0; st == BRAID_OK && r < comm->size; r++) {
        if (memcmp(&all[r], &msg, offsetof(check_msg_t, us_per_byte)) != 0)
            st = braid_error(BRAID_ERR_MISMATCH,
                             "online tuning of %s: rank %d watched another "
                             "class than rank %d (their calls differed)",
                             braid_coll_name(s->coll), r, comm->rank);
        else if (all[r].us_per_byte < now)
            now = all[r].us_per_byte;
    }
    free(all);
    if (st != BRAID_OK)
        return st;
    const char *name = comm->sel.cands[s->chosen].name;
    size_t      lo = (size_t)1 << s->cls, hi = ((size_t)2 << s->cls) - 1;
    if (s->base <= 0.0) {
        s->base = now;
        braid_log(BRAID_LOG_DEBUG, LOG_COMP,
                  "%s of %zu-%zu B: %s's baseline %.4g us per MiB",
                  braid_coll_name(s->coll), lo, hi, name, now * 1048576.0);
        return BRAID_OK;
    }
    if (!braid_online_drifted(s->base, now, comm->online.drift))
        return BRAID_OK;
    if (comm->rank == 0)
        braid_log(BRAID_LOG_INFO, LOG_COMP,
                  "%s of %zu-%zu B: %s now takes %.4g us per MiB, %.2fx its "
                  "%.4g after the trial: the trial re-opens (%d of %d)",
                  braid_coll_name(s->coll), lo, hi, name, now * 1048576.0,
                  now / s->base, s->base * 1048576.0, s->retrials + 1,
                  BRAID_ONLINE_RETRIALS);
    s->retrials++;
    s->base  = 0.0;
    s->calls = 0;
    memset(s->us, 0, sizeof(s->us));
    s->state = BRAID_ONLINE_TRIAL;
    return BRAID_OK;
}

braid_status_t braid_online_record(braid_comm_t *comm, braid_online_slot_t *s,
                                   double seconds)
{
    braid_status_t st;
    if (s->state == BRAID_ONLINE_SETTLED) {
        if (!watching(&comm->online, s) || s->last_bytes == 0)
            return BRAID_OK;
        s->win[s->watched % BRAID_ONLINE_WINDOW] =
            seconds * 1e6 / (double)s->last_bytes;
        if (++s->watched < s->period)
            return BRAID_OK;
        if ((st = check(comm, s)) != BRAID_OK) {
            s->state = BRAID_ONLINE_OFF;
            braid_comm_fail(comm, st, braid_last_error());
        }
        return st;
    }
    if (s->state != BRAID_ONLINE_TRIAL)
        return BRAID_OK;
    int round, k = braid_online_turn(&round, s->calls, s->ncands);
    if (round >= 0 && round < s->rounds)
        s->us[k][round] = seconds * 1e6;
    if (++s->calls < BRAID_ONLINE_CALLS(s->ncands, s->rounds))
        return BRAID_OK;
    st = settle(comm, s);
    if (st != BRAID_OK) {
        /* A peer is gone or called otherwise: no later call can agree
         * either, so the communicator fails as after any failed call. */
        s->state = BRAID_ONLINE_OFF;
        braid_comm_fail(comm, st, braid_last_error());
    }
    return st;
}

int braid_online_explain(braid_comm_t *comm, braid_coll_t coll, size_t bytes,
                         char *cand, size_t cand_len, char *why,
                         size_t why_len)
{
    braid_online_t *o    = &comm->online;
    uint32_t        host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    if (o->slots[coll] == NULL || bytes == 0)
        return 0;
    braid_online_slot_t *s = &o->slots[coll][size_class(bytes)];
    braid_pick_t pick      = braid_select_find(&comm->sel, coll, bytes, host);
    if (!has_say(o, pick, bytes, host) ||
        (s->state != BRAID_ONLINE_TRIAL && s->state != BRAID_ONLINE_SETTLED))
        return 0;
    const braid_candidate_t *cands     = comm->sel.cands;
    char                     list[256] = "";
    int idx = s->state == BRAID_ONLINE_SETTLED
                  ? settled_idx(&comm->sel, s, coll, bytes, host, pick.idx)
                  : pick.idx;
    for (int k = 0; k < s->ncands; k++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                 k ? ", " : "", cands[s->idx[k]].name);
    if (cand != NULL && cand_len > 0)
        snprintf(cand, cand_len, "%s", cands[idx].name);
    if (why == NULL || why_len == 0)
        return 1;
    char model[128];
    stand_in_note(model, sizeof(model), comm, s);
    if (s->state == BRAID_ONLINE_TRIAL) {
        snprintf(why, why_len,
                 "on trial (%d of %d calls: %s take turns); %s: %s%s",
                 s->calls, BRAID_ONLINE_CALLS(s->ncands, s->rounds), list,
                 pick_word(s->why), cands[pick.idx].name, model);
        return 1;
    }
    list[0] = '\0';
    for (int k = 0; k < s->ncands; k++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list),
                 "%s%s %.2f us", k ? ", " : "", cands[s->idx[k]].name,
                 s->agreed[k]);
    char again[96] = "";
    if (s->retrials > 0)
        snprintf(again, sizeof(again),
                 "; the trial re-opened %d time%s as "
                 "times drifted",
                 s->retrials, s->retrials > 1 ? "s" : "");
    snprintf(why, why_len,
             "measured on this communicator (%s: slowest rank's median of "
             "%d calls each%s); %s: %s%s",
             list, s->rounds - s->warm, again, pick_word(s->why),
             cands[pick.idx].name, model);
    return 1;
}
