/* Online tuning end to end (docs/tuning.md, "Online tuning"), under
 * braidrun: with BRAID_ONLINE_WITHIN large enough that every candidate is a
 * rival, a size class goes on trial at its first call, every call of the
 * trial gives the right result on every rank (the candidates take turns),
 * the class settles after the trial's calls on the same call everywhere,
 * and every rank then names the same candidate; non-blocking calls run
 * while a class is on trial and are not counted; BRAID_ALGO keeps a class
 * off trial.  A tuning file's pick goes on trial against what its row
 * measured close to it, and BRAID_ONLINE=off obeys the file as it is.  Run
 * once as is (trials), once with --forced under BRAID_ALGO, and once with
 * --watch under BRAID_ONLINE_DRIFT=1: a settled class of 1 MiB re-opens
 * its trial at the watch's second check (the first sets the baseline; with
 * a factor of 1 any change re-opens it), on the same call everywhere, and
 * settles again saying so.  --stand-in and --no-stand-in: a model pick
 * that does not fold in rank order and the candidate that stands in for
 * it (stand_in()). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>

#include "mp_common.h"

#define PROG "test_online"

static int rank, size;

/* A failed check ends this rank; braidrun then ends the job. */
static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, PROG " rank %d: FAIL %s\n", rank, what);
        exit(1);
    }
}

/* "on trial", "measured" or "cost model", and the candidate. */
static const char *state(braid_comm_t *comm, size_t bytes, char *cand,
                         size_t len)
{
    static char    why[512];
    braid_status_t st = braid_comm_choice(comm, BRAID_COLL_ALLREDUCE, bytes,
                                          cand, len, why, sizeof(why));
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "braid_comm_choice");
    return why;
}

/* Every rank's candidate name agrees with rank 0's. */
static int same_everywhere(braid_comm_t *comm, const char *cand)
{
    char mine[64] = {0}, *all = calloc((size_t)size, sizeof(mine));
    snprintf(mine, sizeof(mine), "%s", cand);
    braid_status_t st =
        braid_allgather(mine, all, sizeof(mine), BRAID_U8, comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "allgather of the names");
    int ok = 1;
    for (int r = 0; r < size; r++)
        ok &= strcmp(all + (size_t)r * sizeof(mine), mine) == 0;
    free(all);
    return ok;
}

/* One all-reduce of count floats, checked: element i of rank r is
 * i % 5 + r, exact in f32. */
static void one_call(braid_comm_t *comm, float *s, float *r, size_t count,
                     int nonblocking)
{
    for (size_t i = 0; i < count; i++) {
        s[i] = (float)(i % 5 + (size_t)rank);
        r[i] = -1.0f;
    }
    braid_status_t st;
    if (nonblocking) {
        braid_request_t *req;
        st = braid_iallreduce(s, r, count, BRAID_F32, BRAID_SUM, comm, &req);
        if (st == BRAID_OK)
            st = braid_wait(req);
    } else
        st = braid_allreduce(s, r, count, BRAID_F32, BRAID_SUM, comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "allreduce of %zu floats", count);
    double base = (double)size * (size - 1) / 2;
    for (size_t i = 0; i < count; i++)
        if ((double)r[i] != (double)size * (double)(i % 5) + base) {
            fprintf(stderr, PROG " rank %d: element %zu is %g\n", rank, i,
                    (double)r[i]);
            exit(1);
        }
}

/* A tuning file at path holding one row (after its comment line). */
static void write_row(const char *path, const char *row)
{
    FILE *f = fopen(path, "w");
    check(f != NULL, "a tuning file in /tmp");
    if (f == NULL)
        return;
    fprintf(f, "# test_online\n%s\n", row);
    fclose(f);
}

/* --watch: a settled class of 1 MiB re-opens its trial at its watch's
 * second check (BRAID_ONLINE_DRIFT=1), on the same call everywhere, and
 * settles again saying so; cand gets the winner. */
