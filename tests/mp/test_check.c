/* BRAID_CHECK=1 and BRAID_TUNE_FILE end to end, under braidrun -n N (N >= 3).
 *
 * Mismatched calls must fail on every rank with BRAID_ERR_MISMATCH naming the
 * difference, invalid arguments on one rank must fail every rank, and the
 * communicator must stay usable afterwards.  A tuning file read by a new
 * communicator must decide the candidate ("tuning file") where BRAID_ALGO
 * says nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>

static int failures;

#define EXPECT(cond, ...)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            failures++;                                                       \
            fprintf(stderr, "test_check rank %d: FAIL line %d: ", rank,       \
                    __LINE__);                                                \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
        }                                                                     \
    } while (0)

int main(void)
{
    setenv("BRAID_CHECK", "1", 1);
    braid_comm_t *comm;
    if (braid_init(&comm) != BRAID_OK) {
        fprintf(stderr, "test_check: braid_init: %s\n", braid_last_error());
        return 1;
    }
    int   rank = braid_comm_rank(comm), n = braid_comm_size(comm);
    float buf[100];
    for (int i = 0; i < 100; i++)
        buf[i] = 1.0f;

    /* 1. Matching calls pass. */
    braid_status_t st =
        braid_allreduce(buf, buf, 100, BRAID_F32, BRAID_SUM, comm);
    EXPECT(st == BRAID_OK && buf[0] == (float)n, "matching allreduce: %s",
           braid_last_error());

    /* 2. The last rank passes another count: everyone hears which. */
    size_t count = rank == n - 1 ? 99 : 100;
    st = braid_allreduce(buf, buf, count, BRAID_F32, BRAID_SUM, comm);
    char want[64];
    snprintf(want, sizeof(want), "rank %d calls allreduce(count 99", n - 1);
    EXPECT(st == BRAID_ERR_MISMATCH && strstr(braid_last_error(), want),
           "count mismatch: status %d, '%s'", st, braid_last_error());

    /* 3. Still usable. */
    for (int i = 0; i < 100; i++)
        buf[i] = 1.0f;
    st = braid_allreduce(buf, buf, 100, BRAID_F32, BRAID_SUM, comm);
    EXPECT(st == BRAID_OK && buf[99] == (float)n, "after a mismatch: %s",
           braid_last_error());

    /* 4. Invalid arguments on rank 1 fail every rank. */
    st = braid_allreduce(buf, buf, 100,
                         rank == 1 ? (braid_dtype_t)99 : BRAID_F32, BRAID_SUM,
                         comm);
    if (rank == 1)
        EXPECT(st == BRAID_ERR_INVALID_ARG, "own invalid dtype: %d '%s'", st,
               braid_last_error());
    else
        EXPECT(
            st == BRAID_ERR_MISMATCH &&
                strstr(braid_last_error(), "rank 1 calls invalid arguments"),
            "peer's invalid dtype: %d '%s'", st, braid_last_error());

    /* 5. Different roots, different collectives. */
    st = braid_broadcast(buf, 10, BRAID_F32, rank == 0 ? 0 : 1, comm);
    EXPECT(st == BRAID_ERR_MISMATCH && strstr(braid_last_error(), "root"),
           "root mismatch: %d '%s'", st, braid_last_error());
    st = rank == 0
             ? braid_barrier(comm)
             : braid_allgather(buf, buf + 10 * rank, 10, BRAID_F32, comm);
    EXPECT(st == BRAID_ERR_MISMATCH && strstr(braid_last_error(), "barrier") &&
               strstr(braid_last_error(), "allgather"),
           "collective mismatch: %d '%s'", st, braid_last_error());
    EXPECT(braid_barrier(comm) == BRAID_OK, "barrier after mismatches: %s",
           braid_last_error());

    /* 6. A tuning file decides where BRAID_ALGO says nothing. */
    char path[64];
    snprintf(path, sizeof(path), "/tmp/braid-test-tune-%d-%d", getpid(), rank);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "# forced by test_check\nallreduce * * 0 inf recdbl\n");
        fclose(f);
    }
    setenv("BRAID_TUNE_FILE", path, 1);
    unsetenv("BRAID_ALGO");
    braid_comm_t *tuned;
    st = braid_comm_split(comm, 0, rank, &tuned);
    EXPECT(st == BRAID_OK, "split with a tuning file: %s", braid_last_error());
    if (st == BRAID_OK) {
        char cand[80] = "", why[200] = "";
        st = braid_comm_choice(tuned, BRAID_COLL_ALLREDUCE, 8, cand,
                               sizeof(cand), why, sizeof(why));
        EXPECT(st == BRAID_OK && strncmp(cand, "recdbl@", 7) == 0 &&
                   strncmp(why, "tuning file line 2 (cost model: ", 32) == 0,
               "tuned choice: %s by %s", cand, why);
        for (int i = 0; i < 100; i++)
            buf[i] = 2.0f;
        st = braid_allreduce(buf, buf, 100, BRAID_F32, BRAID_SUM, tuned);
        EXPECT(st == BRAID_OK && buf[0] == 2.0f * n, "tuned allreduce: %s",
               braid_last_error());
        braid_finalize(tuned);
    }
    unlink(path);

    braid_finalize(comm);
    printf("test_check rank %d: %s\n", rank, failures ? "FAIL" : "PASS");
    return failures != 0;
}
