/* The failure detector of the bootstrap channel (braid_bootstrap_health)
 * and the ABORT frames behind it, across real processes:
 *   - a rank killed by SIGKILL: the root and the others report it, by rank,
 *     host and pid, within a second, and keep reporting the same error;
 *   - the root killed: everyone reports "rank 0 was lost";
 *   - messages of a later operation already in flight are never consumed;
 *   - a rank dying while the root blocks on another rank in an operation;
 *   - a rank (or the root) failing on its own: the others learn its reason;
 *   - a split channel names its own ranks, with the victim's pid. */
#include <sys/mman.h>

#include "bs_test.h"

#define LIMIT_S  1.0 /* the issue: every survivor knows within a second */
#define GIVEUP_S 5.0 /* a detector that says nothing for this long failed */

typedef struct {
    int lfd, port;
} net_t;

/* Shared between the forked ranks (MAP_SHARED before the fork). */
typedef struct {
    volatile double death; /* braid_now_s() just before the SIGKILL */
    volatile int    victim_pid;
    volatile int    gave_up; /* a rank called braid_bootstrap_abort */
} shared_t;

static net_t     net;
static shared_t *sh;

static braid_bootstrap_t *join(int rank, int size)
{
    braid_launch_t     l  = test_launch(rank, size, net.lfd, net.port);
    braid_bootstrap_t *bs = NULL;
    if (rank != 0)
        close(net.lfd);
    RCHECK(braid_bootstrap_init(&l, &bs) == BRAID_OK);
    return bs;
}

static void die(void)
{
    sh->victim_pid = (int)getpid();
    sh->death      = test_now();
    kill(getpid(), SIGKILL);
    for (;;)
        pause();
}

/* Calls the detector every millisecond, as the core's wait loop would, until
 * it reports something (or GIVEUP_S passed: then BRAID_OK). */
static braid_status_t watch(braid_bootstrap_t *bs, double *when)
{
    double end = test_now() + GIVEUP_S;
    while (test_now() < end) {
        braid_status_t st = braid_bootstrap_health(bs);
        if (st != BRAID_OK) {
            *when = test_now();
            return st;
        }
        test_sleep(0.001);
    }
    *when = test_now();
    return BRAID_OK;
}

/* The survivor's report names the victim: "rank R (host ..., pid P)". */
static void check_names_victim(int rank, int victim)
{
    char want[64];
    snprintf(want, sizeof(want), "rank %d (host ", victim);
    RCHECK(strstr(braid_last_error(), want) != NULL);
    snprintf(want, sizeof(want), "pid %d)", sh->victim_pid);
    RCHECK(strstr(braid_last_error(), want) != NULL);
    (void)rank;
}

/* After the first report the channel stays failed with the same words:
 * the detector repeats them, operations refuse with BRAID_ERR_STATE. */
static void check_stays_failed(braid_bootstrap_t *bs, braid_status_t st)
{
    char first[512];
    snprintf(first, sizeof(first), "%s", braid_last_error());
    RCHECK(braid_bootstrap_health(bs) == st);
    RCHECK(strcmp(braid_last_error(), first) == 0);
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_ERR_STATE);
    RCHECK(strstr(braid_last_error(), first) != NULL);
    int v = 0, all[8];
    RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) ==
           BRAID_ERR_STATE);
}

/* ------------------------------------------------ a non-root rank dies */

