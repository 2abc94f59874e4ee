/* Small statistics over timings (stats.h). */
#include <stdlib.h>

#include "util/stats.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void braid_sort_doubles(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
}

double braid_median(double *v, int n)
{
    braid_sort_doubles(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
