/* reduce-bench: throughput of the CPU reduction kernels (kernels/reduce.c).
 *
 *   reduce-bench [-r ROUNDS] [-d DTYPES] [-o OPS] [-s SIZES]
 *
 * For each dtype, op and size (bytes per input, default 4K, 256K, 16M:
 * L1, L2 and memory), it times dst = a op b out of place and in place
 * (inout op= in, as algorithms call it) and prints the median over ROUNDS
 * (default 7) of GB/s, counting the bytes of one input.  Inputs are finite
 * values; with -n every 16th element of one input is a NaN, to time the
 * NaN path.  Numbers from a shared machine are noisy: compare builds by
 * running them alternately (see docs/performance.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/reduce.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *const dt_names[] = {"f32", "f64", "f16", "bf16",
                                       "i32", "i64", "u8"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
static const size_t      dt_sizes[] = {4, 8, 2, 2, 4, 8, 1};

/* Fills n bytes with small finite values of dtype (and NaNs if asked). */
static void fill(void *buf, size_t bytes, braid_dtype_t dt, int nans)
{
    size_t es = dt_sizes[dt], n = bytes / es;
    for (size_t i = 0; i < n; i++) {
        unsigned v   = (unsigned)(i * 2654435761u >> 24) % 7 + 1;
        int      nan = nans && i % 16 == 0;
        switch (dt) {
        /* Near 1, so that repeated in-place products neither overflow
         * nor sink into subnormals, which are slow on some CPUs. */
        case BRAID_F32:
            ((float *)buf)[i] =
                nan ? __builtin_nanf("") : 1.0f + (float)v * 1e-4f;
            break;
        case BRAID_F64:
            ((double *)buf)[i] = nan ? __builtin_nan("") : 1.0 + v * 1e-4;
            break;
        case BRAID_F16:
            ((uint16_t *)buf)[i] = nan ? 0x7e01 : (uint16_t)(0x3c00 + v);
            break;
        case BRAID_BF16:
            ((uint16_t *)buf)[i] = nan ? 0x7fc1 : (uint16_t)(0x3f80 + v);
            break;
        case BRAID_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
        case BRAID_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
        default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
        }
    }
}

/* Median GB/s of one kernel call shape over rounds, each round long enough
 * (~20 ms) to dwarf the clock. */
static double measure(void *dst, const void *a, const void *b, size_t bytes,
                      braid_dtype_t dt, braid_op_t op, int rounds)
{
    size_t  n    = bytes / dt_sizes[dt];
    size_t  reps = (size_t)(2e7 / (double)bytes) + 1;
    double *gbps = calloc((size_t)rounds, sizeof(double));
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        for (size_t k = 0; k < reps; k++)
            braid_kernel_reduce2(dst, a, b, n, dt, op);
        double t = now_s() - t0;
        gbps[r]  = (double)bytes * (double)reps / t / 1e9;
    }
    qsort(gbps, (size_t)rounds, sizeof(double), cmp_double);
    double med = gbps[rounds / 2];
    free(gbps);
    return med;
}

static int in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p != NULL && *p; p = strchr(p, ',')) {
        if (*p == ',')
            p++;
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int         rounds = 7, nans = 0, opt;
    const char *dts = "f32,f64,f16,bf16,i32", *ops = "sum,prod,max";
    char        sizes_buf[64] = "4096,262144,16777216";
    const char *sizes         = sizes_buf;
    while ((opt = getopt(argc, argv, "r:d:o:s:n")) != -1) {
        switch (opt) {
        case 'r': rounds = atoi(optarg); break;
        case 'd': dts = optarg; break;
        case 'o': ops = optarg; break;
        case 's': sizes = optarg; break;
        case 'n': nans = 1; break;
        default:
            fprintf(stderr, "usage: reduce-bench [-r ROUNDS] [-d f32,f64,...] "
                            "[-o sum,prod,...] [-s BYTES,...] [-n]\n");
            return 2;
        }
    }
    if (rounds < 1)
        rounds = 1;
    printf("%-5s %-5s %10s %12s %12s\n", "dtype", "op", "bytes", "out (GB/s)",
           "inplace");
    for (const char *sp = sizes; sp && *sp; sp = strchr(sp, ',')) {
        if (*sp == ',')
            sp++;
        size_t bytes = (size_t)strtoull(sp, NULL, 10);
        if (bytes < 64)
            continue;
        unsigned char *a = aligned_alloc(64, bytes),
                      *b = aligned_alloc(64, bytes),
                      *d = aligned_alloc(64, bytes);
        if (!a || !b || !d)
            return 1;
        for (int t = 0; t < BRAID_DTYPE_COUNT; t++) {
            if (!in_list(dts, dt_names[t]))
                continue;
            for (int o = 0; o < BRAID_OP_COUNT; o++) {
                if (!in_list(ops, op_names[o]))
                    continue;
                fill(a, bytes, (braid_dtype_t)t, nans);
                fill(b, bytes, (braid_dtype_t)t, 0);
                double out = measure(d, a, b, bytes, (braid_dtype_t)t,
                                     (braid_op_t)o, rounds);
                /* In place keeps combining into d: PROD of values <= 1
                 * and SUM of small ones stay finite for these repeats. */
                memcpy(d, a, bytes);
                double inp = measure(d, d, b, bytes, (braid_dtype_t)t,
                                     (braid_op_t)o, rounds);
                printf("%-5s %-5s %10zu %12.2f %12.2f\n", dt_names[t],
                       op_names[o], bytes, out, inp);
                fflush(stdout);
            }
        }
        free(a);
        free(b);
        free(d);
    }
    return 0;
}
