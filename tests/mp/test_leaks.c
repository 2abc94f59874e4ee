/* Error paths leak nothing: under braidrun -n N (N >= 2), every rank
 * repeats each error path many times and checks that what a leak would
 * grow stays flat:
 *
 *   - open file descriptors (/proc/self/fd),
 *   - shared-memory mappings (/proc/self/maps lines under /dev/shm: the shm
 *     transport unlinks its segments right after mapping them, so a leaked
 *     one shows only there; UCX's posix segments count too),
 *   - this process's segment files left in /dev/shm (must be none),
 *   - threads (/proc/self/task).
 *
 * Heap leaks are LeakSanitizer's job in the ASan run (this test is in the
 * mp-quick suite for that).  The paths, each measured on its own after a
 * warm-up (first use may set up caches that live as long as the process):
 *
 *   split-bad-algo     comm_split with a malformed BRAID_ALGO (PARSE)
 *   split-mismatch     comm_split with BRAID_ALGO differing between ranks
 *                      (MISMATCH on every rank)
 *   split-free         comm_split + one all-reduce + braid_finalize, and a
 *                      split where one rank opts out
 *   invalid-args       invalid calls on a working communicator
 *   check-mismatch     BRAID_CHECK=1 calls whose count differs on one rank
 *   forced-missing     comm_split with BRAID_ALGO naming an algorithm and
 *                      a transport that no plugin has (NOT_FOUND at
 *                      split), and an all-reduce forced onto a candidate
 *                      that exists but declines the size (NOT_SUPPORTED
 *                      at the call)
 *   init-bad-algo      single-rank braid_init with a malformed BRAID_ALGO
 *   init-finalize      single-rank braid_init + braid_finalize
 *
 * Every failure is checked to be the documented one, so a path that starts
 * succeeding (and so no longer tests the error path) fails the test. */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>

#include "mp_common.h"

#define PROG "test_leaks"

static int         rank, size, failures;
static const char *step = "start";
/* Names with this process's id before braid_init: a dead process's whose
 * id was handed out again (a rank killed while it created its segment). */
static long stale_shm_files;
static char step_buf[128];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG " FAIL rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
}

/* ------------------------------------------------------------ resources */

typedef struct usage {
    long fds, shm_maps, shm_files, threads, maps;
} usage_t;

static long count_dir(const char *path, const char *prefix)
{
    DIR *d = opendir(path);
    long n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' &&
            (prefix == NULL ||
             strncmp(e->d_name, prefix, strlen(prefix)) == 0))
            n++;
    closedir(d);
    return n;
}

static usage_t usage_now(void)
{
    usage_t u = {0, 0, 0, 0, 0};
    /* The directory stream's own descriptor is open while it is counted. */
    u.fds     = count_dir("/proc/self/fd", NULL) - 1;
    u.threads = count_dir("/proc/self/task", NULL);
    /* The shm transport's names: braid-shm-<uid>-<pid>-<random>. */
    char mine[64];
    snprintf(mine, sizeof(mine), "braid-shm-%u-%ld-", (unsigned)getuid(),
             (long)getpid());
    u.shm_files = count_dir("/dev/shm", mine);

    FILE *f = fopen("/proc/self/maps", "r");
    char  line[4096];
    if (f == NULL) {
        u.maps = u.shm_maps = -1;
        return u;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        u.maps++;
        u.shm_maps += strstr(line, "/dev/shm/") != NULL;
    }
    fclose(f);
    return u;
}

static int grew_since(const usage_t *a, const usage_t *b)
{
    return b->fds > a->fds || b->shm_maps > a->shm_maps ||
           b->threads > a->threads || b->shm_files > stale_shm_files ||
           a->fds < 0 || a->shm_maps < 0;
}

/* What a grown count is made of, for the log: every descriptor's target,
 * the /dev/shm mappings and the threads' names. */
static void print_resources(const char *name)
{
    char path[300], target[256], line[4096];
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n             = readlink(path, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        fprintf(stderr, PROG " rank %d after %s: fd %s -> %s\n", rank, name,
                e->d_name, target);
    }
    if (d != NULL)
        closedir(d);
    FILE *f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, "/dev/shm/") != NULL)
            fprintf(stderr, PROG " rank %d after %s: map %s", rank, name,
                    line);
    if (f != NULL)
        fclose(f);
    d = opendir("/proc/self/task");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *c = fopen(path, "r");
        if (c != NULL && fgets(target, sizeof(target), c) != NULL)
            fprintf(stderr, PROG " rank %d after %s: thread %s %s", rank, name,
                    e->d_name, target);
        if (c != NULL)
            fclose(c);
    }
    if (d != NULL)
        closedir(d);
}

