/* braid-tune's order of the series within a turn (tune_order.h). */
#include <stdint.h>

#include "tune_order.h"

void tune_turn_order(int *perm, int m, int i, int r, int c)
{
    uint64_t x = ((uint64_t)i << 40) ^ ((uint64_t)r << 20) ^ (uint64_t)c;
    for (int q = 0; q < m; q++)
        perm[q] = q;
    for (int q = m - 1; q > 0; q--) {
        /* splitmix64: one step per draw */
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        int j = (int)(z % (uint64_t)(q + 1)), tmp = perm[q];
        perm[q] = perm[j];
        perm[j] = tmp;
    }
}
