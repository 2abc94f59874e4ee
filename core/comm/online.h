/* Online tuning: the dispatcher settles close calls on the live
 * communicator.
 *
 * The cost model ranks candidates from calibrated link figures, but where two
 * of them are close, what decides is how the calls come (a stream, a lone
 * call after a barrier, other work between them), which no figure measured
 * at creation describes (docs/tuning.md, "Online tuning").  So for each
 * collective and power-of-two size class, the first blocking host calls take
 * turns among the model's pick and the candidates whose estimate lies within
 * BRAID_ONLINE_WITHIN of it (a candidate's lower estimate, for buffers from
 * anywhere or from braid_mem_alloc: the model cannot know which the ranks
 * pass, the trial times what they do); every rank times its own calls, the
 * ranks agree on the slowest rank's median per candidate over the bootstrap
 * channel, and from then on the class runs the fastest (a tuning file's pick
 * unless another beat it by more than BRAID_ONLINE_MARGIN).  Reductions only
 * swap algorithms that fold in rank order (BRAID_ALGO_RANK_ORDER), and on two
 * ranks those that combine through the core's kernels
 * (BRAID_ALGO_CORE_REDUCE), so no result changes by a bit.  Every rank makes
 * the same calls and agrees on the same times, so every rank runs the same
 * candidate in every call, trials included.  A tuning file's pick goes on
 * trial the same way, against the candidates its row measured within
 * BRAID_ONLINE_WITHIN of it (a row is measured at one size of its range, at
 * another time): the file narrows the trial by measurement where the model
 * narrows it by estimate.  The BRAID_ALGO override is obeyed as it is, and
 * BRAID_ONLINE=off obeys the file as it is too. */
#ifndef BRAID_CORE_ONLINE_H
#define BRAID_CORE_ONLINE_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

#include "select/select.h"

struct braid_comm;

/* Candidates on trial at most: the pick and its rivals, the cheapest first.
 * Below BRAID_ONLINE_LARGE a trial's calls cost microseconds, and on one
 * host five or six candidates (pipe and the send/recv schedules) often run
 * within 20% of each other there, where the model cannot order them: all
 * of them are timed.  From BRAID_ONLINE_LARGE a call of a slow candidate
 * costs milliseconds to seconds: fewer. */
#define BRAID_ONLINE_MAX_CANDS       6
#define BRAID_ONLINE_MAX_CANDS_LARGE 4
/* Turns of every candidate on trial; the first `warm` are not counted (a
 * candidate's first calls of a size on a communicator fault its buffers in
 * and run several times slower).  A turn is two calls in a row, and only
 * the second is timed: the first follows another candidate's call, while
 * in the application's steady state a call follows one of its own (the
 * waiting policy treats such a stream differently, comm/wait.c).  From
 * BRAID_ONLINE_LARGE bytes a call lasts long enough to time steadily and a
 * trial would cost seconds: fewer turns, but five timed, so that two
 * stalled calls of one rank (another process on its vCPU) are not that
 * rank's median, which the slowest rank's median would then carry.  Below
 * BRAID_ONLINE_SMALL a whole trial costs a few milliseconds while one
 * call's time moves with every tick of another process on its vCPU: more
 * turns, so that a few stalled calls do not move a candidate's median (a
 * class settles once per communicator; braid-bench and braid-tune warm up
 * for at most 256 calls of a trial, and a trial here stays under 200).
 * More turns do not change the context a trial times in, where the
 * send/recv schedules of a small call run slower than braid-tune's forced
 * series time them (docs/performance.md, "Issue 12: longer trials below
 * 64 KiB"). */
