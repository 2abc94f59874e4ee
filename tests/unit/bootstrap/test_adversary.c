/* The bootstrap against bad peers: wrong keys, bogus ranks, duplicates,
 * silent connections, oversized, truncated and stalled messages, ranks that
 * never come or die midway.  Every case must end in a clear error (or be
 * shrugged off) within BRAID_TIMEOUT, never in a hang or a crash. */
#include "bootstrap/auth.h"
#include "bootstrap/channel.h"
#include "bootstrap/proto.h"
#include "bootstrap/sock.h"
#include "bs_test.h"

#define TIMEOUT_S 2.0

typedef struct {
    int lfd, port;
} net_t;

static net_t net;

static braid_bootstrap_t *join(int rank, int size)
{
    braid_launch_t     l  = test_launch(rank, size, net.lfd, net.port);
    braid_bootstrap_t *bs = NULL;
    if (rank != 0)
        close(net.lfd);
    RCHECK(braid_bootstrap_init(&l, &bs) == BRAID_OK);
    return bs;
}

/* A raw client that runs the handshake as (rank, size) with key. */
static braid_status_t intruder(const uint8_t *key, int rank, int size)
{
    int            fd = -1;
    double         dl = test_now() + TIMEOUT_S;
    braid_status_t st = braid_sock_connect("127.0.0.1", net.port, dl, &fd);
    if (st == BRAID_OK)
        st = braid_auth_join(fd, key, rank, size, dl, "rank 0");
    braid_sock_close(&fd);
    return st;
}

/* ------------------------------------------------ admission of strangers */

static int role_admission(int role, int n, void *arg)
{
    (void)n;
    (void)arg;
    static const uint8_t wrong[16] = {0xde, 0xad};
    const int            size      = 3;
    switch (role) {
    case 0: { /* root */
        braid_bootstrap_t *bs = join(0, size);
        int                v  = 0, all[3];
        RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) == BRAID_OK);
        RCHECK(all[1] == 1 && all[2] == 2);
        braid_bootstrap_destroy(bs);
        return 0;
    }
    case 1:
    case 2: { /* the legitimate ranks; rank 2 comes late */
        if (role == 2)
            test_sleep(0.8);
        braid_bootstrap_t *bs = join(role, size);
        int                v  = role, all[3];
        RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) == BRAID_OK);
        RCHECK(all[0] == 0 && all[1] == 1 && all[2] == 2);
        braid_bootstrap_destroy(bs);
        return 0;
    }
    case 3: { /* connects first and says nothing: must not block anyone */
        int fd = -1;
        RCHECK(braid_sock_connect("127.0.0.1", net.port, test_now() + 1,
                                  &fd) == BRAID_OK);
        test_sleep(1.5);
        close(fd);
        return 0;
    }
    case 4: /* wrong key, claiming no slot of this job */
        test_sleep(0.05);
        RCHECK(intruder(wrong, 2, size + 5) == BRAID_ERR_AUTH);
        RCHECK(strstr(braid_last_error(), "wrong job key") != NULL);
        return 0;
    case 5: /* right key, rank out of range */
        test_sleep(0.1);
        RCHECK(intruder(test_key(), 7, size) == BRAID_ERR_AUTH);
        RCHECK(strstr(braid_last_error(), "rank out of range") != NULL);
        return 0;
    case 6: /* wrong key, the slot of rank 1 once rank 1 is in */
        test_sleep(0.45);
        RCHECK(intruder(wrong, 1, size) == BRAID_ERR_AUTH);
        RCHECK(strstr(braid_last_error(), "wrong job key") != NULL);
        return 0;
    case 7: /* right key, rank 1 again once rank 1 is in */
        test_sleep(0.4);
        RCHECK(intruder(test_key(), 1, size) == BRAID_ERR_AUTH);
        RCHECK(strstr(braid_last_error(), "already connected") != NULL);
        return 0;
    case 8: /* garbage instead of a hello */
    {
        int fd = -1;
        test_sleep(0.2);
        RCHECK(braid_sock_connect("127.0.0.1", net.port, test_now() + 1,
                                  &fd) == BRAID_OK);
        char junk[200];
        memset(junk, 'A', sizeof(junk));
        (void)!write(fd, junk, sizeof(junk));
        test_sleep(0.2);
        close(fd);
        return 0;
    }
    }
    return 1;
}

