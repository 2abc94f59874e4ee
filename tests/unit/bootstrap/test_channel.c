/* The bootstrap channel across real processes: allgather, bcast, barrier
 * and split with 1, 2, 3, 5 and 8 ranks, and the three ways to find rank 0
 * (inherited socket, host:port, rendezvous file). */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "bootstrap/rendezvous.h"
#include "bs_test.h"

#define ITEM 24
#define BIG  (300 * 1024) /* well past a socket buffer: partial sends */

typedef struct {
    int lfd, port;
} net_t;

static uint8_t pattern(int rank, size_t i, int salt)
{
    return (uint8_t)(rank * 31 + (int)i * 7 + salt);
}

/* Allgather, in-place allgather, empty and big allgather. */
static void check_allgather(braid_bootstrap_t *bs, int rank, int size)
{
    uint8_t  mine[ITEM];
    uint8_t *all = malloc((size_t)size * ITEM);
    RCHECK(all != NULL);
    for (size_t i = 0; i < ITEM; i++)
        mine[i] = pattern(rank, i, 1);
    memset(all, 0xee, (size_t)size * ITEM);
    RCHECK(braid_bootstrap_allgather(bs, mine, all, ITEM) == BRAID_OK);
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < ITEM; i++)
            RCHECK(all[(size_t)r * ITEM + i] == pattern(r, i, 1));

    memset(all, 0xee, (size_t)size * ITEM);
    for (size_t i = 0; i < ITEM; i++)
        all[(size_t)rank * ITEM + i] = pattern(rank, i, 2);
    RCHECK(braid_bootstrap_allgather(bs, all + (size_t)rank * ITEM, all,
                                     ITEM) == BRAID_OK);
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < ITEM; i++)
            RCHECK(all[(size_t)r * ITEM + i] == pattern(r, i, 2));
    free(all);

    RCHECK(braid_bootstrap_allgather(bs, NULL, NULL, 0) == BRAID_OK);

    uint8_t *bsend = malloc(BIG), *brecv = malloc((size_t)size * BIG);
    RCHECK(bsend && brecv);
    for (size_t i = 0; i < BIG; i++)
        bsend[i] = pattern(rank, i, 3);
    RCHECK(braid_bootstrap_allgather(bs, bsend, brecv, BIG) == BRAID_OK);
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < BIG; i += 997)
            RCHECK(brecv[(size_t)r * BIG + i] == pattern(r, i, 3));
    free(bsend);
    free(brecv);
}

static void check_bcast(braid_bootstrap_t *bs, int rank, int size)
{
    for (int root = 0; root < size; root++) {
        uint8_t buf[64];
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = rank == root ? pattern(root, i, 4) : 0;
        RCHECK(braid_bootstrap_bcast(bs, buf, sizeof(buf), root) == BRAID_OK);
        for (size_t i = 0; i < sizeof(buf); i++)
            RCHECK(buf[i] == pattern(root, i, 4));
    }
    uint8_t one = 0;
    RCHECK(braid_bootstrap_bcast(bs, &one, 1, size) == BRAID_ERR_INVALID_ARG);
}

/* The last rank arrives late; nobody may leave the barrier before it. */
static void check_barrier(braid_bootstrap_t *bs, int rank, int size)
{
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    double t0 = test_now();
    if (rank == size - 1)
        test_sleep(0.2);
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
    if (size > 1)
        RCHECK(test_now() - t0 >= 0.15);
}

/* color = rank % 2, key = size - rank (so the new order is reversed);
 * rank 1 opts out with BRAID_UNDEFINED when there are more than 2 ranks. */
