/* Broadcasts from every root and checks the result; used to prove that a
 * plugin built out of tree is loaded and runs (BRAID_ALGO forces it, so a
 * missing plugin fails the first broadcast instead of falling back). */
#include <stdio.h>
#include <stdlib.h>

#include <braid/braid.h>

int main(void)
{
    braid_comm_t *comm;
    if (braid_init(&comm) != BRAID_OK) {
        fprintf(stderr, "braid_init: %s\n", braid_last_error());
        return 1;
    }
    int rank = braid_comm_rank(comm), size = braid_comm_size(comm), bad = 0;
    int32_t buf[1000];
    for (int root = 0; root < size; root++) {
        for (int i = 0; i < 1000; i++)
            buf[i] = rank == root ? root * 100000 + i : -1;
        braid_status_t st = braid_broadcast(buf, 1000, BRAID_I32, root, comm);
        if (st != BRAID_OK) {
            fprintf(stderr, "rank %d: broadcast from %d: %s\n", rank, root,
                    braid_last_error());
            return 1;
        }
        for (int i = 0; i < 1000; i++)
            bad += buf[i] != root * 100000 + i;
    }
    char cand[80], why[80];
    braid_comm_choice(comm, BRAID_COLL_BROADCAST, 4000, cand, sizeof(cand),
                      why, sizeof(why));
    printf("rank %d: %d wrong elements, broadcast ran %s (%s)\n", rank, bad,
           cand, why);
    braid_finalize(comm);
    return bad != 0;
}
