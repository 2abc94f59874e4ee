/* Unit test of the roce transport (libbraid-roce.so).
 *
 *   test_roce PLUGIN.so [-n RANKS] [--iters N] [--require] [--large]
 *             [--puts-only]
 *
 * Loads the plugin as the core would (dlopen, braid_plugin_v4, the transport
 * named "roce") and drives it with the shared harness (tests/unit/common:
 * the core's services, an out-of-band board in shared memory), one forked
 * process per rank:
 *   - parsing of BRAID_ROCE_* (works without a device);
 *   - probe; with no RDMA device the probe must say "no RDMA device" and
 *     the test skips (exit 77) unless --require;
 *   - device selection errors (BRAID_ROCE_DEV, BRAID_ROCE_GID_INDEX);
 *   - a 1-rank communicator (put to self);
 *   - N ranks: put_signal between all pairs (self included) for many
 *     iterations with sequence-numbered flags, sizes from 0 to 100000 bytes
 *     and every kind of source (registered area, small and large heap
 *     buffers), data and flags checked on the target; a burst of 600 puts
 *     per pair without waiting (send queue full, receiver not ready); area
 *     allocation and release in between; bad arguments;
 *   - a rank that cannot open the device, and mem_alloc sizes that differ:
 *     every rank gets the error, none hangs;
 *   - with --large, a 136 MiB put each way (on rxe, more RDMA WRITEs than
 *     one batch holds; BRAID_ROCE_MAX_WRITE=4096 gets there with the
 *     all-pairs puts at far less cost);
 *   - puts stuck behind a peer that stopped progressing are cancelled
 *     within the timeout;
 *   - a peer that dies: the survivor's put fails naming it. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/plugin.h>

#include "harness.h"

#define SKIP_RC     77
#define MAX_RANKS   16
#define OOB_SLOT    (64 * 1024)  /* bytes per rank per allgather */
#define SLOT        (128 * 1024) /* data slot per source rank */
#define FLAG_STRIDE 64
#define BURST       600

static const size_t sizes[] = {0, 1, 7, 64, 4096, 8192, 8193, 65536, 100000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* The services and the out-of-band board are the shared harness's
 * (tests/unit/common): the core's services, a board in shared memory for
 * the forked ranks.  A rank that fails aborts the board, so that its peers
 * stop waiting for it. */
static double      timeout_s = 60.0;
static tu_board_t *board;

/* ----------------------------------------------------------- checking */

static const braid_transport_t *tl;
static int                      g_rank = -1;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "test_roce FAIL (rank %d) %s:%d: ", g_rank,       \
                    __FILE__, __LINE__);                                      \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n  last error: %s\n", tu_last_error());         \
            if (board != NULL)                                                \
                tu_board_abort(board);                                        \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define CHECK_OK(st, what)                                                    \
    CHECK((st) == BRAID_OK, "%s returned %d", what, (int)(st))

static uint8_t pattern(int src, int dst, uint64_t it, size_t i)
{
    uint64_t x = ((uint64_t)src << 48) ^ ((uint64_t)dst << 40) ^ it;
    x *= 0x9e3779b97f4a7c15ull;
    return (uint8_t)((x >> 56) + i * 131u + (i >> 9));
}

static void fill(uint8_t *p, size_t n, int src, int dst, uint64_t it)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(src, dst, it, i);
}

static size_t flag_off(int src) { return (size_t)src * FLAG_STRIDE; }

static size_t data_off(int n, int src)
{
    return (size_t)n * FLAG_STRIDE + (size_t)src * SLOT;
}

/* This rank's scratch space inside its own area: zero-copy sources. */
static size_t scratch_off(int n, int peer)
{
    return data_off(n, n) + (size_t)peer * SLOT;
}

static size_t area_len(int n) { return scratch_off(n, n); }

static uint64_t flag_load(const braid_rmem_t *m, int src)
{
    return __atomic_load_n(
        (const uint64_t *)((const uint8_t *)m->local + flag_off(src)),
        __ATOMIC_ACQUIRE);
}

static void wait_reqs(void *tc, braid_treq_t *reqs, int n, const char *what)
{
    double t0 = tu_now();
    for (int i = 0; i < n; i++) {
        braid_status_t st;
        while ((st = tl->test(tc, &reqs[i])) == BRAID_INPROGRESS)
            CHECK(tu_now() - t0 < timeout_s, "%s: request %d stuck", what, i);
        CHECK_OK(st, what);
        CHECK(!reqs[i].active, "%s: test OK but request still active", what);
    }
}

