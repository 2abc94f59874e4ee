/* The NCCL backend's own logic (plugins/backends/nccl, without the ABI
 * glue) against stub libraries, so that it runs without a GPU: dtype and
 * op mapping, AVG by NCCL's avg and by sum plus division, the lazy
 * non-blocking set-up, every error path (NCCL's and CUDA's words in the
 * message, the right status, the communicator aborted and failing later
 * calls), cancel, the watchdog of stream-ordered calls, NCCL's cost model
 * and the network detection.  What NCCL computes on a GPU is tested by
 * tests/gpu/run.sh on a GPU machine.
 *   usage: test_nccl_backend STUB_DIR */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../unit/check.h"
#include "kernels/reduce.h"
#include "nccl.h"

/* ------------------------------------------------- what the core offers */

static char           last_msg[1024];
static _Atomic double timeout = 30; /* the watchdog thread reads it */

static void host_log(braid_log_level_t level, const char *comp,
                     const char *fmt, ...)
{
    if (getenv("TEST_VERBOSE") == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%d %s] ", (int)level, comp);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static braid_status_t host_error(braid_status_t st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof(last_msg), fmt, ap);
    va_end(ap);
    return st;
}

static double host_timeout(void) { return timeout; }

static double host_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

braid_nccl_host_t braid_nccl_host = {
    host_log, host_error, braid_kernel_finish_avg, host_timeout, host_now};

/* Two ranks, seen from rank 0: every slot gets rank 0's contribution. */
static braid_status_t oob_allgather(void *ctx, const void *send, void *recv,
                                    size_t len)
{
    (void)ctx;
    memcpy(recv, send, len);
    memcpy((char *)recv + len, send, len);
    return BRAID_OK;
}
static braid_status_t oob_barrier(void *ctx)
{
    (void)ctx;
    return BRAID_OK;
}
static const braid_oob_t oob = {
    .rank = 0, .size = 2, .allgather = oob_allgather, .barrier = oob_barrier};

/* ----------------------------------------------------------- the stubs */

typedef struct stub_call {
    int          coll;
    size_t       count;
    int          dtype, op, root;
    cudaStream_t stream;
} stub_call_t;

static const stub_call_t *(*last_call)(void);
static int (*aborts)(void), (*destroys)(void);
static void (*fail)(const char *what); /* stub_nccl_fail */
static void (*event_mode)(int mode);   /* stub_cuda_event_mode: 0 ready,
                                          1 pending, 2 error */

static const braid_nccl_lib_t *lib;

static braid_nccl_comm_t *new_comm(void)
{
    braid_nccl_comm_t *c = NULL;
    CHECK(braid_nccl_comm_create(&c, lib, &oob) == BRAID_OK, "comm_create: %s",
          last_msg);
    return c;
}

static braid_nccl_op_t make_op(braid_coll_t coll, const void *send, void *recv,
                               size_t count, braid_dtype_t dt, braid_op_t op)
{
    return (braid_nccl_op_t){.coll    = coll,
                             .sendbuf = send,
                             .recvbuf = recv,
                             .count   = count,
                             .dtype   = dt,
                             .op      = op};
}

/* Runs a plain call to completion. */
static braid_status_t run(braid_nccl_comm_t *c, braid_nccl_op_t *op)
{
    braid_status_t st = braid_nccl_coll_start(c, op);
    for (int i = 0; st == BRAID_OK && i < 1000; i++) {
        st = braid_nccl_coll_test(c, op);
        if (st != BRAID_INPROGRESS)
            break;
    }
    braid_nccl_coll_cancel(c, op);
    return st;
}