/* ----------------------------------------------------- a fake rank 0 */

/* Answers the hello with a MAC made without the key. */
static int role_fake_root(int role, int n, void *arg)
{
    (void)n;
    (void)arg;
    if (role == 0) {
        int fd = accept4(net.lfd, NULL, NULL, SOCK_CLOEXEC);
        RCHECK(fd >= 0);
        braid_sock_tune(fd);
        double  dl                         = test_now() + TIMEOUT_S;
        uint8_t ch[BRAID_BS_CHALLENGE_LEN] = {0}, hello[BRAID_BS_HELLO_LEN];
        uint8_t mac[BRAID_BS_WELCOME_LEN]  = {0};
        braid_put_u32(ch, BRAID_BS_VERSION);
        RCHECK(braid_bs_send(fd, BRAID_BS_CHALLENGE, ch, sizeof(ch), dl,
                             "rank 1") == BRAID_OK);
        RCHECK(braid_bs_recv(fd, BRAID_BS_HELLO, hello, sizeof(hello), dl,
                             "rank 1") == BRAID_OK);
        RCHECK(braid_bs_send(fd, BRAID_BS_WELCOME, mac, sizeof(mac), dl,
                             "rank 1") == BRAID_OK);
        test_sleep(0.5);
        close(fd);
        return 0;
    }
    braid_launch_t     l  = test_launch(1, 2, -1, net.port);
    braid_bootstrap_t *bs = NULL;
    RCHECK(braid_bootstrap_init(&l, &bs) == BRAID_ERR_AUTH);
    RCHECK(strstr(braid_last_error(), "failed the job-key proof") != NULL);
    RCHECK(bs == NULL);
    return 0;
}

