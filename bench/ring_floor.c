/* braid-ring-floor: what a 2-rank allgather through a shared ring can cost
 * on this machine, with nothing of braid in the way.  Two processes, each
 * on a CPU of its own, do what pipe@shm does on 2 ranks (its shared AG
 * ring): copy the own block into the receive buffer, then, chunk by chunk,
 * write the own block into a ring of slots in shared memory and copy the
 * peer's block out of the peer's ring, a release flag per slot and a
 * credit per ring.  The same three copies are also timed with the ring
 * private to each process ("alone"): the difference is what moving the
 * slots' lines from one core to the other costs.  The bound for pipe's
 * allgather (docs/performance.md); braid's own time is braid-bench's.
 * With -n 1 every copy writes with streaming stores, as pipe's allgather
 * does: the slots' lines then reach the reader through memory, not from
 * the writer's cache.  shared/alone with -n 0 tells where the hypervisor
 * has put the two vCPUs: near 1 where they share a cache, well above it
 * where a line crossing between them costs more than memory (figures:
 * docs/performance.md, "The slow mode is where the two vCPUs sit").
 *
 *   braid-ring-floor [-s MIB] [-c KIB] [-d SLOTS] [-r REPS] [-n 0|1]
 *   (defaults: a 128 MiB block per rank, i.e. braid-bench's 256 MiB
 *   allgather on 2 ranks; 64 KiB chunks, 8 slots: pipe's n·D; 7 reps;
 *   plain memcpy)
 *
 * Prints, per mode, the median and best of REPS (the first untimed) in ms
 * of the slower process, and the bus bandwidth of the median as
 * braid-bench computes it for an allgather ((n-1)/n · size / time). */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#endif

#define MAX_REPS  64
#define MAX_SLOTS 64
#define LINE      64

typedef struct ring {
    _Alignas(LINE) uint64_t flag[MAX_SLOTS]; /* position + 1 of each slot */
    _Alignas(LINE) uint64_t credit;          /* chunks the peer has read */
} ring_t;