static void check_split(braid_bootstrap_t *bs, int rank, int size)
{
    int                undefined = size > 2 && rank == 1;
    int                color     = undefined ? BRAID_UNDEFINED : rank % 2;
    braid_bootstrap_t *child     = (braid_bootstrap_t *)&child; /* poison */
    RCHECK(braid_bootstrap_split(bs, color, size - rank, &child) == BRAID_OK);
    if (undefined) {
        RCHECK(child == NULL);
    } else {
        int members = 0, above = 0;
        for (int r = 0; r < size; r++) {
            if (r % 2 != color || (size > 2 && r == 1))
                continue;
            members++;
            above += r > rank;
        }
        RCHECK(child != NULL);
        RCHECK(braid_bootstrap_size(child) == members);
        RCHECK(braid_bootstrap_rank(child) == above);
        /* The child works, in the new order: parent ranks descending. */
        int32_t  me  = rank;
        int32_t *all = malloc((size_t)members * sizeof(int32_t));
        RCHECK(all != NULL);
        RCHECK(braid_bootstrap_allgather(child, &me, all, sizeof(me)) ==
               BRAID_OK);
        for (int i = 1; i < members; i++)
            RCHECK(all[i] < all[i - 1] && all[i] % 2 == color);
        RCHECK(all[above] == rank);
        free(all);

        /* A split of the split: one color, equal keys keep the order. */
        braid_bootstrap_t *grand = NULL;
        RCHECK(braid_bootstrap_split(child, 7, 0, &grand) == BRAID_OK);
        RCHECK(grand != NULL && braid_bootstrap_size(grand) == members &&
               braid_bootstrap_rank(grand) == above);
        RCHECK(braid_bootstrap_barrier(grand) == BRAID_OK);
        braid_bootstrap_destroy(grand);
        RCHECK(braid_bootstrap_barrier(child) == BRAID_OK);
        braid_bootstrap_destroy(child);
    }
    /* The parent still works after the split. */
    RCHECK(braid_bootstrap_barrier(bs) == BRAID_OK);
}

static int rank_all_ops(int rank, int size, void *arg)
{
    net_t             *net = arg;
    braid_launch_t     l   = test_launch(rank, size, net->lfd, net->port);
    braid_bootstrap_t *bs  = NULL;
    if (rank != 0)
        close(net->lfd);
    RCHECK(braid_bootstrap_init(&l, &bs) == BRAID_OK);
    RCHECK(braid_bootstrap_rank(bs) == rank);
    RCHECK(braid_bootstrap_size(bs) == size);
    check_allgather(bs, rank, size);
    check_bcast(bs, rank, size);
    check_barrier(bs, rank, size);
    check_split(bs, rank, size);
    braid_bootstrap_destroy(bs);
    return 0;
}

static void test_sizes(void)
{
    static const int sizes[] = {1, 2, 3, 5, 8};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        net_t net;
        net.lfd    = test_listener(&net.port);
        double t0  = test_now();
        int    bad = test_fork_ranks(sizes[i], rank_all_ops, &net, 15.0, NULL);
        close(net.lfd);
        if (bad != 0) {
            fprintf(stderr, "channel with %d ranks: %d rank(s) failed\n",
                    sizes[i], bad);
            test_failures++;
        } else {
            printf("channel with %d ranks: ok (%.2f s)\n", sizes[i],
                   test_now() - t0);
        }
    }
}

/* Rank 0 binds host:port itself (torchrun's MASTER_ADDR/MASTER_PORT) and
 * starts late: the others retry their connects meanwhile. */
static int rank_hostport(int rank, int size, void *arg)
{
    int               *port = arg;
    braid_launch_t     l    = test_launch(rank, size, -1, *port);
    braid_bootstrap_t *bs   = NULL;
    l.has_listen_fd         = 0;
    if (rank == 0)
        test_sleep(0.3);
    RCHECK(braid_bootstrap_init(&l, &bs) == BRAID_OK);
    int v = rank * 10, all[3];
    RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) == BRAID_OK);
    RCHECK(all[0] == 0 && all[1] == 10 && all[2] == 20);
    braid_bootstrap_destroy(bs);
    return 0;
}

static void test_hostport(void)
{
    int port;
    close(test_listener(&port)); /* a port that was free a moment ago */
    CHECK(test_fork_ranks(3, rank_hostport, &port, 15.0, NULL) == 0);
}

typedef struct {
    char dir[64];
    char job[64];
} file_t;

/* File rendezvous as under mpirun on one host: no address, no key.  Two
 * rounds in a row with the same job id, as two braid_init calls would: the
 * second must not trip over what the first left behind. */