#define BRAID_ONLINE_ROUNDS       8
#define BRAID_ONLINE_WARM         2
#define BRAID_ONLINE_SMALL        ((size_t)64 << 10)
#define BRAID_ONLINE_ROUNDS_SMALL 16
#define BRAID_ONLINE_WARM_SMALL   2
#define BRAID_ONLINE_LARGE        ((size_t)1 << 20)
#define BRAID_ONLINE_ROUNDS_LARGE 6
#define BRAID_ONLINE_WARM_LARGE   1
#define BRAID_ONLINE_TURN         2
/* A slot's us[][] holds the longest trial. */
#define BRAID_ONLINE_ROUNDS_MAX BRAID_ONLINE_ROUNDS_SMALL
_Static_assert(BRAID_ONLINE_ROUNDS_LARGE <= BRAID_ONLINE_ROUNDS_MAX &&
                   BRAID_ONLINE_ROUNDS <= BRAID_ONLINE_ROUNDS_MAX,
               "a slot's us[][BRAID_ONLINE_ROUNDS_MAX] holds every trial");
/* Calls of a trial of n candidates in `rounds` turns each. */
#define BRAID_ONLINE_CALLS(n, rounds) ((n) * (rounds)*BRAID_ONLINE_TURN)
_Static_assert(BRAID_ONLINE_CALLS(BRAID_ONLINE_MAX_CANDS,
                                  BRAID_ONLINE_ROUNDS_SMALL) < 200,
               "a small trial stays under 200 calls");
/* Size classes: bytes in [2^b, 2^(b+1)). */
#define BRAID_ONLINE_CLASSES 64
/* A rival replaces a tuning file's pick only when faster by more than
 * this: the row timed more calls than a trial does, so within it both are
 * as good and the file's pick does not change with noise.  A cost-model
 * pick has no margin: the trial's times outrank the estimates. */
#define BRAID_ONLINE_MARGIN         0.05
/* Rivals within this factor of the pick's estimate: wide enough to cover
 * the model's known error.  pipe's estimate of a large call is up to about
 * five times below its measured time where more ranks than cores share the
 * copies, while pull's (read from a get path measured with every rank at
 * once) is close: with 3, pull never went on trial there
 * (docs/performance.md, "The window of online tuning"). */
#define BRAID_ONLINE_WITHIN_DEFAULT 5.0
#define BRAID_ONLINE_MAX_DEFAULT    ((size_t)256 << 20)

/* BRAID_ONLINE_STAND_IN's default.  On one host, a reduction on more
 * than two ranks whose model pick does not fold in rank order (ring,
 * recdbl, rabenseifner) cannot go on trial, and the model, fed by link
 * figures that move 2-3x from one calibration to the next on a busy host,
 * then sends every call of the class to a candidate nothing corrects
 * (recdbl@shm at 1.6x the best where a calibration's out-of-cache
 * send/recv figure came out high: docs/performance.md, "A rank-order
 * stand-in").  On one host the candidates that fold in rank order
 * (oneshot, twoshot, direct, pipe, pull, halving) span the same
 * schedules, so the cheapest of them that the model puts within this
 * factor of such a pick -- about the model's error between two candidates
 * -- stands in for it and goes on trial against its own rivals; every
 * result then folds in rank order.  Across hosts the pick is kept: there
 * the ring's and Rabenseifner's traffic between neighbours is what the
 * cabling rewards. */
#define BRAID_ONLINE_STAND_IN_DEFAULT 2.0

/* The watch of a settled class from BRAID_ONLINE_LARGE bytes on.  A trial
 * times its candidates within a second or so; which one wins can change
 * after it, for as long as the communicator lives: a VM's vCPUs move
 * between cores that share a cache and cores that do not within minutes,
 * and a copy path that leads in one placement runs several times slower in
 * the other (docs/performance.md, "The slow mode is where the two vCPUs
 * sit"), as a neighbour's load can do on a real host.  So every blocking
 * call of such a class that runs its winner is timed, per byte, and every
 * `period` of them the ranks agree on the median of the last
 * BRAID_ONLINE_WINDOW of them: the fastest rank's, as it arrived last and
 * waited for nobody, so that ranks arriving apart (the application's own
 * imbalance) do not count.  The first such figure after a trial is the
 * class's baseline; a later one off it by more than BRAID_ONLINE_DRIFT
 * either way re-opens the trial among the same candidates.  A check costs
 * one exchange over the bootstrap channel, so the period holds it to about
 * BRAID_ONLINE_CHECK_SHARE of the class's calls (at least a window), and
 * doubles with every re-opened trial; after BRAID_ONLINE_RETRIALS the
 * class stays as it is. */