typedef struct opts {
    size_t block, chunk;
    int    slots, reps, stream;
} opts_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* memcpy, or (stream) the same with streaming stores: dst and n are
 * multiples of 64 here (malloc'd 64-aligned, sizes in KiB). */
static void copy(void *dst, const void *src, size_t n, int stream)
{
#ifdef HAVE_STREAM
    if (stream) {
        char       *d = dst;
        const char *s = src;
        for (size_t i = 0; i < n; i += 64)
            for (size_t j = 0; j < 64; j += 16)
                _mm_stream_si128(
                    (__m128i *)(void *)(d + i + j),
                    _mm_loadu_si128((const __m128i *)(const void *)(s + i + j)));
        _mm_sfence(); /* weakly ordered: before the flag */
        return;
    }
#endif
    (void)stream;
    memcpy(dst, src, n);
}

/* One allgather of rank me: own block into recv[me], the peer's block out
 * of its ring into recv[1 - me].  mine/peer are the two rings (the same
 * private one when alone). */
static void allgather(const opts_t *o, int me, const char *send, char *recv,
                      ring_t *mine, char *mslots, ring_t *peer,
                      const char *pslots, uint64_t *sent, uint64_t *got)
{
    size_t   k  = o->block / o->chunk;
    uint64_t s0 = *sent, g0 = *got;
    copy(recv + (size_t)me * o->block, send, o->block, o->stream);
    while (*sent - s0 < k || *got - g0 < k) {
        uint64_t s = *sent, g = *got;
        if (s - s0 < k &&
            s < __atomic_load_n(&peer->credit, __ATOMIC_ACQUIRE) +
                    (uint64_t)o->slots) {
            copy(mslots + (s % (uint64_t)o->slots) * o->chunk,
                 send + (s - s0) * o->chunk, o->chunk, o->stream);
            __atomic_store_n(&mine->flag[s % (uint64_t)o->slots], s + 1,
                             __ATOMIC_RELEASE);
            *sent = s + 1;
        }
        if (g - g0 < k && __atomic_load_n(&peer->flag[g % (uint64_t)o->slots],
                                          __ATOMIC_ACQUIRE) == g + 1) {
            copy(recv + (size_t)(1 - me) * o->block + (g - g0) * o->chunk,
                 pslots + (g % (uint64_t)o->slots) * o->chunk, o->chunk,
                 o->stream);
            *got = g + 1;
            __atomic_store_n(&mine->credit, g + 1, __ATOMIC_RELEASE);
        }
    }
}

/* A private ring reads back what this process wrote: it sends to itself,
 * so flags and credits run as in the shared case, in one process. */
static int rank_main(const opts_t *o, int me, int shared, char *area,
                     size_t ringb, int out_fd)
{
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(me % (int)sysconf(_SC_NPROCESSORS_ONLN), &cpus);
    (void)sched_setaffinity(0, sizeof(cpus), &cpus);

    ring_t *mine = (ring_t *)(void *)(area + (size_t)me * ringb);
    ring_t *peer =
        shared ? (ring_t *)(void *)(area + (size_t)(1 - me) * ringb) : mine;
    char *send = aligned_alloc(LINE, o->block);
    char *recv = aligned_alloc(LINE, 2 * o->block);
    if (send == NULL || recv == NULL)
        return 1;
    memset(send, me + 1, o->block);
    memset(recv, 0, 2 * o->block);
    double   t[MAX_REPS];
    uint64_t sent = 0, got = 0;
    for (int r = 0; r < o->reps; r++) {
        double t0 = now_s();
        allgather(o, me, send, recv, mine, (char *)(mine + 1), peer,
                  (const char *)(peer + 1), &sent, &got);
        t[r] = (now_s() - t0) * 1e3;
    }
    int bad = recv[(size_t)(1 - me) * o->block] != (shared ? 2 - me : me + 1);
    free(send);
    free(recv);
    if (write(out_fd, t, sizeof(t)) != (ssize_t)sizeof(t))
        return 1;
    return bad;
}

/* Runs both ranks; fills ms[r] with the slower rank's time of rep r. */
static int run(const opts_t *o, int shared, double *ms)
{
    size_t ringb = sizeof(ring_t) + (size_t)o->slots * o->chunk;
    char  *area  = mmap(NULL, 2 * ringb, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int    fds[2][2], rc = 0;
    if (area == MAP_FAILED)
        return 1;
    memset(area, 0, 2 * ringb);
    for (int me = 0; me < 2; me++) {
        if (pipe(fds[me]) != 0)
            return 1;
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            close(fds[me][0]);
            _exit(rank_main(o, me, shared, area, ringb, fds[me][1]));
        }
        close(fds[me][1]);
    }
    double t[2][MAX_REPS];
    for (int me = 0; me < 2; me++) {
        if (read(fds[me][0], t[me], sizeof(t[me])) != (ssize_t)sizeof(t[me]))
            rc = 1;
        close(fds[me][0]);
    }
    for (int me = 0, status; me < 2; me++)
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            rc = 1;
    for (int r = 0; r < o->reps; r++)
        ms[r] = t[0][r] > t[1][r] ? t[0][r] : t[1][r];
    munmap(area, 2 * ringb);
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: braid-ring-floor [-s MIB] [-c KIB] [-d SLOTS "
                    "(1-64)] [-r REPS (2-64)] [-n 0|1]\n");
    return 2;
}

int main(int argc, char **argv)
{
    opts_t o = {
        .block = (size_t)128 << 20, .chunk = 64 << 10, .slots = 8, .reps = 7};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage();
        char *end;
        long  v = strtol(argv[i + 1], &end, 10);
        if (*end != '\0' || v < 0 || (v == 0 && strcmp(argv[i], "-n")))
            return usage();
        if (!strcmp(argv[i], "-s"))
            o.block = (size_t)v << 20;
        else if (!strcmp(argv[i], "-c"))
            o.chunk = (size_t)v << 10;
        else if (!strcmp(argv[i], "-d") && v <= MAX_SLOTS)
            o.slots = (int)v;
        else if (!strcmp(argv[i], "-r") && v >= 2 && v <= MAX_REPS)
            o.reps = (int)v;
        else if (!strcmp(argv[i], "-n") && v <= 1)
            o.stream = (int)v;
        else
            return usage();
    }
    if (o.block % o.chunk != 0) {
        fprintf(stderr, "braid-ring-floor: -s must be a multiple of -c\n");
        return 2;
    }
    printf("# 2 ranks, %zu MiB a block, %zu KiB chunks, %d slots, %d reps "
           "(first untimed), %s\n",
           o.block >> 20, o.chunk >> 10, o.slots, o.reps,
           o.stream ? "streaming stores" : "memcpy");
    printf("# %-7s %10s %10s %12s\n", "mode", "median_ms", "best_ms",
           "busbw_GBps");
    for (int shared = 0; shared < 2; shared++) {
        double ms[MAX_REPS];
        if (run(&o, shared, ms) != 0) {
            fprintf(stderr, "braid-ring-floor: a rank failed\n");
            return 1;
        }
        qsort(ms + 1, (size_t)o.reps - 1, sizeof(double), cmp_double);
        int    m   = o.reps - 1;
        double med = m % 2 ? ms[1 + m / 2] : (ms[m / 2] + ms[1 + m / 2]) / 2;
        printf("  %-7s %10.2f %10.2f %12.3f\n", shared ? "shared" : "alone",
               med, ms[1], (double)o.block / (med * 1e-3) / 1e9);
    }
    return 0;
}