static int rank_file(int rank, int size, void *arg)
{
    file_t *f = arg;
    for (int round = 0; round < 2; round++) {
        braid_launch_t     l;
        braid_bootstrap_t *bs = NULL;
        memset(&l, 0, sizeof(l));
        l.rank = rank;
        l.size = size;
        snprintf(l.launcher, sizeof(l.launcher), "mpirun");
        snprintf(l.job_id, sizeof(l.job_id), "%s", f->job);
        snprintf(l.rendezvous_dir, sizeof(l.rendezvous_dir), "%s", f->dir);
        if (rank == 0 && round == 0)
            test_sleep(0.3); /* the others find the stale file first */
        RCHECK(braid_bootstrap_init(&l, &bs) == BRAID_OK);
        if (rank == 0) {
            char path[4200];
            RCHECK(braid_rdv_path(&l, path, sizeof(path)) == BRAID_OK);
            RCHECK(access(path, F_OK) != 0 && errno == ENOENT); /* gone */
        }
        int v = rank + 100 * round, all[4];
        RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) == BRAID_OK);
        for (int r = 0; r < size; r++)
            RCHECK(all[r] == r + 100 * round);
        braid_bootstrap_destroy(bs);
    }
    return 0;
}

static void test_file_rendezvous(void)
{
    file_t f;
    snprintf(f.dir, sizeof(f.dir), "/tmp/braid-test-chan-XXXXXX");
    CHECK(mkdtemp(f.dir) != NULL);
    snprintf(f.job, sizeof(f.job), "test%ld", (long)getpid());

    /* A file left by an earlier job of the same id, pointing at a port
     * nobody listens on: the ranks must get past it. */
    braid_launch_t l;
    memset(&l, 0, sizeof(l));
    snprintf(l.job_id, sizeof(l.job_id), "%s", f.job);
    snprintf(l.rendezvous_dir, sizeof(l.rendezvous_dir), "%s", f.dir);
    char path[4200];
    CHECK_STATUS(braid_rdv_path(&l, path, sizeof(path)), BRAID_OK);
    int dead;
    close(test_listener(&dead));
    CHECK_STATUS(braid_rdv_publish(path, "127.0.0.1", dead, test_key()),
                 BRAID_OK);

    CHECK(test_fork_ranks(4, rank_file, &f, 15.0, NULL) == 0);
    CHECK(access(path, F_OK) != 0);
    rmdir(f.dir);
}

/* One rank, no launcher: no sockets, the operations are copies. */
static void test_single_from_env(void)
{
    static const char *vars[] = {"BRAID_RANK",
                                 "BRAID_SIZE",
                                 "BRAID_ADDR",
                                 "OMPI_COMM_WORLD_RANK",
                                 "OMPI_COMM_WORLD_SIZE",
                                 "SLURM_PROCID",
                                 "RANK",
                                 "WORLD_SIZE",
                                 NULL};
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    braid_launch_t     l;
    braid_bootstrap_t *bs = NULL, *child = NULL;
    CHECK_STATUS(braid_launch_from_env(&l), BRAID_OK);
    CHECK_STATUS(braid_bootstrap_init(&l, &bs), BRAID_OK);
    if (bs == NULL)
        return;
    CHECK(braid_bootstrap_size(bs) == 1 && braid_bootstrap_rank(bs) == 0);
    char in[5] = "abcd", out[5] = "";
    CHECK_STATUS(braid_bootstrap_allgather(bs, in, out, 5), BRAID_OK);
    CHECK(strcmp(out, "abcd") == 0);
    CHECK_STATUS(braid_bootstrap_bcast(bs, in, 5, 0), BRAID_OK);
    CHECK_STATUS(braid_bootstrap_barrier(bs), BRAID_OK);
    CHECK_STATUS(braid_bootstrap_split(bs, BRAID_UNDEFINED, 0, &child),
                 BRAID_OK);
    CHECK(child == NULL);
    CHECK_STATUS(braid_bootstrap_split(bs, 3, 0, &child), BRAID_OK);
    CHECK(child != NULL && braid_bootstrap_size(child) == 1);
    braid_bootstrap_destroy(child);
    braid_bootstrap_destroy(bs);
}

int main(void)
{
    test_set_timeout("10");
    test_single_from_env();
    test_sizes();
    test_hostport();
    test_file_rendezvous();
    if (test_failures == 0)
        printf("channel: all checks passed\n");
    return test_failures != 0;
}