static void test_mapping(void)
{
    braid_nccl_comm_t *c = new_comm();
    if (c == NULL)
        return;
    static const int want_dt[BRAID_DTYPE_COUNT] = {7, 8, 6, 9, 2, 4, 1};
    static const int want_op[BRAID_OP_COUNT]    = {0, 1, 3, 2, 4};
    char             send[64]                   = {0}, recv[64];
    for (int dt = 0; dt < BRAID_DTYPE_COUNT; dt++)
        for (int op = 0; op < BRAID_OP_COUNT; op++) {
            braid_nccl_op_t o = make_op(BRAID_COLL_ALLREDUCE, send, recv, 3,
                                        (braid_dtype_t)dt, (braid_op_t)op);
            CHECK(run(c, &o) == BRAID_OK, "allreduce dt %d op %d: %s", dt, op,
                  last_msg);
            const stub_call_t *l = last_call();
            CHECK(l->dtype == want_dt[dt] && l->op == want_op[op] &&
                      l->count == 3 && l->coll == 0,
                  "dt %d op %d reached NCCL as dtype %d op %d count %zu", dt,
                  op, l->dtype, l->op, l->count);
            CHECK(l->stream == c->stream && c->stream != NULL,
                  "a plain call runs on the communicator's stream");
        }
    CHECK(c->nonblocking, "NCCL >= 2.14: non-blocking set-up");

    float           in[4] = {1, 2, 3, 4}, out[8];
    braid_nccl_op_t o =
        make_op(BRAID_COLL_REDUCE_SCATTER, in, out, 2, BRAID_F32, BRAID_MAX);
    CHECK(run(c, &o) == BRAID_OK && last_call()->coll == 1 &&
              last_call()->count == 2 && last_call()->op == 2,
          "reduce_scatter: recvcount and op passed on");
    o = make_op(BRAID_COLL_ALLGATHER, in, out, 4, BRAID_F32, BRAID_SUM);
    CHECK(run(c, &o) == BRAID_OK && last_call()->coll == 2 &&
              last_call()->count == 4 && out[4] == 1 && out[7] == 4,
          "allgather: sendcount passed on");
    o      = make_op(BRAID_COLL_BROADCAST, in, in, 4, BRAID_I32, BRAID_SUM);
    o.root = 1;
    CHECK(run(c, &o) == BRAID_OK && last_call()->coll == 3 &&
              last_call()->root == 1 && last_call()->dtype == 2,
          "broadcast: root passed on");
    o = make_op(BRAID_COLL_BARRIER, NULL, NULL, 0, BRAID_U8, BRAID_SUM);
    CHECK(run(c, &o) == BRAID_OK && last_call()->coll == 0 &&
              last_call()->count == 1 && last_call()->dtype == 2,
          "barrier: an all-reduce of one int32 on scratch memory");
    int before = destroys(), aborted = aborts();
    braid_nccl_comm_destroy(c);
    CHECK(destroys() == before + 1 && aborts() == aborted,
          "a healthy communicator is finalised and destroyed");
}

static void test_avg(void)
{
    braid_nccl_comm_t *c = new_comm();
    if (c == NULL)
        return;
    float           in[5] = {1, 2, 3, 4.5f, -7}, out[5];
    braid_nccl_op_t o =
        make_op(BRAID_COLL_ALLREDUCE, in, out, 5, BRAID_F32, BRAID_AVG);
    CHECK(run(c, &o) == BRAID_OK && last_call()->op == 4,
          "avg is ncclAvg on NCCL 2.28");
    setenv("BRAID_NCCL_AVG", "sum", 1);
    memset(out, 0, sizeof(out));
    CHECK(run(c, &o) == BRAID_OK && last_call()->op == 0, "avg by sum: %s",
          last_msg);
    /* The stub sums 2 equal contributions; the division gives them back. */
    CHECK(memcmp(out, in, sizeof(in)) == 0, "sum / 2 = input: %g %g %g",
          out[0], out[3], out[4]);
    unsetenv("BRAID_NCCL_AVG");

    /* An NCCL before 2.10: no bf16, avg by sum. */
    braid_nccl_lib_t *old = (braid_nccl_lib_t *)lib;
    old->has_avg          = 0;
    o = make_op(BRAID_COLL_ALLREDUCE, in, out, 2, BRAID_BF16, BRAID_SUM);
    CHECK(run(c, &o) == BRAID_ERR_NOT_SUPPORTED &&
              strstr(last_msg, "bf16 needs NCCL 2.10"),
          "bf16 refused before 2.10: %s", last_msg);
    o = make_op(BRAID_COLL_REDUCE_SCATTER, in, out, 2, BRAID_F32, BRAID_AVG);
    CHECK(run(c, &o) == BRAID_OK && last_call()->op == 0 && out[0] == in[0] &&
              out[1] == in[1],
          "reduce_scatter avg by sum before 2.10");
    old->has_avg = 1;
    braid_nccl_comm_destroy(c);
}