/* Waits until src's flag in m reaches want; checks it never overtakes. */
static void wait_flag(void *tc, const braid_rmem_t *m, int src, uint64_t want,
                      int exact)
{
    double   t0 = tu_now();
    uint64_t v, prev = 0;

    while ((v = flag_load(m, src)) != want) {
        CHECK(v >= prev, "flag of rank %d went back from %llu to %llu", src,
              (unsigned long long)prev, (unsigned long long)v);
        CHECK(!exact || v < want, "flag of rank %d is %llu, beyond %llu", src,
              (unsigned long long)v, (unsigned long long)want);
        prev = v;
        CHECK_OK(tl->progress(tc), "progress");
        CHECK(tu_now() - t0 < timeout_s,
              "flag %llu of rank %d not seen "
              "(still %llu)",
              (unsigned long long)want, src, (unsigned long long)v);
    }
}

/* ------------------------------------------------------------ a rank */

static void *open_comm(int rank, int n)
{
    braid_oob_t  oob;
    int          nodes[MAX_RANKS];
    braid_topo_t topo = tu_topo(n, nodes);
    void        *tc   = NULL;

    tu_oob(&oob, board, rank);
    CHECK_OK(tl->comm_create(tl, tu_svc(), &oob, &topo, &tc), "comm_create");
    CHECK(tc != NULL, "comm_create gave no communicator");
    return tc;
}

static void bad_args(void *tc, braid_rmem_t *m, int n, int rank)
{
    braid_treq_t req   = {.handle = (void *)1, .active = 1};
    uint8_t      b[16] = {0};
    int          peer  = (rank + 1) % n;

    CHECK(tl->put_signal(tc, m, peer, 0, b, 8, 4, 1, &req) ==
                  BRAID_ERR_INVALID_ARG &&
              !req.active,
          "misaligned flag accepted");
    CHECK(tl->put_signal(tc, m, peer, m->len - 4, b, 8, 0, 1, &req) ==
              BRAID_ERR_INVALID_ARG,
          "put past the area accepted");
    CHECK(tl->put_signal(tc, m, n, 0, b, 8, 0, 1, &req) ==
              BRAID_ERR_INVALID_ARG,
          "peer out of range accepted");
    CHECK(strstr(tu_last_error(), "roce") != NULL,
          "message does not name roce: %s", tu_last_error());
    CHECK(tl->test(tc, &req) == BRAID_OK, "test of an inactive request");
}

/* Every pair, every size and source kind, sequence-numbered flags. */
static void pairs_phase(void *tc, braid_rmem_t area[2], int n, int rank,
                        int first, int last, uint8_t **heap)
{
    braid_treq_t reqs[MAX_RANKS];

    for (int it = first; it <= last; it++) {
        braid_rmem_t *m = &area[it % 2]; /* double buffered, see below */
        for (int k = 0; k < n; k++) {
            int    p = (rank + 1 + k) % n;
            size_t len =
                sizes[((size_t)it + (size_t)p + (size_t)rank) % NSIZES];
            int      kind = (it + p) % 3;
            uint8_t *src;
            if (kind == 1) /* registered: zero copy */
                src = (uint8_t *)m->local + scratch_off(n, p);
            else if (kind == 2) /* heap, odd address */
                src = heap[p] + 1;
            else
                src = heap[p];
            fill(src, len, rank, p, (uint64_t)it);
            braid_status_t st =
                tl->put_signal(tc, m, p, data_off(n, rank), src, len,
                               flag_off(rank), (uint64_t)it, &reqs[p]);
            CHECK_OK(st, "put_signal");
        }
        /* A source can be at most one iteration ahead of us: its next put
         * into this area (two iterations on) needs our put of the next
         * one, which we post only after checking this one. */
        for (int s = 0; s < n; s++) {
            size_t len =
                sizes[((size_t)it + (size_t)rank + (size_t)s) % NSIZES];
            const uint8_t *d = (const uint8_t *)m->local + data_off(n, s);
            wait_flag(tc, m, s, (uint64_t)it, 1);
            for (size_t i = 0; i < len; i++)
                CHECK(d[i] == pattern(s, rank, (uint64_t)it, i),
                      "iteration %d: byte %zu of %zu from rank %d is %#x, "
                      "expected %#x",
                      it, i, len, s, d[i], pattern(s, rank, (uint64_t)it, i));
        }
        wait_reqs(tc, reqs, n, "put_signal completion");
    }
}

