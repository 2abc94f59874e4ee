/* braid-tune's order of the series within a turn (tools/tune_order.h): a
 * permutation, the same for the same turn (every rank computes it alone),
 * and one that puts each series after every other one over a round's
 * turns, where a fixed cycle would always give it the same predecessor. */
#include <string.h>

#include "../unit/check.h"
#include "tune_order.h"

#define M     7 /* braid-tune's series at a size: candidates + 3 */
#define TURNS 200

static int is_permutation(const int *perm, int m)
{
    int seen[M] = {0};
    for (int v = 0; v < m; v++) {
        if (perm[v] < 0 || perm[v] >= m || seen[perm[v]])
            return 0;
        seen[perm[v]] = 1;
    }
    return 1;
}

int main(void)
{
    int perm[M], again[M];

    for (int m = 1; m <= M; m++)
        for (int c = 0; c < 20; c++) {
            tune_turn_order(perm, m, 3, 1, c);
            CHECK(is_permutation(perm, m), "m %d turn %d: not a permutation",
                  m, c);
            tune_turn_order(again, m, 3, 1, c);
            CHECK(memcmp(perm, again, (size_t)m * sizeof(int)) == 0,
                  "m %d turn %d: two orders for one turn", m, c);
        }

    /* after[a][b]: turns in which series a ran right after series b */
    int after[M][M] = {{0}}, first[M] = {0};
    for (int c = 0; c < TURNS; c++) {
        tune_turn_order(perm, M, 5, 0, c);
        first[perm[0]]++;
        for (int v = 1; v < M; v++)
            after[perm[v]][perm[v - 1]]++;
    }
    for (int a = 0; a < M; a++) {
        int most = 0;
        for (int b = 0; b < M; b++) {
            if (a != b)
                CHECK(after[a][b] > 0,
                      "series %d never ran after %d in %d turns", a, b, TURNS);
            if (after[a][b] > most)
                most = after[a][b];
        }
        /* about TURNS / M each way; a fixed cycle gives one b every turn */
        CHECK(most < TURNS / 3, "series %d ran after one series in %d of %d",
              a, most, TURNS);
        CHECK(first[a] > 0, "series %d never ran first", a);
    }

    /* turns of other sizes and rounds are shuffled apart */
    int differ = 0;
    tune_turn_order(perm, M, 0, 0, 0);
    for (int i = 1; i < 8; i++) {
        tune_turn_order(again, M, i, 0, 0);
        differ += memcmp(perm, again, sizeof(perm)) != 0;
    }
    CHECK(differ > 0, "the first turn's order is the same at every size");

    /* The race: within 1.25x of the least median, or marked always; a
     * series with no time (< 0) only where marked.  The racers come in
     * order. */
    double med[M]    = {100, 123, 125, 300, 99, -1, 500};
    int    always[M] = {0, 0, 0, 0, 0, 1, 1}, race[M];
    int    n         = tune_race(race, med, always, M, 1.25);
    int    want[]    = {0, 1, 4, 5, 6};
    CHECK(n == 5, "%d series race on, not 5", n);
    for (int j = 0; j < 5 && j < n; j++)
        CHECK(race[j] == want[j], "racer %d is series %d, not %d", j,
              race[j], want[j]);
    always[5] = 0;
    n         = tune_race(race, med, always, M, 1.25);
    CHECK(n == 4 && race[3] == 6, "a series with no time raced on");
    CHECK(tune_race(race, med, always, M, 100.0) == 6,
          "a wide factor does not let every timed series race on");
    return check_summary("test_order");
}
