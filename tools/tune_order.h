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

#endif
