/* A braid program that skips braid_finalize, for test_finalize.sh.
 *
 *   early_exit none|one|all
 *
 * Every rank initialises and meets the others in a barrier; then with
 * "none" every rank finalizes, with "one" rank 1 exits 0 without
 * braid_finalize (the others ignore what their finalize says, as careless
 * programs do), with "all" nobody finalizes.  Every rank exits 0. */
#include <stdio.h>
#include <string.h>

#include <braid/braid.h>

int main(int argc, char **argv)
{
    braid_comm_t *comm;
    const char   *mode = argc > 1 ? argv[1] : "none";
    if (braid_init(&comm) != BRAID_OK || braid_barrier(comm) != BRAID_OK) {
        fprintf(stderr, "early_exit: %s\n", braid_last_error());
        return 2;
    }
    int skip = strcmp(mode, "all") == 0 ||
               (strcmp(mode, "one") == 0 && braid_comm_rank(comm) == 1);
    if (!skip)
        (void)braid_finalize(comm);
    return 0;
}