/* Runs path() warm times, then rounds times, and checks that nothing grew
 * over the second part.  A count that grew is read again for up to half a
 * second before it counts as a leak: a thread that pthread_join has
 * already returned for is listed in /proc until the kernel reaps it, and
 * a peer's last messages of the path may still be closing a connection;
 * a leak stays. */
static void measure(const char *name, void (*path)(void), int warm, int rounds)
{
    for (int i = 0; i < warm; i++)
        path();
    usage_t a = usage_now();
    for (int i = 0; i < rounds; i++)
        path();
    usage_t b = usage_now();

    int grew = grew_since(&a, &b);
    for (int i = 0; grew && i < 100; i++) {
        if (i == 0)
            printf("# rank %d: %s: fds %ld -> %ld, shm mappings %ld -> %ld, "
                   "threads %ld -> %ld, own /dev/shm files %ld: read again\n",
                   rank, name, a.fds, b.fds, a.shm_maps, b.shm_maps, a.threads,
                   b.threads, b.shm_files);
        usleep(5000);
        b    = usage_now();
        grew = grew_since(&a, &b);
    }
    printf("# rank %d: %-15s x%-4d fds %ld -> %ld, shm mappings %ld -> %ld, "
           "threads %ld -> %ld, own /dev/shm files %ld, all mappings %ld -> "
           "%ld%s\n",
           rank, name, rounds, a.fds, b.fds, a.shm_maps, b.shm_maps, a.threads,
           b.threads, b.shm_files, a.maps, b.maps, grew ? "  GREW" : "");
    if (grew) {
        print_resources(name);
        fail("%s repeated %d times: descriptors %ld -> %ld, shm mappings "
             "%ld -> %ld, threads %ld -> %ld, segment files left %ld",
             name, rounds, a.fds, b.fds, a.shm_maps, b.shm_maps, a.threads,
             b.threads, b.shm_files);
    }
}

/* ---------------------------------------------------------------- paths */

static braid_comm_t *world, *checked, *forced;
static int           not_null; /* *out starts here: a failure must clear it */

static void expect_status(const char *what, braid_status_t got,
                          braid_status_t want)
{
    if (got != want)
        fail("%s: returned %d (%s), expected %d (%s): %s", what, (int)got,
             braid_status_str(got), (int)want, braid_status_str(want),
             braid_last_error());
}

/* Splits world with BRAID_ALGO set to algo (unset for NULL), then puts the
 * old value back. */
static braid_status_t split_with_algo(const char *algo, int color,
                                      braid_comm_t **out)
{
    const char *old = getenv("BRAID_ALGO");
    char        saved[512];
    snprintf(saved, sizeof(saved), "%s", old ? old : "");
    if (algo)
        setenv("BRAID_ALGO", algo, 1);
    else
        unsetenv("BRAID_ALGO");
    braid_status_t st = braid_comm_split(world, color, rank, out);
    if (old)
        setenv("BRAID_ALGO", saved, 1);
    else
        unsetenv("BRAID_ALGO");
    return st;
}

static void path_split_bad_algo(void)
{
    braid_comm_t  *c  = (braid_comm_t *)&not_null;
    braid_status_t st = split_with_algo("allreduce:5K-1K=ring", 0, &c);
    expect_status("split with a malformed BRAID_ALGO", st, BRAID_ERR_PARSE);
    if (c != NULL) {
        fail("a failed split left *newcomm set");
        if (st == BRAID_OK)
            braid_finalize(c);
    }
}

static void path_split_mismatch(void)
{
    braid_comm_t  *c  = NULL;
    braid_status_t st = split_with_algo(
        rank == 0 ? "allreduce:ring" : "allreduce:recdbl", 0, &c);
    expect_status("split with BRAID_ALGO differing between ranks", st,
                  BRAID_ERR_MISMATCH);
    if (c != NULL)
        braid_finalize(c);
}

static void path_split_free(void)
{
    braid_comm_t  *c  = NULL;
    braid_status_t st = split_with_algo(NULL, 0, &c);
    expect_status("split", st, BRAID_OK);
    if (st == BRAID_OK) {
        int32_t in[4] = {1, 2, 3, rank}, out[4];
        st            = braid_allreduce(in, out, 4, BRAID_I32, BRAID_SUM, c);
        expect_status("allreduce on a split communicator", st, BRAID_OK);
        if (st == BRAID_OK &&
            (out[0] != size || out[3] != size * (size - 1) / 2))
            fail("allreduce on a split communicator: {%d,..,%d}", out[0],
                 out[3]);
        expect_status("finalize of a split", braid_finalize(c), BRAID_OK);
    }
    /* The last rank opts out: everyone else forms a communicator. */
    c  = NULL;
    st = split_with_algo(NULL, rank == size - 1 ? BRAID_UNDEFINED : 1, &c);
    expect_status("split with one rank opting out", st, BRAID_OK);
    if ((c == NULL) != (rank == size - 1))
        fail("split with one rank opting out: newcomm %s on rank %d",
             c ? "set" : "NULL", rank);
    if (c != NULL)
        expect_status("finalize of a split", braid_finalize(c), BRAID_OK);
}