static void test_errors(void)
{
    char            buf[16] = {0};
    braid_nccl_op_t o =
        make_op(BRAID_COLL_ALLREDUCE, buf, buf, 2, BRAID_I32, BRAID_SUM);

    /* The set-up fails on every rank with NCCL's reason. */
    fail("init");
    braid_nccl_comm_t *c  = new_comm();
    braid_status_t     st = run(c, &o);
    CHECK(st == BRAID_ERR_INVALID_ARG &&
              strstr(last_msg, "NCCL error 5 (invalid usage): stub: Duplicate "
                               "GPU detected"),
          "init failure: %d %s", st, last_msg);
    fail("");
    st = run(c, &o);
    CHECK(st == BRAID_ERR_INVALID_ARG && strstr(last_msg, "failed earlier") &&
              strstr(last_msg, "Duplicate GPU"),
          "later calls repeat the cause: %s", last_msg);
    braid_nccl_comm_destroy(c);

    fail("uid");
    c  = new_comm();
    st = run(c, &o);
    CHECK(st == BRAID_ERR_TRANSPORT && strstr(last_msg, "rank 0") &&
              strstr(last_msg, "no network interface"),
          "unique id failure: %s", last_msg);
    fail("");
    braid_nccl_comm_destroy(c);

    /* A collective that NCCL refuses: the communicator is aborted. */
    c = new_comm();
    CHECK(run(c, &o) == BRAID_OK, "first call fine");
    fail("coll");
    int before = aborts();
    st         = run(c, &o);
    CHECK(st == BRAID_ERR_TRANSPORT &&
              strstr(last_msg, "allreduce: NCCL error 2 (unhandled system "
                               "error): stub: socket closed by peer"),
          "collective failure: %d %s", st, last_msg);
    CHECK(aborts() == before + 1, "aborted once");
    fail("");
    CHECK(run(c, &o) == BRAID_ERR_TRANSPORT &&
              strstr(last_msg, "socket closed"),
          "and stays failed: %s", last_msg);
    braid_nccl_comm_destroy(c);

    /* A peer dies while the kernel waits: NCCL's asynchronous error. */
    c = new_comm();
    CHECK(run(c, &o) == BRAID_OK, "first call fine");
    event_mode(1);
    fail("async");
    before = aborts();
    st     = run(c, &o);
    CHECK(st == BRAID_ERR_PEER && strstr(last_msg, "remote process exited"),
          "asynchronous error: %d %s", st, last_msg);
    CHECK(aborts() == before + 1, "aborted");
    fail("");
    braid_nccl_comm_destroy(c);

    /* No error, but the call never completes: cancel (after the core's
     * timeout) aborts, so that the kernel lets go of the buffers. */
    c      = new_comm();
    before = aborts();
    st     = braid_nccl_coll_start(c, &o);
    CHECK(st == BRAID_OK && braid_nccl_coll_test(c, &o) == BRAID_INPROGRESS,
          "pending call in progress");
    braid_nccl_coll_cancel(c, &o);
    CHECK(aborts() == before + 1, "cancel aborts a running call");
    CHECK(run(c, &o) == BRAID_ERR_STATE && strstr(last_msg, "timed out"),
          "then the communicator refuses: %s", last_msg);
    braid_nccl_comm_destroy(c);

    /* CUDA reports a failed kernel. */
    event_mode(2);
    c  = new_comm();
    st = run(c, &o);
    CHECK(st == BRAID_ERR_TRANSPORT &&
              strstr(last_msg, "CUDA error 700 (an illegal memory access"),
          "CUDA error: %d %s", st, last_msg);
    event_mode(0);
    braid_nccl_comm_destroy(c);
}

