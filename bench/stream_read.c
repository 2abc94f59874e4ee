/* braid-stream-read: the memory bandwidth one thread gets reading a buffer
 * much larger than the caches, start to end.  This is the bound of batch-1
 * decode: every weight byte is read once per token, so tok/s <= bandwidth /
 * bytes of weights per token (braid-infer --json gives bytes_per_token).
 *
 *   braid-stream-read [-s SIZE] [-r REPS] [-p huge|4k]   (default 1G, 9, huge)
 *
 * The buffer is mapped the way braid-infer maps its weights: 2 MiB aligned
 * and marked MADV_HUGEPAGE (-p 4k: plain 4 KiB pages), so that the bound
 * and the decode it bounds see the same TLB.  Prints the median and best of
 * REPS passes in GB/s (10^9 bytes/s) and how much of the buffer the kernel
 * backed with huge pages. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__ELF__) && !defined(__clang__) &&         \
    __GNUC__ >= 12
#define HOT                                                                   \
    __attribute__((                                                           \
        target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HOT
#endif

typedef uint64_t v8u __attribute__((vector_size(64)));

/* XOR of every 64-byte line, four independent chains so that the loads,
 * not the dependency, set the pace. */
HOT static uint64_t read_all(const v8u *p, size_t n)
{
    v8u    a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a ^= p[i];
        b ^= p[i + 1];
        c ^= p[i + 2];
        d ^= p[i + 3];
    }
    for (; i < n; i++)
        a ^= p[i];
    a ^= b ^ c ^ d;
    uint64_t s = 0;
    for (int k = 0; k < 8; k++)
        s ^= a[k];
    return s;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_size(const char *s, size_t *out)
{
    char              *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
    if (end == s || (shift && end[1]) || (!shift && *end) || v == 0)
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

/* AnonHugePages of this process, in bytes (0 if unknown). */
static size_t huge_bytes(void)
{
    FILE              *f = fopen("/proc/self/smaps_rollup", "r");
    char               line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (size_t)kb << 10;
}

int main(int argc, char **argv)
{
    size_t size = (size_t)1 << 30, huge = (size_t)2 << 20;
    int    reps = 9, c, use_huge = 1;
    while ((c = getopt(argc, argv, "s:r:p:h")) != -1) {
        if (c == 's' && parse_size(optarg, &size) == 0 && size >= 64)
            continue;
        if (c == 'r' && (reps = atoi(optarg)) >= 1 && reps <= 1000)
            continue;
        if (c == 'p' && (!strcmp(optarg, "huge") || !strcmp(optarg, "4k"))) {
            use_huge = !strcmp(optarg, "huge");
            continue;
        }
        fprintf(stderr, "usage: braid-stream-read [-s SIZE[K|M|G]] "
                        "[-r REPS 1..1000] [-p huge|4k]\n");
        return c == 'h' ? 0 : 2;
    }
    size_t n           = size / sizeof(v8u),
           len         = (n * sizeof(v8u) + huge - 1) & ~(huge - 1);
    unsigned char *map = mmap(NULL, len + huge, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        fprintf(stderr, "braid-stream-read: cannot map %zu bytes\n", size);
        return 1;
    }
    v8u *buf = (v8u *)(((uintptr_t)map + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(buf, len, use_huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(buf, 1, n * sizeof(v8u)); /* fault every page in first */
    size_t   backed = huge_bytes();
    double  *gbs    = malloc((size_t)reps * sizeof(double));
    uint64_t sink   = read_all(buf, n); /* warm-up pass */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        sink ^= read_all(buf, n);
        gbs[r] = (double)(n * sizeof(v8u)) / (now() - t0) / 1e9;
    }
    qsort(gbs, (size_t)reps, sizeof(double), cmp);
    printf("stream read: %zu MiB, 1 thread, median %.2f GB/s, best %.2f GB/s "
           "(%d passes, %zu MiB in huge pages)%s\n",
           n * sizeof(v8u) >> 20, gbs[reps / 2], gbs[reps - 1], reps,
           backed >> 20, sink == 42 ? " " : "");
    free(gbs);
    munmap(map, len + huge);
    return 0;
}
