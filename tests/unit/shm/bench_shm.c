/* Latency of the shm transport, ranks forked on this host.
 *
 *   bench_shm PLUGIN.so [-n RANKS] [-i ITERS] [-b BATCHES] [-p] [TEST...]
 *
 * -p pins rank i to cpu i mod ncpu (as mpirun --bind-to core does).
 *
 * TEST: put-pingpong  put_signal 8 bytes + flag there and back (2 ranks);
 *                     prints one-way = round trip / 2
 *       put-exchange  every rank put_signals 8 bytes to every peer and
 *                     waits for all flags: the one-shot all-reduce pattern
 *       sr-pingpong   isend/irecv 8 bytes there and back (2 ranks)
 *       sr-ring       n-1 steps of receive-from-left/send-to-right, 8 bytes:
 *                     the ring all-reduce pattern
 *       sr-bw         8 MiB send/receive between 2 ranks, GB/s
 *       raw-pingpong, raw-exchange: put-pingpong and put-exchange with
 *                     plain stores into one shared page, no transport: the
 *                     floor of this machine
 * Waits behave like the core's: poll, and with more ranks than cores
 * sched_yield after every unsuccessful poll (else every 256th: the machine
 * is shared).  Each batch of ITERS is timed
 * (per iteration); printed are the median batch, the 10th percentile (on a
 * shared machine a short batch often runs undisturbed: that is the floor)
 * and the max. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

typedef struct bench {
    int            pin;
    unsigned char *raw; /* MAP_SHARED page of the raw-* tests */
    const char    *test;
    int            iters;
    int            batches;
    double *result; /* shared: rank 0 writes batches' per-iteration us */
} bench_t;

static double *mmap_shared_doubles(size_t n)
{
    void *p = mmap(NULL, n * sizeof(double), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static braid_topo_t one_host(th_rank_t *r, int *nodes)
{
    return tu_topo(r->size, nodes);
}

/* As the core's wait loop: poll, yield on an oversubscribed host. */
static void poll_flag(th_rank_t *r, void *tc, const void *p, uint64_t want)
{
    unsigned polls = 0;

    while (__atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE) < want) {
        r->tl->progress(tc);
        th_relax(r, &polls);
    }
}

static void wait_reqs(th_rank_t *r, void *tc, braid_treq_t *reqs, int n)
{
    unsigned polls = 0;

    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i].active &&
                r->tl->test(tc, &reqs[i]) == BRAID_INPROGRESS) {
                pending++;
            }
        }
        if (!pending) {
            return;
        }
        th_relax(r, &polls);
    }
}

