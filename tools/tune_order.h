/* The order of braid-tune's series within one turn of a round
 * (tune_run.c), apart so that a unit test can check it. */
#ifndef BRAID_TOOLS_TUNE_ORDER_H
#define BRAID_TOOLS_TUNE_ORDER_H

/* perm[v]: the v-th of the m series to run in turn c of round r at size
 * i, a shuffle of 0..m-1 by a generator seeded with (i, r, c), so the
 * same on every rank (they must call the series' communicators in one
 * order).  A call's time depends on what the call before it left behind
 * (the caches' contents, dirty lines still to be written back), and one
 * fixed cycle would put every series after the same one in every turn, a
 * bias no number of rounds averages out; shuffled, every series follows
 * each of the others about equally often. */
void tune_turn_order(int *perm, int m, int i, int r, int c);

/* Which of a round's m series race on, timed in more turns, once every
 * series has had its first calls: into race[], in order, each q whose
 * med[q], series q's median call so far (the slowest rank's, the same on
 * every rank), is within `within` times the least of them, or whose
 * always[q] is set (auto and tuned, which the oracle gap judges).  Only
 * the fastest candidates decide the best forced time and the table's
 * pick, and a median of few calls of each is what spreads two series of
 * one candidate apart; a call of a slow candidate at a large size costs as
 * much as several of the fast ones, so the extra calls go where they
 * decide something.  Returns how many race on. */
int tune_race(int *race, const double *med, const int *always, int m,
              double within);

#endif