/* Many puts in a row to the next rank without waiting for any: more than
 * the send queue holds and the target has receives posted.  The data (the
 * sequence number) is written before its flag, so data >= flag always. */
static void burst_phase(void *tc, braid_rmem_t *m, int n, int rank,
                        uint8_t *heap)
{
    int                      to = (rank + 1) % n, from = (rank + n - 1) % n;
    braid_treq_t            *reqs = calloc(BURST, sizeof(*reqs));
    const volatile uint64_t *data =
        (const uint64_t *)((uint8_t *)m->local + data_off(n, from));
    double t0 = tu_now();

    CHECK(reqs != NULL, "out of memory");
    for (uint64_t i = 1; i <= BURST; i++) {
        uint64_t *v = (uint64_t *)(heap + 64 * (i % 64));
        *v = i; /* each put its own source word: no reuse before completion */
        if (i > 64)
            wait_reqs(tc, &reqs[i - 65], 1, "burst source reuse");
        CHECK_OK(tl->put_signal(tc, m, to, data_off(n, rank), v, 8,
                                flag_off(rank), i, &reqs[i - 1]),
                 "burst put_signal");
    }
    for (uint64_t f; (f = flag_load(m, from)) != BURST;) {
        CHECK(*data >= f, "data %llu older than its flag %llu",
              (unsigned long long)*data, (unsigned long long)f);
        CHECK_OK(tl->progress(tc), "progress");
        CHECK(tu_now() - t0 < timeout_s, "burst: flag %llu of %d",
              (unsigned long long)f, BURST);
    }
    wait_reqs(tc, reqs, BURST, "burst completion");
    free(reqs);
}

static int rank_main(int rank, int n, int iters)
{
    braid_rmem_t area[2], extra;
    braid_link_t link = {.struct_size = sizeof(braid_link_t)};
    uint8_t     *heap[MAX_RANKS];
    void        *tc;
    double       t0 = tu_now();

    g_rank = rank;
    /* Rank 0's declared link is everyone's. */
    setenv("BRAID_ROCE_GBPS", rank == 0 ? "12.5" : "7", 1);
    tc = open_comm(rank, n);
    tl->link(tc, &link);
    CHECK(link.beta_gbps == 12.5 && link.alpha_us == 3.0,
          "link %.3g us %.3g GB/s, expected rank 0's 3 us 12.5 GB/s",
          link.alpha_us, link.beta_gbps);

    for (int i = 0; i < 2; i++) {
        CHECK_OK(tl->mem_alloc(tc, area_len(n), &area[i]), "mem_alloc");
        CHECK(area[i].len == area_len(n) && area[i].local != NULL,
              "mem_alloc: area of %zu bytes at %p", area[i].len,
              area[i].local);
        CHECK(((uintptr_t)area[i].local & 4095) == 0, "area not page "
                                                      "aligned");
        for (size_t b = 0; b < area[i].len; b += 4093)
            CHECK(((uint8_t *)area[i].local)[b] == 0, "area not zeroed");
    }
    for (int p = 0; p < n; p++) {
        heap[p] = malloc(SLOT + 1);
        CHECK(heap[p] != NULL, "out of memory");
    }
    bad_args(tc, &area[0], n, rank);
    /* Peers write into our areas as soon as they are past this point. */
    CHECK_OK(tu_barrier(board, rank), "barrier");

    pairs_phase(tc, area, n, rank, 1, iters / 2, heap);
    /* A third area, released again: ids stay in step on every rank. */
    CHECK_OK(tl->mem_alloc(tc, 4096, &extra), "mem_alloc (extra)");
    CHECK_OK(tu_barrier(board, rank), "barrier");
    tl->mem_free(tc, &extra);
    CHECK(extra.impl == NULL && extra.local == NULL, "mem_free left state");
    /* Iteration numbers go on rising: flags stay sequence numbers. */
    pairs_phase(tc, area, n, rank, iters / 2 + 1, iters, heap);
    CHECK_OK(tu_barrier(board, rank), "barrier");
    if (n > 1) {
        braid_rmem_t burst;
        CHECK_OK(tl->mem_alloc(tc, area_len(n), &burst), "mem_alloc (burst)");
        burst_phase(tc, &burst, n, rank, heap[0]);
        CHECK_OK(tu_barrier(board, rank), "barrier");
        tl->mem_free(tc, &burst);
    }

    CHECK_OK(tu_barrier(board, rank), "barrier");
    tl->mem_free(tc, &area[0]);
    /* area[1] is left to comm_destroy, which must release it. */
    tl->comm_destroy(tc);
    for (int p = 0; p < n; p++)
        free(heap[p]);
    if (rank == 0)
        printf("test_roce: %d rank(s): %d iterations of all-pairs puts%s "
               "in %.1f s\n",
               n, iters, n > 1 ? " + burst" : "", tu_now() - t0);
    return 0;
}