/* One iteration of the chosen pattern; it is the iteration number (from 1). */
static void step(th_rank_t *r, void *tc, const bench_t *b, braid_rmem_t *mem,
                 uint64_t it, unsigned char *sbuf, unsigned char *rbuf,
                 size_t len)
{
    const int      n = r->size, me = r->rank;
    unsigned char *base = mem->local;
    braid_treq_t   req[2];
    uint64_t       v = it, acc = 0;

    if (strncmp(b->test, "raw-", 4) == 0) {
        /* line (dst*n + src) of the shared page: flag at 0, data at 8 */
        int two = strcmp(b->test, "raw-pingpong") == 0;
        for (int k = 1; k < n; k++) {
            int peer = (me + k) % n;
            if (two && me == 1) {
                break;
            }
            unsigned char *line =
                b->raw + ((size_t)peer * (size_t)n + me) * 64;
            memcpy(line + 8, &v, 8);
            __atomic_store_n((uint64_t *)(void *)line, it, __ATOMIC_RELEASE);
        }
        for (int k = 1; k < n; k++) {
            int            src  = (me - k + n) % n;
            unsigned char *line = b->raw + ((size_t)me * (size_t)n + src) * 64;
            unsigned       polls = 0;
            while (__atomic_load_n((uint64_t *)(void *)line,
                                   __ATOMIC_ACQUIRE) < it) {
                th_relax(r, &polls);
            }
            acc += *(uint64_t *)(void *)(line + 8);
        }
        if (two && me == 1) {
            unsigned char *line = b->raw + 1 * 64; /* dst 0, src 1 */
            memcpy(line + 8, &v, 8);
            __atomic_store_n((uint64_t *)(void *)line, it, __ATOMIC_RELEASE);
        }
        (void)acc;
    } else if (strcmp(b->test, "put-pingpong") == 0) {
        /* data at 0, flag at 8: one cache line moves per put */
        if (me == 0) {
            r->tl->put_signal(tc, mem, 1, 0, &v, 8, 8, it, &req[0]);
            poll_flag(r, tc, base + 8, it);
        } else {
            poll_flag(r, tc, base + 8, it);
            r->tl->put_signal(tc, mem, 0, 0, &v, 8, 8, it, &req[0]);
        }
    } else if (strcmp(b->test, "put-exchange") == 0) {
        /* slot (parity, src): 8 bytes of data and the flag, one line each */
        size_t par = it & 1;
        for (int k = 1; k < n; k++) {
            int    peer = (me + k) % n;
            size_t off  = (par * (size_t)n + (size_t)me) * 64;
            r->tl->put_signal(tc, mem, peer, off, &v, 8, off + 8, it, &req[0]);
        }
        for (int k = 1; k < n; k++) {
            int    src = (me - k + n) % n;
            size_t off = (par * (size_t)n + (size_t)src) * 64;
            poll_flag(r, tc, base + off + 8, it);
            acc += *(uint64_t *)(void *)(base + off);
        }
        (void)acc;
    } else if (strcmp(b->test, "sr-pingpong") == 0) {
        uint64_t tag = BRAID_TAG(it, 0);
        if (me == 0) {
            r->tl->isend(tc, 1, tag, sbuf, len, &req[0]);
            r->tl->irecv(tc, 1, tag, rbuf, len, &req[1]);
        } else {
            r->tl->irecv(tc, 0, tag, rbuf, len, &req[1]);
            wait_reqs(r, tc, &req[1], 1);
            r->tl->isend(tc, 0, tag, sbuf, len, &req[0]);
        }
        wait_reqs(r, tc, req, 2);
    } else if (strcmp(b->test, "sr-ring") == 0) {
        for (int s = 0; s < n - 1; s++) {
            uint64_t tag = BRAID_TAG(it, s);
            r->tl->irecv(tc, (me - 1 + n) % n, tag, rbuf, len, &req[1]);
            r->tl->isend(tc, (me + 1) % n, tag, sbuf, len, &req[0]);
            wait_reqs(r, tc, req, 2);
        }
    } else if (strcmp(b->test, "sr-bw") == 0) {
        uint64_t tag = BRAID_TAG(it, 1);
        if (me == 0) {
            r->tl->isend(tc, 1, tag, sbuf, len, &req[0]);
            wait_reqs(r, tc, req, 1);
        } else if (me == 1) {
            r->tl->irecv(tc, 0, tag, rbuf, len, &req[1]);
            wait_reqs(r, tc, &req[1], 1);
        }
        /* back-to-back: the next send may start before this receive ends */
    }
}