static void watch_class(braid_comm_t *comm, char *cand, size_t cand_len)
{
    char         msg[600];
    const char  *why;
    const size_t big = (1u << 20) / sizeof(float);
    float *bs = malloc(big * sizeof(float)), *br = malloc(big * sizeof(float));
    int    calls = 0, reopened = 0;
    one_call(comm, bs, br, big, 0);
    why = state(comm, big * sizeof(float), cand, cand_len);
    snprintf(msg, sizeof(msg), "1 MiB on trial at its first call: %s", why);
    check(strncmp(why, "on trial", 8) == 0, msg);
    while (strncmp(why, "on trial", 8) == 0 && calls++ < 200) {
        one_call(comm, bs, br, big, 0);
        why = state(comm, big * sizeof(float), cand, cand_len);
    }
    snprintf(msg, sizeof(msg), "1 MiB settled: %s", why);
    check(strncmp(why, "measured", 8) == 0, msg);
    /* Two periods of at most the cap each (online.h). */
    for (calls = 0; calls < 2 * 4096 + 16 && !reopened; calls++) {
        one_call(comm, bs, br, big, calls % 7 == 3);
        why      = state(comm, big * sizeof(float), cand, cand_len);
        reopened = strncmp(why, "on trial (0 of ", 15) == 0;
    }
    snprintf(msg, sizeof(msg), "the trial re-opened within %d calls: %s",
             calls, why);
    check(reopened, msg);
    int at = calls, all_at = 0;
    check(braid_allreduce(&at, &all_at, 1, BRAID_I32, BRAID_MAX, comm) ==
                  BRAID_OK &&
              all_at == at,
          "the trial re-opened at the same call everywhere");
    for (calls = 0; calls < 200 && strncmp(why, "on trial", 8) == 0; calls++) {
        one_call(comm, bs, br, big, 0);
        why = state(comm, big * sizeof(float), cand, cand_len);
    }
    snprintf(msg, sizeof(msg), "settled again, saying so: %s", why);
    check(strncmp(why, "measured", 8) == 0 &&
              strstr(why, "the trial re-opened 1 time as times drifted") !=
                  NULL,
          msg);
    check(same_everywhere(comm, cand), "every rank names the same winner");
    free(bs);
    free(br);
}

/* --stand-in (4 ranks, BRAID_PLUGINS=shm,ucx,p2p): the model picks a
 * reduction that does not fold in rank order (rabenseifner or recdbl at
 * 64 KiB); halving, which does, stands in for it and goes on trial, the
 * reason says so, and the class settles on a halving candidate, the same
 * everywhere.  --no-stand-in (BRAID_ONLINE_STAND_IN=0): the model's pick
 * runs, off trial. */