/* Rank 1 dies after setup; rank 0's put to it must fail naming it. */
static int dead_peer_main(int rank, int n)
{
    braid_rmem_t   m;
    braid_treq_t   req;
    uint64_t       v = 42;
    void          *tc;
    double         t0;
    braid_status_t st;

    g_rank = rank;
    tc     = open_comm(rank, n);
    CHECK_OK(tl->mem_alloc(tc, 4096, &m), "mem_alloc");
    CHECK_OK(tu_barrier(board, rank), "barrier");
    if (rank == 1)
        _exit(0); /* the kernel tears its QPs down */
    usleep(200 * 1000);
    t0 = tu_now();
    st = tl->put_signal(tc, &m, 1, 64, &v, 8, 0, 1, &req);
    /* The transport must report it (its ACK retries run out after a few
     * seconds); its own timeout would be a weaker answer. */
    while (st == BRAID_OK && req.active) {
        st = tl->test(tc, &req);
        if (st == BRAID_INPROGRESS) {
            st = BRAID_OK;
            CHECK(tu_now() - t0 < timeout_s + 30, "no error after %.0f s",
                  tu_now() - t0);
        } else if (st == BRAID_OK) {
            /* The first put may complete before rank 1's QP is gone. */
            st = tl->put_signal(tc, &m, 1, 64, &v, 8, 0, 1, &req);
        }
    }
    CHECK(st == BRAID_ERR_PEER || st == BRAID_ERR_TRANSPORT,
          "dead peer: status %d", (int)st);
    CHECK(strstr(tu_last_error(), "rank 1") != NULL,
          "error does not name rank 1: %s", tu_last_error());
    printf("test_roce: dead peer detected after %.1f s: %s\n", tu_now() - t0,
           tu_last_error());
    CHECK(tl->progress(tc) != BRAID_OK, "progress after a failure is OK");
    tl->mem_free(tc, &m);
    tl->comm_destroy(tc);
    return 0;
}

/* Cancel: rank 1 stops progressing (it waits in the oob), so once its
 * posted receives are used up rank 0's signal SENDs are retried forever
 * (RNR).  Cancelling every put must still return within the timeout with
 * every request inactive, the QP in the error state and its work flushed;
 * the communicator then refuses more puts, and its area can go. */
#define CANCEL_PUTS 200 /* more than the receives posted, less than the SQ */

static int cancel_main(int rank, int n)
{
    braid_rmem_t  m;
    braid_treq_t *reqs = calloc(CANCEL_PUTS, sizeof(*reqs));
    void         *tc;
    double        t0;

    g_rank = rank;
    CHECK(reqs != NULL, "out of memory");
    tc = open_comm(rank, n);
    CHECK_OK(tl->mem_alloc(tc, 8192, &m), "mem_alloc");
    CHECK_OK(tu_barrier(board, rank), "barrier");
    if (rank == 0) {
        /* The source lies in the area: zero-copy, no bounce slot to wait
         * for. */
        for (int i = 0; i < CANCEL_PUTS; i++)
            CHECK_OK(tl->put_signal(tc, &m, 1, 1024, (char *)m.local + 4096,
                                    512, 0, (uint64_t)i + 1, &reqs[i]),
                     "put_signal");
        usleep(100 * 1000); /* the receives run out, RNR retries begin */
        t0 = tu_now();
        for (int i = 0; i < CANCEL_PUTS; i++)
            tl->cancel(tc, &reqs[i]);
        for (int i = 0; i < CANCEL_PUTS; i++)
            CHECK(!reqs[i].active, "request %d still active after cancel", i);
        CHECK(tu_now() - t0 < timeout_s, "cancel took %.1f s", tu_now() - t0);
        printf("test_roce: %d puts cancelled in %.3f s\n", CANCEL_PUTS,
               tu_now() - t0);
        CHECK(tl->put_signal(tc, &m, 1, 1024, m.local, 8, 0, 1, &reqs[0]) !=
                  BRAID_OK,
              "put_signal after a cancel succeeded");
    }
    CHECK_OK(tu_barrier(board, rank), "barrier");
    tl->mem_free(tc, &m);
    tl->comm_destroy(tc);
    free(reqs);
    return 0;
}