static int role_kill_rank(int rank, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs = join(rank, size);
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    RCHECK(braid_bootstrap_health(bs) == BRAID_OK);
    if (rank == size - 1) {
        test_sleep(0.1);
        die();
    }
    double         when;
    braid_status_t st = watch(bs, &when);
    RCHECK(st == BRAID_ERR_PEER);
    check_names_victim(rank, size - 1);
    RCHECK(strstr(braid_last_error(), "was lost") != NULL);
    if (rank != 0)
        RCHECK(strstr(braid_last_error(), "reported by rank 0") != NULL);
    printf("  rank %d: %.1f ms after the kill: %s\n", rank,
           (when - sh->death) * 1e3, braid_last_error());
    RCHECK(when - sh->death < LIMIT_S);
    check_stays_failed(bs, st);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ----------------------------------------------------- the root dies */

static int role_kill_root(int rank, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs = join(rank, size);
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    if (rank == 0) {
        test_sleep(0.1);
        die();
    }
    double         when;
    braid_status_t st = watch(bs, &when);
    RCHECK(st == BRAID_ERR_PEER);
    RCHECK(strstr(braid_last_error(), "rank 0 was lost") != NULL);
    printf("  rank %d: %.1f ms after the kill: %s\n", rank,
           (when - sh->death) * 1e3, braid_last_error());
    RCHECK(when - sh->death < LIMIT_S);
    check_stays_failed(bs, st);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ------------------------------------- messages in flight stay untouched */

/* Polls the detector for a while: it must stay quiet, and whatever waits on
 * the sockets must still be there for the operation that follows. */
static void quiet_for(braid_bootstrap_t *bs, double s)
{
    double end = test_now() + s;
    while (test_now() < end) {
        RCHECK(braid_bootstrap_health(bs) == BRAID_OK);
        test_sleep(0.001);
    }
}

static int role_in_flight(int rank, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs = join(rank, size);
    int                all[3];
    int                v = 10 + rank;
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);

    /* Rank 1 is early: its contribution waits at the root, which is still
     * "in a collective" polling the detector. */
    if (rank == 0)
        quiet_for(bs, 0.3);
    if (rank == 2)
        test_sleep(0.3);
    RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) == BRAID_OK);
    for (int r = 0; r < size; r++)
        RCHECK(all[r] == 10 + r);

    /* The root is early: its broadcast waits at rank 1. */
    char buf[300]; /* longer than an ABORT frame */
    memset(buf, rank == 0 ? 'x' : 0, sizeof(buf));
    if (rank == 1)
        quiet_for(bs, 0.3);
    RCHECK(braid_bootstrap_bcast(bs, buf, sizeof(buf), 0) == BRAID_OK);
    for (size_t i = 0; i < sizeof(buf); i++)
        RCHECK(buf[i] == 'x');

    /* Rank 2 broadcasts: its data waits at the root. */
    memset(buf, rank == 2 ? 'y' : 0, sizeof(buf));
    if (rank == 0)
        quiet_for(bs, 0.3);
    RCHECK(braid_bootstrap_bcast(bs, buf, sizeof(buf), 2) == BRAID_OK);
    for (size_t i = 0; i < sizeof(buf); i++)
        RCHECK(buf[i] == 'y');

    /* Not after the barrier: by then the others may have left, which is
     * a connection ending like any other. */
    RCHECK(braid_bootstrap_health(bs) == BRAID_OK);
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ------------------------- a rank dies while the root blocks on another */