static void stand_in(braid_comm_t *comm, int on, char *cand, size_t cand_len)
{
    char         msg[700];
    const char  *why;
    const size_t count = 16384, bytes = count * sizeof(float);
    float       *s = malloc(bytes), *r = malloc(bytes);
    int          calls = 0;
    one_call(comm, s, r, count, 0);
    why = state(comm, bytes, cand, cand_len);
    if (!on) {
        snprintf(msg, sizeof(msg), "no stand-in, the model's pick: %s (%s)",
                 cand, why);
        check(strncmp(why, "on trial", 8) != 0 &&
                  strstr(why, "stood in") == NULL &&
                  strncmp(cand, "halving@", 8) != 0,
              msg);
        goto out;
    }
    snprintf(msg, sizeof(msg), "on trial with a stand-in: %s", why);
    check(strncmp(why, "on trial", 8) == 0 &&
              strstr(why, ", which does not fold in rank order (halving@") !=
                  NULL &&
              strstr(why, " stood in)") != NULL,
          msg);
    while (strncmp(why, "on trial", 8) == 0 && calls++ < 200) {
        one_call(comm, s, r, count, 0);
        why = state(comm, bytes, cand, cand_len);
    }
    snprintf(msg, sizeof(msg), "settled on a stand-in: %s (%s)", cand, why);
    check(strncmp(why, "measured", 8) == 0 &&
              strncmp(cand, "halving@", 8) == 0 &&
              strstr(why, "stood in)") != NULL,
          msg);
    check(same_everywhere(comm, cand), "every rank names the same winner");
out:
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    int            forced = argc > 1 && strcmp(argv[1], "--forced") == 0;
    braid_comm_t  *comm;
    braid_status_t st = braid_init(&comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, -1, st, "braid_init");
    rank = braid_comm_rank(comm);
    size = braid_comm_size(comm);

    const size_t count = 3000, bytes = count * sizeof(float);
    float       *s = malloc(bytes), *r = malloc(bytes);
    char         cand[64], msg[600];
    const char  *why = state(comm, bytes, cand, sizeof(cand));
    snprintf(msg, sizeof(msg), "before any call: %s", why);
    check(strncmp(why, "on trial", 8) != 0, msg);

    if (argc > 1 && (strcmp(argv[1], "--stand-in") == 0 ||
                     strcmp(argv[1], "--no-stand-in") == 0)) {
        stand_in(comm, strcmp(argv[1], "--stand-in") == 0, cand,
                 sizeof(cand));
        goto out;
    }
    if (argc > 1 && strcmp(argv[1], "--watch") == 0) {
        watch_class(comm, cand, sizeof(cand));
        goto out;
    }
    if (forced) {
        for (int i = 0; i < 80; i++)
            one_call(comm, s, r, count, 0);
        why = state(comm, bytes, cand, sizeof(cand));
        snprintf(msg, sizeof(msg), "BRAID_ALGO keeps it off trial: %s", why);
        check(strstr(why, "override") != NULL, msg);
        goto out;
    }

    /* The first call puts the class on trial; a non-blocking call in the
     * middle is not counted. */
    one_call(comm, s, r, count, 0);
    why = state(comm, bytes, cand, sizeof(cand));
    snprintf(msg, sizeof(msg), "on trial after one call: %s", why);
    check(strncmp(why, "on trial (1 of ", 15) == 0, msg);
    int total = atoi(why + 15);
    snprintf(msg, sizeof(msg), "the trial's length %d (%s)", total, why);
    /* 2..6 candidates, 16 turns of 2 calls each (12000 B: below
     * BRAID_ONLINE_SMALL) */
    check(total >= 64 && total <= 192 && total % 32 == 0, msg);
    one_call(comm, s, r, count, 1);
    why = state(comm, bytes, cand, sizeof(cand));
    snprintf(msg, sizeof(msg), "a non-blocking call is not counted: %s", why);
    check(strncmp(why, "on trial (1 of ", 15) == 0, msg);
    for (int i = 1; i < total - 1; i++)
        one_call(comm, s, r, count, 0);
    why = state(comm, bytes, cand, sizeof(cand));
    snprintf(msg, sizeof(msg), "one call before the end: %s", why);
    check(strncmp(why, "on trial", 8) == 0, msg);
    one_call(comm, s, r, count, 0);
    why = state(comm, bytes, cand, sizeof(cand));
    snprintf(msg, sizeof(msg), "settled after %d calls: %s", total, why);
    check(strncmp(why, "measured on this communicator", 29) == 0, msg);
    check(same_everywhere(comm, cand), "every rank names the same candidate");
    /* The settled class: calls keep working, the same size or another in
     * the class. */
    for (int i = 0; i < 5; i++)
        one_call(comm, s, r, count - (size_t)i * 100, i % 2);
    why = state(comm, bytes - 400, cand, sizeof(cand));
    snprintf(msg, sizeof(msg), "the whole class is settled: %s", why);
    check(strncmp(why, "measured", 8) == 0, msg);

    /* A rival capped inside the class: oneshot runs up to 4 MiB, and the
     * class [4 MiB, 8 MiB) goes on trial at exactly 4 MiB; a call of the
     * class it cannot run takes the pick instead, untimed, and every
     * call stays right.  The rivals come from a tuning row (pipe, oneshot
     * measured close), not from the model: which four candidates estimate
     * cheapest moves with the calibration (under a sanitizer pipe@ucx
     * comes before oneshot@shm). */
    char path[64];
    snprintf(path, sizeof(path), "/tmp/braid-test-online-%d-%d", getpid(),
             rank);
    write_row(path, "allreduce * * * 4M 8M pipe@shm at 4194304 "
                    "pipe@shm=10.0 oneshot@shm=11.0");
    setenv("BRAID_TUNE_FILE", path, 1);
    braid_comm_t *sub = NULL;
    st                = braid_comm_split(comm, 0, rank, &sub);
    unsetenv("BRAID_TUNE_FILE");
    snprintf(msg, sizeof(msg), "a split with the 4 MiB row: %s",
             braid_status_str(st));
    check(st == BRAID_OK, msg);
    const size_t big = (4u << 20) / sizeof(float);
    float       *bs  = malloc((big + 1) * sizeof(float)),
          *br        = malloc((big + 1) * sizeof(float));
    one_call(sub, bs, br, big, 0);
    why = state(sub, big * sizeof(float), cand, sizeof(cand));
    snprintf(msg, sizeof(msg), "4 MiB on trial with oneshot: %s", why);
    check(strncmp(why, "on trial", 8) == 0 &&
              strstr(why, "pipe@shm, oneshot@shm take turns") != NULL,
          msg);
    for (int i = 0; i < 200 && strncmp(why, "on trial", 8) == 0; i++) {
        one_call(sub, bs, br, big + (size_t)(i % 2), 0);
        why = state(sub, big * sizeof(float), cand, sizeof(cand));
    }
    snprintf(msg, sizeof(msg), "the capped class settled: %s", why);
    check(strncmp(why, "measured", 8) == 0, msg);
    check(same_everywhere(sub, cand), "every rank names the same winner");
    braid_finalize(sub);
    free(bs);
    free(br);

    /* Ranks that disagree on the online settings would run different
     * candidates in the same call: the split refuses it on every rank,
     * naming the variables. */
    setenv("BRAID_ONLINE_WITHIN", rank == 0 ? "2" : "4", 1);
    st = braid_comm_split(comm, 0, rank, &sub);
    unsetenv("BRAID_ONLINE_WITHIN");
    snprintf(msg, sizeof(msg),
             "a split with BRAID_ONLINE_WITHIN differing between ranks: %s: "
             "%s",
             braid_status_str(st), st == BRAID_OK ? "" : braid_last_error());
    check(st == BRAID_ERR_MISMATCH && sub == NULL &&
              strstr(braid_last_error(), "BRAID_ONLINE_WITHIN") != NULL,
          msg);
    if (sub != NULL)
        braid_finalize(sub);
    /* The same values everywhere: the split works. */
    setenv("BRAID_ONLINE_WITHIN", "4", 1);
    st = braid_comm_split(comm, 0, rank, &sub);
    unsetenv("BRAID_ONLINE_WITHIN");
    snprintf(msg, sizeof(msg), "a split with BRAID_ONLINE_WITHIN=4 on every "
                               "rank: %s",
             braid_status_str(st));
    check(st == BRAID_OK, msg);
    if (st == BRAID_OK)
        braid_finalize(sub);

    /* A tuning file: its row picks twoshot and measured oneshot close to
     * it, pipe far off (20x) and recdbl, which does not fold in rank
     * order, closest of all.  The trial is twoshot against oneshot alone --
     * on two ranks recdbl too, whose x0 op x1 is the rank-order result
     * there (BRAID_ALGO_CORE_REDUCE) -- and the messages name the file as
     * what picked. */
    const char *turns = size == 2 ? "twoshot@shm, recdbl@shm, oneshot@shm "
                                    "take turns); tuning file: twoshot@shm"
                                  : "twoshot@shm, oneshot@shm take turns); "
                                    "tuning file: twoshot@shm";
    char        row[160];
    snprintf(row, sizeof(row),
             "allreduce * * * 0 64K twoshot@shm at %zu twoshot@shm=10.0 "
             "oneshot@shm=12.0 pipe@shm=200.0 recdbl@shm=9.0",
             bytes);
    write_row(path, row);
    setenv("BRAID_TUNE_FILE", path, 1);
    setenv("BRAID_ONLINE_WITHIN", "5", 1);
    for (int off = 0; off < 2; off++) {
        if (off)
            setenv("BRAID_ONLINE", "off", 1);
        st = braid_comm_split(comm, 0, rank, &sub);
        snprintf(msg, sizeof(msg), "a split with a tuning file: %s",
                 braid_status_str(st));
        check(st == BRAID_OK, msg);
        one_call(sub, s, r, count, 0);
        why = state(sub, bytes, cand, sizeof(cand));
        snprintf(msg, sizeof(msg), "the file's pick %s: %s",
                 off ? "obeyed (BRAID_ONLINE=off)" : "on trial", why);
        check(off ? strncmp(why, "tuning file line 2", 18) == 0 &&
                        strncmp(cand, "twoshot@", 8) == 0
                  : strncmp(why, "on trial (1 of ", 15) == 0 &&
                        strstr(why, turns) != NULL,
              msg);
        for (int i = 0; i < 200 && strncmp(why, "on trial", 8) == 0; i++) {
            one_call(sub, s, r, count, 0);
            why = state(sub, bytes, cand, sizeof(cand));
        }
        snprintf(msg, sizeof(msg), "after the trial: %s", why);
        check(off ? strncmp(why, "tuning file line 2", 18) == 0
                  : strncmp(why, "measured on this communicator", 29) == 0 &&
                        strstr(why, "tuning file: twoshot@shm") != NULL &&
                        (strncmp(cand, "twoshot@", 8) == 0 ||
                         strncmp(cand, "oneshot@", 8) == 0 ||
                         (size == 2 && strncmp(cand, "recdbl@", 7) == 0)),
              msg);
        check(same_everywhere(sub, cand), "every rank names the same");
        braid_finalize(sub);
    }
    unsetenv("BRAID_ONLINE");
    unsetenv("BRAID_ONLINE_WITHIN");
    unsetenv("BRAID_TUNE_FILE");
    unlink(path);
out:
    free(s);
    free(r);
    if (rank == 0)
        printf(PROG ": %d ranks ok (%s): %s\n", size, cand,
               forced                                           ? "forced"
               : argc > 1 && strcmp(argv[1], "--watch") == 0 ? "watch"
                                                                : "trial");
    return braid_finalize(comm) == BRAID_OK ? 0 : 1;
}