#define BRAID_ONLINE_WINDOW        16
#define BRAID_ONLINE_CHECK_US      1000.0 /* what a check costs, at most */
#define BRAID_ONLINE_CHECK_SHARE   0.01
#define BRAID_ONLINE_PERIOD_MAX    4096
#define BRAID_ONLINE_RETRIALS      8
#define BRAID_ONLINE_DRIFT_DEFAULT 1.5

typedef enum {
    BRAID_ONLINE_NEW = 0, /* no call of the class yet */
    BRAID_ONLINE_OFF,     /* the model's pick has no close rival */
    BRAID_ONLINE_TRIAL,   /* calls take turns among the candidates */
    BRAID_ONLINE_SETTLED  /* chosen holds the winner */
} braid_online_state_t;

typedef struct braid_online_slot {
    braid_online_state_t state;
    braid_coll_t         coll;
    int                  cls; /* bytes in [2^cls, 2^(cls+1)) */
    int                  ncands;
    int                  rounds, warm; /* turns each, of them not timed */
    braid_why_t why;                   /* what picked idx[0]: model or file */
    int idx[BRAID_ONLINE_MAX_CANDS];   /* into sel->cands; [0]: the pick */
    int model;  /* the model's own pick where idx[0] stands in, else -1 */
    int calls;                         /* trial calls completed */
    int chosen;                        /* settled: into sel->cands */
    /* this rank's times (us) */
    double us[BRAID_ONLINE_MAX_CANDS][BRAID_ONLINE_ROUNDS_MAX];
    double agreed[BRAID_ONLINE_MAX_CANDS]; /* slowest rank's median (us) */
    /* The watch of a settled class (above). */
    int    period;     /* winner's calls between checks (set at settling) */
    int    watched;    /* winner's calls timed since the last check */
    int    retrials;   /* trials re-opened */
    size_t last_bytes; /* of the call handed out to be timed */
    double base;       /* agreed us per byte after the trial; 0: not yet */
    double win[BRAID_ONLINE_WINDOW]; /* this rank's us per byte, a ring */
} braid_online_slot_t;

typedef struct braid_online {
    int    on;        /* BRAID_ONLINE */
    double within;    /* BRAID_ONLINE_WITHIN: rivals' estimate / pick's */
    size_t max_bytes; /* BRAID_ONLINE_MAX: larger calls keep the model's */
    double drift;     /* BRAID_ONLINE_DRIFT: a factor >= 1; 0: no watch */
    double stand_in;  /* BRAID_ONLINE_STAND_IN: a factor >= 1; 0: none */
    braid_online_slot_t *slots[BRAID_COLL_COUNT]; /* [CLASSES], on use */
} braid_online_t;

/* Reads BRAID_ONLINE (on|off), BRAID_ONLINE_WITHIN (a factor >= 1),
 * BRAID_ONLINE_MAX (a size), BRAID_ONLINE_DRIFT and BRAID_ONLINE_STAND_IN
 * (0: off, or a factor >= 1); a malformed value is an error that points
 * at the fault.  Every rank must read the same (comm/setup.c compares). */
braid_status_t braid_online_read_env(braid_online_t *o);
void           braid_online_free(braid_online_t *o);

/* The candidate of a call the selector's one-entry cache did not answer:
 * the model's (or override's, or tuning file's) pick, or the class's
 * settled winner, or -- trial_ok (a blocking call on host memory) while
 * the class is on trial -- the candidate whose turn it is, with *trial set
 * to the slot to record its time in (else NULL); a trial_ok call that runs
 * a watched class's winner gets *trial too, to be timed for the watch.
 * Caches what neither a trial nor a watch will change. */