/* A real rank 0 (same key) that then sends an absurd result. */
static int role_lying_root(int role, int n, void *arg)
{
    (void)n;
    (void)arg;
    if (role == 0) {
        int fds[2] = {-1, -1};
        RCHECK(braid_sock_adopt_listener(net.lfd, "test") == BRAID_OK);
        RCHECK(braid_auth_serve(net.lfd, test_key(), 2, fds,
                                test_now() + TIMEOUT_S) == BRAID_OK);
        RCHECK(braid_auth_release(fds, 2, test_now() + TIMEOUT_S) == BRAID_OK);
        uint8_t hdr[BRAID_BS_HDR_LEN];
        braid_bs_hdr_pack(hdr, BRAID_BS_GATHER_RESULT, 1ull << 40);
        RCHECK(write(fds[1], hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr));
        test_sleep(0.5);
        close(fds[1]);
        return 0;
    }
    braid_bootstrap_t *bs = join(1, 2);
    int                v  = 1, all[2];
    RCHECK(braid_bootstrap_allgather(bs, &v, all, sizeof(v)) ==
           BRAID_ERR_PEER);
    RCHECK(strstr(braid_last_error(), "rank 0 at 127.0.0.1:") != NULL);
    RCHECK(strstr(braid_last_error(), "oversized") != NULL);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ------------------------------------------- bad messages from a rank */

enum { BAD_OVERSIZED, BAD_TRUNCATED, BAD_STALLED, BAD_MISMATCH, BAD_KILLED };

static int bad_kind;

static int role_bad_rank(int role, int size, void *arg)
{
    (void)arg;
    braid_bootstrap_t *bs       = join(role, size);
    uint8_t            item[64] = {0}, *all = calloc((size_t)size, 64);
    RCHECK(all != NULL);
    if (role == 0) {
        double         t0 = test_now();
        braid_status_t st = braid_bootstrap_allgather(bs, item, all, 64);
        double         dt = test_now() - t0;
        const char    *e  = braid_last_error();
        switch (bad_kind) {
        case BAD_OVERSIZED:
            RCHECK(st == BRAID_ERR_PEER && strstr(e, "rank 1") &&
                   strstr(e, "oversized"));
            break;
        case BAD_TRUNCATED:
            RCHECK(st == BRAID_ERR_PEER && strstr(e, "rank 1 closed") &&
                   strstr(e, "got 10 of 64 bytes"));
            break;
        case BAD_STALLED:
            RCHECK(st == BRAID_ERR_TIMEOUT && strstr(e, "rank 1"));
            RCHECK(dt > TIMEOUT_S - 0.3 && dt < TIMEOUT_S + 1.5);
            break;
        case BAD_MISMATCH:
            RCHECK(st == BRAID_ERR_MISMATCH && strstr(e, "rank 1") &&
                   strstr(e, "barrier"));
            break;
        case BAD_KILLED:
            RCHECK(st == BRAID_ERR_PEER && strstr(e, "rank 2"));
            RCHECK(dt < 1.0);
            break;
        }
        /* The channel is done for after an error. */
        RCHECK(braid_bootstrap_barrier(bs) == BRAID_ERR_STATE);
    } else if (role == 1 && bad_kind != BAD_KILLED) {
        uint8_t hdr[BRAID_BS_HDR_LEN];
        int     fd = bs->root_fd;
        switch (bad_kind) {
        case BAD_OVERSIZED:
            braid_bs_hdr_pack(hdr, BRAID_BS_GATHER, 1ull << 40);
            RCHECK(write(fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr));
            break;
        case BAD_TRUNCATED:
            braid_bs_hdr_pack(hdr, BRAID_BS_GATHER, 64);
            RCHECK(write(fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr));
            RCHECK(write(fd, item, 10) == 10);
            break; /* and exit: the connection closes midway */
        case BAD_STALLED:
            braid_bs_hdr_pack(hdr, BRAID_BS_GATHER, 64);
            RCHECK(write(fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr));
            test_sleep(TIMEOUT_S + 1.0);
            break;
        case BAD_MISMATCH:
            RCHECK(braid_bootstrap_barrier(bs) == BRAID_ERR_PEER);
            break;
        }
    } else if (role == 2 && bad_kind == BAD_KILLED) {
        kill(getpid(), SIGKILL);
    } else {
        /* Innocent bystanders see the root hang up on them. */
        RCHECK(braid_bootstrap_allgather(bs, item, all, 64) == BRAID_ERR_PEER);
    }
    free(all);
    braid_bootstrap_destroy(bs);
    return 0;
}

/* ------------------------------- a rank of the job with another key/size */

/* Rank 2 was given another key or another size: it can
 * never join, so every rank fails at once, each naming the cause, instead
 * of rank 0 (and the ranks already in) waiting for BRAID_TIMEOUT. */
enum { WRONG_KEY, WRONG_SIZE };
static int wrong_kind;

static int role_wrong(int role, int n, void *arg)
{
    (void)n;
    (void)arg;
    const int          size = 3;
    braid_launch_t     l    = test_launch(role, size, net.lfd, net.port);
    braid_bootstrap_t *bs   = NULL;
    if (role != 0)
        close(net.lfd);
    if (role == 2) {
        test_sleep(0.3); /* rank 1 is in by then */
        if (wrong_kind == WRONG_KEY)
            l.key[0] ^= 1;
        else
            l.size = size + 1;
    }
    double         t0 = test_now();
    braid_status_t st = braid_bootstrap_init(&l, &bs);
    double         dt = test_now() - t0;
    const char    *e  = braid_last_error();
    RCHECK(bs == NULL);
    RCHECK(dt < 5.0); /* BRAID_TIMEOUT is 30 s here */
    if (wrong_kind == WRONG_KEY) {
        RCHECK(st == BRAID_ERR_AUTH);
        RCHECK(strstr(e, role == 2 ? "wrong job key"
                                   : "rank 2 of 3 "
                                     "(connecting from 127.0.0.1:") != NULL);
        RCHECK(role == 2 || strstr(e, "another BRAID_JOB_KEY") != NULL);
    } else {
        RCHECK(st == (role == 2 ? BRAID_ERR_AUTH : BRAID_ERR_MISMATCH));
        RCHECK(strstr(e, role == 2
                             ? "job size mismatch"
                             : "was started for "
                               "a job of 4 ranks, rank 0 for 3") != NULL);
    }
    /* Rank 1 was in already: rank 0 told it why the job ends. */
    RCHECK(role != 1 || strstr(e, "gave up the rendezvous") != NULL);
    return 0;
}

/* ----------------------------------------------- a rank that never comes */

static int role_missing(int role, int n, void *arg)
{
    (void)n;
    (void)arg;
    const int          size = 3; /* but only ranks 0 and 1 exist */
    braid_launch_t     l    = test_launch(role, size, net.lfd, net.port);
    braid_bootstrap_t *bs   = NULL;
    double             t0   = test_now();
    braid_status_t     st   = braid_bootstrap_init(&l, &bs);
    double             dt   = test_now() - t0;
    RCHECK(bs == NULL);
    RCHECK(dt < TIMEOUT_S + 1.5);
    if (role == 0) {
        RCHECK(st == BRAID_ERR_TIMEOUT);
        RCHECK(strstr(braid_last_error(), "did not join: rank 2") != NULL);
    } else {
        RCHECK(st == BRAID_ERR_PEER || st == BRAID_ERR_TIMEOUT);
    }
    return 0;
}

/* ------------------------------------------------------------------ main */

static void run(const char *name, int nproc, test_rank_fn fn)
{
    int    status[16];
    double t0 = test_now();
    net.lfd   = test_listener(&net.port);
    int bad   = test_fork_ranks(nproc, fn, NULL, 10.0, status);
    close(net.lfd);
    /* BAD_KILLED: rank 2 dies by SIGKILL on purpose. */
    if (fn == role_bad_rank && bad_kind == BAD_KILLED && bad == 1 &&
        WIFSIGNALED(status[2]) && WTERMSIG(status[2]) == SIGKILL)
        bad = 0;
    if (bad != 0) {
        fprintf(stderr, "%s: %d process(es) failed\n", name, bad);
        test_failures++;
    } else {
        printf("%s: ok (%.2f s)\n", name, test_now() - t0);
    }
}

int main(void)
{
    test_set_timeout("2");
    run("strangers refused, job completes", 9, role_admission);
    run("fake rank 0 fails the proof", 2, role_fake_root);
    run("oversized result from rank 0", 2, role_lying_root);
    bad_kind = BAD_OVERSIZED;
    run("oversized message", 3, role_bad_rank);
    bad_kind = BAD_TRUNCATED;
    run("truncated message", 3, role_bad_rank);
    bad_kind = BAD_STALLED;
    run("stalled message", 2, role_bad_rank);
    bad_kind = BAD_MISMATCH;
    run("collective mismatch", 2, role_bad_rank);
    bad_kind = BAD_KILLED;
    run("rank killed mid-allgather", 3, role_bad_rank);
    run("rank never shows up", 2, role_missing);
    test_set_timeout("30");
    wrong_kind = WRONG_KEY;
    run("rank with another key: all fail at once", 3, role_wrong);
    wrong_kind = WRONG_SIZE;
    run("rank with another size: all fail at once", 3, role_wrong);
    if (test_failures == 0)
        printf("adversary: all checks passed\n");
    return test_failures != 0;
}