static int role_kill_in_op(int rank, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs = join(rank, size);
    double             when;
    braid_status_t     st;
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    switch (rank) {
    case 1: /* busy elsewhere (a collective of the data plane, say) */
        st = watch(bs, &when);
        break;
    case 3:
        test_sleep(0.2);
        die();
        return 1;
    default: { /* the root waits for rank 1 first, rank 2 for the root */
        int v = rank, all[4];
        st    = braid_bootstrap_allgather(bs, &v, all, sizeof(v));
        when  = test_now();
        break;
    }
    }
    RCHECK(st == BRAID_ERR_PEER);
    check_names_victim(rank, 3);
    printf("  rank %d: %.1f ms after the kill: %s\n", rank,
           (when - sh->death) * 1e3, braid_last_error());
    RCHECK(when - sh->death < LIMIT_S);
    check_stays_failed(bs, st);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* --------------------------------- a rank fails on its own, and says why */

#define REASON "allreduce of 42 elements timed out (test)"

static int role_rank_gives_up(int rank, int size, void *arg)
{
    int                quitter = *(int *)arg;
    braid_bootstrap_t *bs      = join(rank, size);
    double             when;
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    if (rank == quitter) {
        test_sleep(0.1);
        braid_error(BRAID_ERR_INVALID_ARG, "unrelated");
        braid_bootstrap_abort(bs, BRAID_ERR_TIMEOUT, REASON);
        RCHECK(strcmp(braid_last_error(), "unrelated") == 0); /* kept */
        /* Its own channel now reports its own failure. */
        RCHECK(braid_bootstrap_health(bs) == BRAID_ERR_TIMEOUT);
        RCHECK(strcmp(braid_last_error(), REASON) == 0);
        test_sleep(0.5); /* alive: the others must not call it lost */
        braid_bootstrap_destroy(bs);
        return 0;
    }
    braid_status_t st = watch(bs, &when);
    RCHECK(st == BRAID_ERR_PEER);
    RCHECK(strstr(braid_last_error(), REASON) != NULL);
    if (quitter != 0) {
        char want[64];
        snprintf(want, sizeof(want), "rank %d (host ", quitter);
        RCHECK(strstr(braid_last_error(), want) != NULL);
        RCHECK(strstr(braid_last_error(), "failed: ") != NULL);
        RCHECK(strstr(braid_last_error(), "was lost") == NULL);
    } else {
        RCHECK(strstr(braid_last_error(), "rank 0 aborted") != NULL);
    }
    printf("  rank %d: %s\n", rank, braid_last_error());
    check_stays_failed(bs, st);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ---------------------------- several at once: the dead are named first */

/* Rank 3 dies; rank 2, having noticed (as a transport would), gives up with
 * a long reason; the root looks only once both are gone. */
static int role_dead_and_failed(int rank, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs = join(rank, size);
    double             when;
    char               reason[400];
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    switch (rank) {
    case 3:
        test_sleep(0.05);
        die();
        return 1;
    case 2:
        test_sleep(0.1);
        memset(reason, 'x', sizeof(reason));
        snprintf(reason, 40, "transport: rank 3 went away ");
        reason[strlen(reason)]     = 'x';
        reason[sizeof(reason) - 1] = '\0';
        braid_bootstrap_abort(bs, BRAID_ERR_PEER, reason);
        sh->gave_up = 1;
        test_sleep(0.5);
        braid_bootstrap_destroy(bs);
        return 0;
    case 0: /* both gone before the root looks, however slow this host */
        while (sh->death == 0 || !sh->gave_up)
            test_sleep(0.01);
        test_sleep(0.05);
        break;
    }
    RCHECK(watch(bs, &when) == BRAID_ERR_PEER);
    const char *e = braid_last_error();
    printf("  rank %d: %.200s...\n", rank, e);
    check_names_victim(rank, 3);
    /* The dead one first, even though the other's reason is long. */
    RCHECK(strncmp(e, "rank 3 (host ", 13) == 0);
    RCHECK(strstr(e, "was lost; rank 2 (host ") != NULL);
    RCHECK(strstr(e, "failed: transport: rank 3 went away") != NULL);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ------------------------------------------------ a split channel */

/* Colors {0, 2} and {1, 3}; world rank 3 is rank 1 of its group. */
static int role_kill_in_split(int rank, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs = join(rank, size), *child = NULL;
    double             when;
    RCHECK(braid_bootstrap_split(bs, rank % 2, rank, &child) == BRAID_OK);
    RCHECK(child != NULL && braid_bootstrap_size(child) == 2);
    RCHECK(braid_bootstrap_barrier(child) == BRAID_OK);
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    if (rank == 3) {
        test_sleep(0.1);
        die();
    }
    if (rank == 1) { /* root of the victim's group */
        RCHECK(watch(child, &when) == BRAID_ERR_PEER);
        check_names_victim(rank, 1);
        RCHECK(when - sh->death < LIMIT_S);
    } else {
        /* The other group does not care. */
        quiet_for(child, 0.3);
        RCHECK(braid_bootstrap_barrier(child) == BRAID_OK);
    }
    RCHECK(watch(bs, &when) == BRAID_ERR_PEER);
    check_names_victim(rank, 3);
    braid_bootstrap_destroy(child);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ------------------------------------------------------------------ main */

static void run(const char *name, int nproc, test_rank_fn fn, void *arg,
                int victim)
{
    int    status[16];
    double t0 = test_now();
    printf("%s\n", name);
    memset((void *)sh, 0, sizeof(*sh));
    net.lfd = test_listener(&net.port);
    int bad = test_fork_ranks(nproc, fn, arg, 15.0, status);
    close(net.lfd);
    if (victim >= 0 && WIFSIGNALED(status[victim]) &&
        WTERMSIG(status[victim]) == SIGKILL)
        bad--;
    if (bad != 0) {
        fprintf(stderr, "%s: %d process(es) failed\n", name, bad);
        test_failures++;
    } else {
        printf("%s: ok (%.2f s)\n", name, test_now() - t0);
    }
}

int main(void)
{
    /* Long enough that only the detector can explain a quick error. */
    test_set_timeout("10");
    setvbuf(stdout, NULL, _IOLBF, 0);
    sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    int zero = 0, two = 2;
    run("non-root rank killed", 4, role_kill_rank, NULL, 3);
    run("root killed", 4, role_kill_root, NULL, 0);
    run("messages in flight are left alone", 3, role_in_flight, NULL, -1);
    run("rank killed while the root blocks on another", 4, role_kill_in_op,
        NULL, 3);
    run("a rank gives up and says why", 3, role_rank_gives_up, &two, -1);
    run("the root gives up and says why", 3, role_rank_gives_up, &zero, -1);
    run("a dead rank and a failed one: the dead named first", 4,
        role_dead_and_failed, NULL, 3);
    run("rank killed in a split channel", 4, role_kill_in_split, NULL, 3);
    if (test_failures == 0)
        printf("health: all checks passed\n");
    return test_failures != 0;
}