static void path_invalid_args(void)
{
    static float     buf[64];
    braid_request_t *req = NULL;
    expect_status("allreduce(NULL, ...)",
                  braid_allreduce(NULL, buf, 4, BRAID_F32, BRAID_SUM, world),
                  BRAID_ERR_INVALID_ARG);
    expect_status(
        "allreduce with a bad dtype",
        braid_allreduce(buf, buf + 8, 4, (braid_dtype_t)99, BRAID_SUM, world),
        BRAID_ERR_INVALID_ARG);
    expect_status("iallreduce with a bad op",
                  braid_iallreduce(buf, buf + 8, 4, BRAID_F32, (braid_op_t)99,
                                   world, &req),
                  BRAID_ERR_INVALID_ARG);
    expect_status("broadcast with a bad root",
                  braid_broadcast(buf, 4, BRAID_F32, size, world),
                  BRAID_ERR_INVALID_ARG);
    expect_status("allgather with overlapping buffers",
                  braid_allgather(buf, buf + 1, 4, BRAID_F32, world),
                  BRAID_ERR_INVALID_ARG);
    braid_comm_t *sub = NULL;
    expect_status("split with a negative color",
                  braid_comm_split(world, -5, 0, &sub), BRAID_ERR_INVALID_ARG);
    if (sub != NULL)
        fail("an invalid split returned a communicator");
    if (req != NULL)
        fail("an invalid iallreduce returned a request");
}

static void path_check_mismatch(void)
{
    static float   buf[100];
    size_t         count = rank == size - 1 ? 99 : 100;
    braid_status_t st =
        braid_allreduce(buf, buf, count, BRAID_F32, BRAID_SUM, checked);
    expect_status("BRAID_CHECK=1 allreduce with one rank's count differing",
                  st, BRAID_ERR_MISMATCH);
    st = braid_broadcast(buf, 10, BRAID_F32, rank == 0 ? 0 : 1, checked);
    expect_status("BRAID_CHECK=1 broadcast with differing roots", st,
                  BRAID_ERR_MISMATCH);
}

/* oneshot stops at 4 MiB: forced above it, the call must fail, not fall
 * back silently. */
#define OVER_CAP (8u << 20)

static void forced_call(braid_comm_t *c, const char *what)
{
    static float   in[OVER_CAP / 4], out[OVER_CAP / 4];
    braid_status_t st =
        braid_allreduce(in, out, OVER_CAP / 4, BRAID_F32, BRAID_SUM, c);
    expect_status(what, st, BRAID_ERR_NOT_SUPPORTED);
    braid_request_t *req = NULL;
    st =
        braid_iallreduce(in, out, OVER_CAP / 4, BRAID_F32, BRAID_SUM, c, &req);
    if (st == BRAID_OK && req != NULL)
        st = braid_wait(req);
    expect_status(what, st, BRAID_ERR_NOT_SUPPORTED);
}

static void path_forced_missing(void)
{
    braid_comm_t *c = (braid_comm_t *)&not_null;
    expect_status("split with BRAID_ALGO=allreduce:nosuch@ucx",
                  split_with_algo("allreduce:nosuch@ucx", 0, &c),
                  BRAID_ERR_NOT_FOUND);
    if (c != NULL)
        fail("a failed split left *newcomm set");
    c = (braid_comm_t *)&not_null;
    expect_status("split with BRAID_ALGO=allreduce:ring@nosuchtl",
                  split_with_algo("allreduce:ring@nosuchtl", 0, &c),
                  BRAID_ERR_NOT_FOUND);
    if (c != NULL)
        fail("a failed split left *newcomm set");
    forced_call(forced, "allreduce of 8 MiB forced onto oneshot@shm");
}

/* Launcher variables hidden, braid_init makes a lone single-rank process. */
static const char *const launcher_vars[] = {
    "BRAID_RANK",           "BRAID_SIZE",         "BRAID_ADDR",
    "BRAID_JOB_KEY",        "BRAID_LISTEN_FD",    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "PMIX_NAMESPACE",     "RANK",
    "WORLD_SIZE",           "MASTER_ADDR",        "MASTER_PORT",
    "SLURM_PROCID",         "SLURM_NTASKS",       "SLURM_NPROCS",
    "SLURM_JOB_ID",         "TORCHELASTIC_RUN_ID"};