static int body(th_rank_t *r, void *arg)
{
    const bench_t *b = arg;
    int            nodes[64];
    braid_topo_t   topo = one_host(r, nodes);
    void          *tc   = NULL;
    braid_rmem_t   mem;
    size_t         len  = strcmp(b->test, "sr-bw") == 0 ? (size_t)8 << 20 : 8;
    unsigned char *sbuf = calloc(1, len), *rbuf = calloc(1, len);
    uint64_t       it = 0;

    if (b->pin) {
        cpu_set_t set;
        long      ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_ZERO(&set);
        CPU_SET(r->rank % (ncpu > 0 ? ncpu : 1), &set);
        sched_setaffinity(0, sizeof(set), &set);
    }

    if (r->tl->comm_create(r->tl, r->svc, &r->oob, &topo, &tc) != BRAID_OK ||
        r->tl->mem_alloc(tc, (size_t)r->size * 128 + 64, &mem) != BRAID_OK) {
        fprintf(stderr, "setup failed: %s\n", th_last_error());
        return 1;
    }
    for (int w = 0; w < b->iters / 10 + 1; w++) { /* warm-up: page faults */
        step(r, tc, b, &mem, ++it, sbuf, rbuf, len);
    }
    for (int bt = 0; bt < b->batches; bt++) {
        th_progress_barrier(r, tc);
        double t0 = th_now();
        for (int i = 0; i < b->iters; i++) {
            step(r, tc, b, &mem, ++it, sbuf, rbuf, len);
        }
        double us = (th_now() - t0) * 1e6 / b->iters;
        if (r->rank == 0) {
            b->result[bt] = us;
        }
    }
    th_progress_barrier(r, tc);
    r->tl->mem_free(tc, &mem);
    r->tl->comm_destroy(tc);
    free(sbuf);
    free(rbuf);
    return 0;
}

int main(int argc, char **argv)
{
    static const char *all[] = {"raw-pingpong", "put-pingpong", "raw-exchange",
                                "put-exchange", "sr-pingpong",  "sr-ring",
                                "sr-bw"};
    const char        *tests[8];
    int                ntests = 0, n = 2, iters = 1000, batches = 201, pin = 0;
    const braid_transport_t *tl;

    if (argc < 2) {
        fprintf(stderr,
                "usage: %s PLUGIN.so [-n RANKS] [-i ITERS] "
                "[-b BATCHES] [TEST...]\n",
                argv[0]);
        return 2;
    }
    tl = th_load(argv[1]);
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc) {
            batches = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-p") == 0) {
            pin = 1;
        } else if (ntests < 8) {
            tests[ntests++] = argv[i];
        }
    }
    if (n < 1 || n > 64 || iters < 1 || batches < 1 || batches > 1000) {
        fprintf(stderr, "bad -n/-i/-b\n");
        return 2;
    }
    if (ntests == 0) {
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
            tests[ntests++] = all[i];
        }
    }
    double        *res = mmap_shared_doubles((size_t)batches);
    unsigned char *raw = (unsigned char *)mmap_shared_doubles(65536 / 8);
    for (int t = 0; t < ntests; t++) {
        int     two = strstr(tests[t], "pingpong") || strstr(tests[t], "bw");
        int     nr  = two ? 2 : n;
        bench_t b   = {pin, raw, tests[t], iters, batches, res};
        memset(raw, 0, 65536);
        if (strcmp(tests[t], "sr-bw") == 0) {
            b.iters = iters / 200 + 2;
        }
        if (th_run(tl, nr, body, &b, 300, tests[t]) != 0) {
            return 1;
        }
        qsort(res, (size_t)batches, sizeof(double), cmp_double);
        double med = res[batches / 2], p10 = res[batches / 10],
               mx = res[batches - 1];
        if (strcmp(tests[t], "sr-bw") == 0) {
            printf("%-13s n=%d  %6.2f GB/s median, %6.2f p90, %6.2f worst\n",
                   tests[t], nr, 8.388608e6 / (med * 1e3),
                   8.388608e6 / (p10 * 1e3), 8.388608e6 / (mx * 1e3));
        } else {
            double f = strstr(tests[t], "pingpong") ? 0.5 : 1.0;
            printf("%-13s n=%d  %8.3f us%s median, %8.3f p10, %8.3f max\n",
                   tests[t], nr, med * f, f < 1 ? " one-way" : "/iter   ",
                   p10 * f, mx * f);
        }
        fflush(stdout);
    }
    return 0;
}
