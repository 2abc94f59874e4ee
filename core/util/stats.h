/* Small statistics over timings (internal): the calibration and
 * braid-tune summarise repeated measurements the same way. */
#ifndef BRAID_CORE_STATS_H
#define BRAID_CORE_STATS_H

/* Sorts v[0..n) ascending. */
void braid_sort_doubles(double *v, int n);
/* The median of v[0..n) (n > 0; the mean of the middle two when n is
 * even).  Sorts v. */
double braid_median(double *v, int n);

#endif
