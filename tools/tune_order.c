/* braid-tune's order of the series within a turn, and which of them race
 * on (tune_order.h). */
#include <stdint.h>

#include "engine/common/util.h" /* braid_eng_mix64: header-only */
#include "tune_order.h"

void tune_turn_order(int *perm, int m, int i, int r, int c)
{
    uint64_t seed = ((uint64_t)i << 40) ^ ((uint64_t)r << 20) ^ (uint64_t)c;
    for (int q = 0; q < m; q++)
        perm[q] = q;
    /* Fisher-Yates, draw k of splitmix64's sequence from seed */
    for (int q = m - 1, k = 0; q > 0; q--, k++) {
        uint64_t z =
            braid_eng_mix64(seed + (uint64_t)k * 0x9e3779b97f4a7c15ull);
        int j = (int)(z % (uint64_t)(q + 1)), tmp = perm[q];
        perm[q] = perm[j];
        perm[j] = tmp;
    }
}

int tune_race(int *race, const double *med, const int *always, int m,
              double within)
{
    double least = -1;
    int    n     = 0;
    for (int q = 0; q < m; q++)
        if (med[q] >= 0 && (least < 0 || med[q] < least))
            least = med[q];
    for (int q = 0; q < m; q++)
        if (always[q] || (med[q] >= 0 && med[q] <= least * within))
            race[n++] = q;
    return n;
}