braid_status_t braid_online_select(braid_candidate_t   **cand,
                                   braid_online_slot_t **trial,
                                   struct braid_comm *comm, braid_coll_t coll,
                                   size_t bytes, uint32_t mem, int trial_ok);
/* A call of slot handed out to be timed (a trial's, or a watched winner's)
 * took seconds on this rank; after a trial's last one the ranks agree on
 * the winner, after a watch's period on whether the times drifted
 * (collective over the bootstrap channel, at the same call on every
 * rank). */
braid_status_t braid_online_record(struct braid_comm   *comm,
                                   braid_online_slot_t *slot, double seconds);
/* braid_comm_choice for host memory: 1 with cand and why filled when the
 * size's class is on trial or settled, else 0. */
int braid_online_explain(struct braid_comm *comm, braid_coll_t coll,
                         size_t bytes, char *cand, size_t cand_len, char *why,
                         size_t why_len);

/* Whether a trial may run candidate c in place of another for coll on a
 * communicator of nranks, and back: any candidate of a collective that
 * does not reduce, only a rank-order one (BRAID_ALGO_RANK_ORDER) of one
 * that does -- on two ranks also one that combines through the core's
 * kernels (BRAID_ALGO_CORE_REDUCE) -- so that a trial changes no bit of
 * any result.  braid-tune asks it too: a tuning-file pick that is not
 * swappable is obeyed without a trial. */
int braid_online_swappable(const braid_candidate_t *c, braid_coll_t coll,
                           int nranks);

/* Pure parts, for the unit test.  Which candidate (0..ncands) trial call
 * `call` runs, and in *round the round it is timed in (-1: not timed). */
int braid_online_turn(int *round, int call, int ncands);
/* The turns of a trial of a class whose first call has bytes, and in *warm
 * how many of them are not timed (above). */
int braid_online_rounds(int *warm, size_t bytes);
/* The median of this rank's timed rounds
 * of candidate k (us): rounds warm..rounds-1. */
double braid_online_mine(const braid_online_slot_t *slot, int k);
/* Which of agreed[0..n) wins, where what picked candidate 0 was why: 0
 * unless another is faster by more than the margin (a tuning file's pick:
 * BRAID_ONLINE_MARGIN; the model's: none); ties go to the lower index. */
int braid_online_decide(const double *agreed, int n, braid_why_t why);
/* Winner's calls between two checks of a watched class whose winner's
 * agreed time is us, after `retrials` re-opened trials. */
int braid_online_period(double us, int retrials);
/* Whether now (a check's figure) lies off base by more than factor,
 * either way. */
int braid_online_drifted(double base, double now, double factor);
/* The candidate that stands in for a reduction's model pick on one host
 * (BRAID_ONLINE_STAND_IN): where pick does not fold in rank order on
 * sel->nranks, the cheapest candidate that does, takes mem and estimates
 * within `factor` times pick's estimate; else pick itself. */
int braid_online_stand_in(const braid_selector_t *sel, int pick,
                          braid_coll_t coll, size_t bytes, uint32_t mem,
                          double factor);
/* The rivals of the pick idx[0]: fills idx[1..] with the candidates that
 * take mem and estimate within `within` times the pick's, cheapest first
 * -- or, with a tuning-file row, that can run the call and were measured
 * there within `within` times the pick's measured time (none where the row
 * has no time for the pick) -- for a reduction only when the pick and they
 * are all swappable on sel->nranks (braid_online_swappable), so that a
 * trial changes no bit of any result; returns the count including idx[0]. */
int braid_online_rivals(int *idx, const braid_selector_t *sel,
                        const braid_tune_row_t *row, braid_coll_t coll,
                        size_t bytes, uint32_t mem, double within);

#endif