/* Two ranks exchange one put larger than a batch of RDMA WRITEs (rxe
 * writes at most 8 MiB at a time, and 16 go in a batch), from a heap
 * source, which is registered for the put. */
#define LARGE_BYTES ((size_t)136 << 20)

static int large_main(int rank, int n)
{
    braid_rmem_t m;
    braid_treq_t req;
    size_t       words = LARGE_BYTES / 8;
    uint64_t    *src = malloc(LARGE_BYTES), seed = 0x1234567ull * (rank + 1);
    void        *tc;
    double       t0   = tu_now();
    int          peer = 1 - rank;

    g_rank = rank;
    CHECK(src != NULL, "out of memory");
    tc = open_comm(rank, n);
    CHECK_OK(tl->mem_alloc(tc, 64 + LARGE_BYTES, &m), "mem_alloc (large)");
    for (size_t i = 0; i < words; i++)
        src[i] = i ^ seed;
    CHECK_OK(tu_barrier(board, rank), "barrier");
    CHECK_OK(tl->put_signal(tc, &m, peer, 64, src, LARGE_BYTES, 0, 1, &req),
             "put_signal (large)");
    wait_flag(tc, &m, 0, 1, 1);
    seed = 0x1234567ull * (peer + 1);
    for (size_t i = 0; i < words; i++)
        CHECK(((uint64_t *)((uint8_t *)m.local + 64))[i] == (i ^ seed),
              "large put: word %zu of %zu wrong", i, words);
    wait_reqs(tc, &req, 1, "put_signal (large)");
    CHECK_OK(tu_barrier(board, rank), "barrier");
    tl->mem_free(tc, &m);
    tl->comm_destroy(tc);
    free(src);
    if (rank == 0)
        printf("test_roce: 2 ranks: %zu MiB puts both ways in %.1f s\n",
               LARGE_BYTES >> 20, tu_now() - t0);
    return 0;
}

/* One rank cannot open the device, then one asks for another area size:
 * every rank gets the error (naming the culprit), none hangs, and the
 * communicator stays usable after the refused mem_alloc. */
static int refuse_main(int rank, int n)
{
    int            to = (rank + 1) % n, from = (rank + n - 1) % n;
    braid_oob_t    oob;
    int            nodes[MAX_RANKS];
    braid_topo_t   topo = tu_topo(n, nodes);
    braid_rmem_t   m;
    braid_treq_t   req;
    uint64_t       v  = 7;
    void          *tc = NULL;
    braid_status_t st;

    g_rank = rank;
    tu_oob(&oob, board, rank);
    if (rank == 1)
        setenv("BRAID_ROCE_DEV", "nosuch0", 1);
    st = tl->comm_create(tl, tu_svc(), &oob, &topo, &tc);
    unsetenv("BRAID_ROCE_DEV");
    CHECK(st == BRAID_ERR_UNAVAILABLE && tc == NULL,
          "comm_create with a "
          "refusing rank 1 gave %d",
          (int)st);
    CHECK(strstr(tu_last_error(), rank == 1 ? "no such RDMA device"
                                            : "rank 1 could not") != NULL,
          "refusal message: %s", tu_last_error());

    tc = open_comm(rank, n);
    st = tl->mem_alloc(tc, rank == n - 1 ? 8192 : 4096, &m);
    CHECK(st == BRAID_ERR_MISMATCH && m.impl == NULL && m.local == NULL,
          "mem_alloc of different sizes gave %d", (int)st);
    CHECK(strstr(tu_last_error(), "mem_alloc") != NULL, "mismatch message: %s",
          tu_last_error());
    CHECK_OK(tl->mem_alloc(tc, 4096, &m), "mem_alloc after a mismatch");
    CHECK_OK(tl->put_signal(tc, &m, to, 1024 + 8 * (size_t)rank, &v, 8,
                            flag_off(rank), 5, &req),
             "put_signal");
    wait_flag(tc, &m, from, 5, 1);
    CHECK(((uint64_t *)((uint8_t *)m.local + 1024))[from] == 7,
          "data after a refused mem_alloc");
    wait_reqs(tc, &req, 1, "put_signal");
    CHECK_OK(tu_barrier(board, rank), "barrier");
    tl->mem_free(tc, &m);
    tl->comm_destroy(tc);
    if (rank == 0)
        printf("test_roce: %d ranks: refusals reported on every rank\n", n);
    return 0;
}

