/* A minimal bootstrap program for launcher tests: finds its rank from the
 * environment, joins, allgathers its rank and prints what it learned.
 * `bs_hello N` does it N times in a row (init, use, destroy), as a program
 * calling braid_init again after braid_finalize would. */
#include <stdio.h>
#include <stdlib.h>

#include "bootstrap/bootstrap.h"
#include "util/log.h"

static int round_trip(void)
{
    braid_launch_t     l;
    braid_bootstrap_t *bs = NULL;
    braid_status_t     st = braid_launch_from_env(&l);
    if (st == BRAID_OK)
        st = braid_bootstrap_init(&l, &bs);
    if (st != BRAID_OK) {
        fprintf(stderr, "bs_hello: %s: %s\n", braid_status_str(st),
                braid_last_error());
        return 1;
    }
    int  size = braid_bootstrap_size(bs), rank = braid_bootstrap_rank(bs);
    int *all = malloc((size_t)size * sizeof(int));
    long sum = 0;
    if (all == NULL ||
        (st = braid_bootstrap_allgather(bs, &rank, all, sizeof(int))) !=
            BRAID_OK ||
        (st = braid_bootstrap_barrier(bs)) != BRAID_OK) {
        fprintf(stderr, "bs_hello: %s: %s\n", braid_status_str(st),
                braid_last_error());
        return 1;
    }
    for (int r = 0; r < size; r++)
        sum += all[r];
    printf("rank %d of %d via %s: sum=%ld\n", rank, size, l.launcher, sum);
    free(all);
    braid_bootstrap_destroy(bs);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < rounds; i++) {
        if (round_trip() != 0)
            return 1;
    }
    return 0;
}