static void test_stream(void)
{
    static char        user_stream;
    cudaStream_t       s       = (cudaStream_t)&user_stream;
    char               buf[16] = {0};
    braid_nccl_comm_t *c       = new_comm();
    braid_nccl_op_t    o =
        make_op(BRAID_COLL_ALLREDUCE, buf, buf, 4, BRAID_F32, BRAID_SUM);
    o.on_stream = 1;
    o.stream    = s;
    CHECK(braid_nccl_coll_start(c, &o) == BRAID_OK &&
              braid_nccl_coll_test(c, &o) == BRAID_OK,
          "stream-ordered: done once enqueued: %s", last_msg);
    CHECK(last_call()->stream == s, "on the caller's stream");
    CHECK(c->watch != NULL, "watched");

    /* It never completes: the watchdog aborts after the timeout. */
    timeout = 0.2;
    event_mode(1);
    int before = aborts();
    CHECK(braid_nccl_coll_start(c, &o) == BRAID_OK, "enqueued");
    for (int i = 0; i < 500 && aborts() == before; i++)
        usleep(10000);
    CHECK(aborts() == before + 1, "watchdog aborted within the timeout");
    braid_status_t st = braid_nccl_coll_start(c, &o);
    CHECK(st == BRAID_ERR_TIMEOUT && strstr(last_msg, "BRAID_TIMEOUT=0.2"),
          "later calls say why: %d %s", st, last_msg);
    event_mode(0);
    timeout = 30;
    braid_nccl_comm_destroy(c);
}

/* ------------------------------------------------------------- the model */