/* ----------------------------------------------------------- processes */

enum { PHASE_PUTS, PHASE_DEAD_PEER, PHASE_REFUSE, PHASE_LARGE, PHASE_CANCEL };

typedef struct phase_arg {
    int iters, phase;
} phase_arg_t;

static int run_rank(int rank, int n, void *arg)
{
    const phase_arg_t *pa = arg;
    switch (pa->phase) {
    case PHASE_DEAD_PEER: return dead_peer_main(rank, n);
    case PHASE_REFUSE: return refuse_main(rank, n);
    case PHASE_LARGE: return large_main(rank, n);
    case PHASE_CANCEL: return cancel_main(rank, n);
    default: return rank_main(rank, n, pa->iters);
    }
}

/* Forked ranks over a fresh board; 1 when any failed.  The watchdog of each
 * rank is generous: a rank that waits for a failed one sees the board
 * aborted, or its own timeout, well before. */
static int run_ranks(int n, int iters, int phase)
{
    phase_arg_t pa = {iters, phase};
    board          = tu_board_new(n, OOB_SLOT);
    CHECK(board != NULL, "board: %s", strerror(errno));
    int failed = tu_fork(n, run_rank, &pa, (unsigned)(4 * timeout_s + 30),
                         "test_roce", NULL);
    tu_board_free(board);
    board = NULL;
    return failed != 0;
}

/* -------------------------------------------------- without a device */

static int have_rdma_device(void)
{
    DIR           *d = opendir("/sys/class/infiniband");
    struct dirent *e;
    int            n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0;
}

/* comm_create on one rank with an environment that must be refused. */
static void expect_refused(const char *var, const char *value,
                           braid_status_t want, const char *needle)
{
    tu_board_t    *one = tu_board_new(1, OOB_SLOT);
    braid_oob_t    oob;
    int            nodes[1];
    braid_topo_t   topo = tu_topo(1, nodes);
    void          *tc   = (void *)1;
    braid_status_t st;

    CHECK(one != NULL, "out of memory");
    tu_oob(&oob, one, 0);
    setenv(var, value, 1);
    tu_clear_error();
    st = tl->comm_create(tl, tu_svc(), &oob, &topo, &tc);
    unsetenv(var);
    CHECK(st == want && tc == NULL, "%s='%s': comm_create gave %d (want %d)",
          var, value, (int)st, (int)want);
    CHECK(strstr(tu_last_error(), needle) != NULL,
          "%s='%s': message '%s' "
          "lacks '%s'",
          var, value, tu_last_error(), needle);
    tu_board_free(one);
}