#define N_LAUNCHER (sizeof(launcher_vars) / sizeof(launcher_vars[0]))

static braid_status_t init_alone(const char *algo, braid_comm_t **c)
{
    static char saved[N_LAUNCHER][512];
    int         had[N_LAUNCHER];
    for (size_t i = 0; i < N_LAUNCHER; i++) {
        const char *v = getenv(launcher_vars[i]);
        had[i]        = v != NULL;
        snprintf(saved[i], sizeof(saved[i]), "%s", v ? v : "");
        unsetenv(launcher_vars[i]);
    }
    if (algo)
        setenv("BRAID_ALGO", algo, 1);
    braid_status_t st = braid_init(c);
    unsetenv("BRAID_ALGO");
    for (size_t i = 0; i < N_LAUNCHER; i++)
        if (had[i])
            setenv(launcher_vars[i], saved[i], 1);
    return st;
}

static void path_init_bad_algo(void)
{
    braid_comm_t  *c  = (braid_comm_t *)&not_null;
    braid_status_t st = init_alone("bogus:ring", &c);
    expect_status("single-rank braid_init with a malformed BRAID_ALGO", st,
                  BRAID_ERR_PARSE);
    if (c != NULL) {
        fail("a failed braid_init left *comm set");
        if (st == BRAID_OK)
            braid_finalize(c);
    }
}

static void path_init_finalize(void)
{
    braid_comm_t  *c  = NULL;
    braid_status_t st = init_alone(NULL, &c);
    expect_status("single-rank braid_init", st, BRAID_OK);
    if (st == BRAID_OK)
        expect_status("single-rank braid_finalize", braid_finalize(c),
                      BRAID_OK);
}

/* --------------------------------------------------------------- driver */

static braid_comm_t *split_or_die(const char *algo, const char *check)
{
    braid_comm_t *c = NULL;
    if (check)
        setenv("BRAID_CHECK", check, 1);
    braid_status_t st = split_with_algo(algo, 0, &c);
    unsetenv("BRAID_CHECK");
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "split with BRAID_ALGO=%s BRAID_CHECK=%s",
                 algo ? algo : "(unset)", check ? check : "(unset)");
    return c;
}

static void run(const char *name, void (*path)(void), int warm, int rounds)
{
    snprintf(step_buf, sizeof(step_buf), "%s", name);
    step = step_buf;
    measure(name, path, warm, rounds);
}

int main(int argc, char **argv)
{
    int scale =
        argc > 2 && strcmp(argv[1], "--scale") == 0 ? atoi(argv[2]) : 1;
    if (scale < 1) {
        fprintf(stderr, "usage: " PROG " [--scale N]  (N >= 1 multiplies "
                        "the rounds)\n");
        return 2;
    }
    mp_watchdog(PROG, 280, &step);
    stale_shm_files = usage_now().shm_files;
    /* The choices every rank is given must match; these tests vary them. */
    unsetenv("BRAID_ALGO");
    unsetenv("BRAID_CHECK");
    step              = "braid_init";
    braid_status_t st = braid_init(&world);
    if (st != BRAID_OK)
        mp_fatal(PROG, -1, st, "braid_init");
    rank = braid_comm_rank(world);
    size = braid_comm_size(world);
    if (size < 2) {
        fprintf(stderr, PROG ": needs at least 2 ranks (run it under "
                             "braidrun -n 2)\n");
        braid_finalize(world);
        return 1;
    }
    step    = "set-up";
    checked = split_or_die(NULL, "1");
    forced  = split_or_die("allreduce:oneshot@shm", NULL);

    run("split-bad-algo", path_split_bad_algo, 3, 10 * scale);
    run("split-mismatch", path_split_mismatch, 3, 10 * scale);
    run("split-free", path_split_free, 3, 10 * scale);
    run("invalid-args", path_invalid_args, 3, 200 * scale);
    run("check-mismatch", path_check_mismatch, 3, 100 * scale);
    run("forced-missing", path_forced_missing, 3, 100 * scale);
    /* Last: a single-rank braid_init also renames this process's log
     * prefix to rank 0. */
    run("init-bad-algo", path_init_bad_algo, 3, 20 * scale);
    run("init-finalize", path_init_finalize, 3, 10 * scale);

    step = "final barrier";
    st   = braid_barrier(world);
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "final barrier");
    braid_finalize(forced);
    braid_finalize(checked);
    braid_finalize(world);
    printf(PROG " rank %d/%d: %s\n", rank, size, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