static void test_model(void)
{
    braid_nccl_model_t nvl    = {BRAID_NCCL_LINK_NVLINK, 18 * 20.6, 50};
    braid_nccl_model_t pci    = {BRAID_NCCL_LINK_PCI, 24, 25};
    const char        *choice = NULL;
    /* 8 GPUs, one node, 8 bytes: ring/LL, 6.6 + 14 steps x 0.6 us. */
    double t =
        braid_nccl_model_time(&nvl, BRAID_COLL_ALLREDUCE, 8, 8, 1, 8, &choice);
    CHECK(fabs(t - 15.0) < 0.01 && !strcmp(choice, "ring/LL"),
          "8 B on 8 NVLink GPUs: %.3f us %s", t, choice);
    t = braid_nccl_model_time(&nvl, BRAID_COLL_ALLREDUCE, 256u << 20, 8, 1, 8,
                              &choice);
    double bw = 18 * 20.6 * 8 / 14.0;
    CHECK(fabs(t - (8.4 + 14 * 3.4 + (256u << 20) / (1e3 * bw))) < 0.01 &&
              !strcmp(choice, "ring/Simple"),
          "256 MiB: ring/Simple at the bus bandwidth: %.1f us %s", t, choice);
    braid_nccl_model_time(&pci, BRAID_COLL_ALLREDUCE, 1 << 20, 4, 1, 4,
                          &choice);
    CHECK(strstr(choice, "LL128") == NULL, "no LL128 without NVLink (%s)",
          choice);
    /* Across 8 nodes the tree's log2 beats the ring's 2(n-1) steps. */
    braid_nccl_model_time(&pci, BRAID_COLL_ALLREDUCE, 8, 8, 8, 1, &choice);
    CHECK(!strncmp(choice, "tree", 4), "8 nodes, 8 B: %s", choice);
    double ag = braid_nccl_model_time(&pci, BRAID_COLL_ALLGATHER, 1 << 20, 4,
                                      1, 4, NULL);
    double rs = braid_nccl_model_time(&pci, BRAID_COLL_REDUCE_SCATTER, 1 << 20,
                                      4, 1, 4, NULL);
    double ar = braid_nccl_model_time(&pci, BRAID_COLL_ALLREDUCE, 4 << 20, 4,
                                      1, 4, NULL);
    CHECK(fabs(ag - rs) < 1e-9 && ar > ag,
          "allgather = reduce_scatter of the same part, allreduce of the "
          "whole costs more: %.1f %.1f %.1f",
          ag, rs, ar);
    double prev = 0;
    for (size_t b = 8; b <= (1u << 30); b *= 4) {
        double x = braid_nccl_model_time(&nvl, BRAID_COLL_BROADCAST, b, 4, 2,
                                         2, NULL);
        CHECK(x > prev, "time grows with size (%zu B: %.2f)", b, x);
        prev = x;
    }
    CHECK(braid_nccl_model_time(&nvl, BRAID_COLL_BARRIER, 0, 4, 1, 4, NULL) ==
              braid_nccl_model_time(&nvl, BRAID_COLL_ALLREDUCE, 4, 4, 1, 4,
                                    NULL),
          "a barrier costs a one-word all-reduce");
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[1024], dir[1100];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(dir, sizeof(dir), "mkdir -p \"$(dirname '%s')\"", path);
    CHECK(system(dir) == 0, "mkdir for %s", rel);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_net(void)
{
    char root[] = "/tmp/braid-sysfs-XXXXXX";
    CHECK(mkdtemp(root) != NULL, "temporary sysfs");
    CHECK(braid_nccl_links_net_gbps(root) == 1.25, "nothing: 10 Gb/s");
    put(root, "class/net/lo/operstate", "unknown\n");
    put(root, "class/net/lo/speed", "100000\n");
    put(root, "class/net/eth0/operstate", "up\n");
    put(root, "class/net/eth0/speed", "100000\n");
    put(root, "class/net/eth1/operstate", "down\n");
    put(root, "class/net/eth1/speed", "400000\n");
    CHECK(braid_nccl_links_net_gbps(root) == 12.5,
          "fastest Ethernet that is up: %.2f",
          braid_nccl_links_net_gbps(root));
    put(root, "class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
    put(root, "class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)\n");
    put(root, "class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
    put(root, "class/infiniband/mlx5_1/ports/1/rate", "400 Gb/sec (4X NDR)\n");
    CHECK(braid_nccl_links_net_gbps(root) == 25,
          "an active RDMA port wins: %.2f", braid_nccl_links_net_gbps(root));
    char rm[128];
    snprintf(rm, sizeof(rm), "rm -rf %s", root);
    CHECK(system(rm) == 0, "clean up");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_nccl_backend STUB_DIR\n");
        return 2;
    }
    char path[4200];
    snprintf(path, sizeof(path), "%s/libstub-nccl.so", argv[1]);
    setenv("BRAID_NCCL_LIBRARY", path, 1);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL, "stub: %s", dlerror());
    if (dl == NULL)
        return check_summary("nccl_backend");
    last_call = (const stub_call_t *(*)(void))dlsym(dl, "stub_nccl_last_call");
    aborts    = (int (*)(void))dlsym(dl, "stub_nccl_aborts");
    destroys  = (int (*)(void))dlsym(dl, "stub_nccl_destroys");
    fail      = (void (*)(const char *))dlsym(dl, "stub_nccl_fail");
    snprintf(path, sizeof(path), "%s/libstub-cudart.so", argv[1]);
    setenv("BRAID_CUDART_LIBRARY", path, 1);
    void *rt = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(rt != NULL, "stub: %s", dlerror());
    if (rt == NULL)
        return check_summary("nccl_backend");
    event_mode = (void (*)(int))dlsym(rt, "stub_cuda_event_mode");
    CHECK(last_call && aborts && destroys && fail && event_mode, "stub knobs");
    if (!last_call || !aborts || !destroys || !fail || !event_mode)
        return check_summary("nccl_backend");
    char why[256] = "";
    CHECK(braid_nccl_lib_open(&lib, why, sizeof(why)) == BRAID_OK,
          "open the stubs: %s", why);
    if (lib == NULL)
        return check_summary("nccl_backend");
    CHECK(!strcmp(lib->version, "2.28.9") && lib->has_avg &&
              lib->comm_init_rank_config != NULL &&
              lib->get_last_error != NULL,
          "version %s, avg, non-blocking init, last error", lib->version);

    test_mapping();
    test_avg();
    test_errors();
    test_stream();
    test_model();
    test_net();
    return check_summary("nccl_backend");
}