static void env_checks(int device)
{
    char why[256];

    expect_refused("BRAID_ROCE_GBPS", "2x5", BRAID_ERR_PARSE,
                   "unexpected 'x' at position 1");
    expect_refused("BRAID_ROCE_ALPHA_US", "0", BRAID_ERR_PARSE,
                   "out of range");
    expect_refused("BRAID_ROCE_ALPHA_US", "1.5.2", BRAID_ERR_PARSE,
                   "position 3");
    expect_refused("BRAID_ROCE_DEV", "mlx5_0:x", BRAID_ERR_PARSE,
                   "position 7");
    expect_refused("BRAID_ROCE_DEV", "rxe0:0", BRAID_ERR_PARSE,
                   "ports are numbered from 1");
    expect_refused("BRAID_ROCE_MAX_WRITE", "4q", BRAID_ERR_PARSE,
                   "unexpected 'q' at position 1");
    expect_refused("BRAID_ROCE_MAX_WRITE", "2g", BRAID_ERR_PARSE,
                   "out of range");
    if (!device) {
        expect_refused("BRAID_ROCE_DEV", "rxe0", BRAID_ERR_UNAVAILABLE,
                       "no RDMA device");
        return;
    }
    expect_refused("BRAID_ROCE_DEV", "nosuch0", BRAID_ERR_UNAVAILABLE,
                   "no such RDMA device");
    expect_refused("BRAID_ROCE_GID_INDEX", "1a", BRAID_ERR_PARSE,
                   "position 1");
    expect_refused("BRAID_ROCE_GID_INDEX", "9999", BRAID_ERR_UNAVAILABLE,
                   "GID entries");
    setenv("BRAID_ROCE_GBPS", "fast", 1);
    CHECK(tl->probe(tl, tu_svc(), why, sizeof(why)) == BRAID_ERR_PARSE &&
              strstr(why, "BRAID_ROCE_GBPS") != NULL,
          "probe accepts BRAID_ROCE_GBPS=fast: %s", why);
    unsetenv("BRAID_ROCE_GBPS");
}

/* ---------------------------------------------------------------- main */

static const braid_transport_t *find_roce(const char *path)
{
    void                    *dl;
    const braid_plugin_t    *p  = tu_plugin_open(path, &dl);
    const braid_transport_t *rt = tu_transport(p, "roce");
    CHECK(rt != NULL, "%s brings no roce transport", path);
    return rt;
}

int main(int argc, char **argv)
{
    int  n = 4, iters = 60, require = 0, large = 0, puts_only = 0, device;
    char why[256]      = "";
    const char *plugin = NULL;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--require") == 0)
            require = 1;
        else if (strcmp(argv[i], "--large") == 0)
            large = 1;
        else if (strcmp(argv[i], "--puts-only") == 0)
            puts_only = 1;
        else if (strcmp(argv[i], "-v") == 0)
            setenv("BRAID_DEBUG", "debug", 1); /* the core's log */
        else if (argv[i][0] != '-' && plugin == NULL)
            plugin = argv[i];
        else {
            fprintf(stderr,
                    "usage: test_roce PLUGIN.so [-n RANKS] "
                    "[--iters N] [--require] [--large] [--puts-only] [-v]\n");
            return 2;
        }
    }
    if (plugin == NULL || n < 2 || n > MAX_RANKS || iters < 2) {
        fprintf(stderr,
                "test_roce: need PLUGIN.so, 2 <= RANKS <= %d, "
                "iters >= 2\n",
                MAX_RANKS);
        return 2;
    }
    if (getenv("BRAID_TIMEOUT") != NULL)
        timeout_s = atof(getenv("BRAID_TIMEOUT"));
    tu_set_timeout(timeout_s);
    setvbuf(stdout, NULL, _IONBF, 0);
    tl = find_roce(plugin);
    CHECK(tl->caps & BRAID_CAP_PUT_SIGNAL, "roce lacks PUT_SIGNAL");
    CHECK(tl->put_signal && tl->mem_alloc && tl->mem_free && tl->test &&
              tl->progress && tl->cancel && tl->link && tl->comm_create &&
              tl->comm_destroy,
          "roce transport has NULL entry points");

    device = have_rdma_device();
    env_checks(device);
    braid_status_t st = tl->probe(tl, tu_svc(), why, sizeof(why));
    if (st != BRAID_OK) {
        if (!device)
            CHECK(strstr(why, "no RDMA device") != NULL,
                  "no device, but "
                  "probe says '%s'",
                  why);
        printf("test_roce: SKIP: roce transport unavailable: %s\n", why);
        return require ? 1 : SKIP_RC;
    }
    printf("test_roce: probe OK\n");
    if (run_ranks(1, iters, PHASE_PUTS) || run_ranks(n, iters, PHASE_PUTS) ||
        (!puts_only && run_ranks(3, 0, PHASE_REFUSE)) ||
        (large && run_ranks(2, 0, PHASE_LARGE)) ||
        (!puts_only && run_ranks(2, 0, PHASE_CANCEL)) ||
        (!puts_only && run_ranks(2, 0, PHASE_DEAD_PEER)))
        return 1;
    printf("test_roce: PASS\n");
    return 0;
}
