/* The CUDA reduction kernels (kernels/cuda) against the CPU kernels
 * (kernels/reduce.c), for every dtype and op: random data mixed with
 * special values (NaN, infinities, -0, subnormals, extremes), several
 * counts, out of place and in place, and AVG's division for n = 2..8.
 *
 * Bitwise equality everywhere, but for one documented difference: a float
 * SUM/PROD/AVG whose result is a NaN may carry another payload (NVIDIA GPUs
 * return the canonical NaN), so there both must be NaN.
 *
 * Needs a GPU: without one (or without the driver) it prints why and exits
 * 77, which meson counts as skipped. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/reduce_cuda.h"
#include "kernels/reduce.h"

#define SKIP      77
#define MAX_COUNT 100003

static long checks, failures;

static const size_t dt_size[BRAID_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1};
static const char  *dt_name[BRAID_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16",
                                                  "i32", "i64", "u8"};
static const char  *op_name[BRAID_OP_COUNT]    = {"sum", "prod", "min", "max",
                                                  "avg"};

static uint64_t rng = 0x243f6a8885a308d3u;

static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15u);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Random bits, one element in 8 replaced by a special value. */
static void fill(void *buf, size_t count, braid_dtype_t dt)
{
    static const uint64_t special[BRAID_DTYPE_COUNT][8] = {
        [BRAID_F32]  = {0x7fc00000, 0xff800000, 0x80000000, 0x00000001,
                        0x7f7fffff, 0x7fa00001, 0x3f800000, 0x00800000},
        [BRAID_F64]  = {0x7ff8000000000000u, 0xfff0000000000000u,
                        0x8000000000000000u, 1, 0x7fefffffffffffffu,
                        0x7ff4000000000001u, 0x3ff0000000000000u,
                        0x0010000000000000u},
        [BRAID_F16]  = {0x7e00, 0xfc00, 0x8000, 0x0001, 0x7bff, 0x7d01, 0x3c00,
                        0x0400},
        [BRAID_BF16] = {0x7fc0, 0xff80, 0x8000, 0x0001, 0x7f7f, 0x7fa1, 0x3f80,
                        0x0080},
        [BRAID_I32]  = {0, 1, 0xffffffff, 0x7fffffff, 0x80000000, 2, 3, 5},
        [BRAID_I64]  = {0, 1, ~0ull, 0x7fffffffffffffffu, 0x8000000000000000u,
                        2, 3, 5},
        [BRAID_U8]   = {0, 1, 255, 128, 127, 2, 3, 16},
    };
    size_t sz = dt_size[dt];
    for (size_t i = 0; i < count; i++) {
        uint64_t r = rnd();
        uint64_t v = (r & 7) == 0 ? special[dt][(r >> 3) & 7] : rnd();
        memcpy((char *)buf + i * sz, &v, sz); /* little-endian: low bytes */
    }
}

static int is_nan(const void *p, braid_dtype_t dt)
{
    uint64_t u = 0;
    memcpy(&u, p, dt_size[dt]);
    switch (dt) {
    case BRAID_F32: return (u & 0x7fffffffu) > 0x7f800000u;
    case BRAID_F64: return (u & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    case BRAID_F16: return (u & 0x7fffu) > 0x7c00u;
    case BRAID_BF16: return (u & 0x7fffu) > 0x7f80u;
    default: return 0;
    }
}

static void compare(const void *gpu, const void *cpu, size_t count,
                    braid_dtype_t dt, braid_op_t op, const char *what)
{
    size_t sz    = dt_size[dt];
    int    arith = op == BRAID_SUM || op == BRAID_PROD || op == BRAID_AVG;
    long   bad   = 0;
    size_t first = 0;
    for (size_t i = 0; i < count; i++) {
        const char *g = (const char *)gpu + i * sz,
                   *c = (const char *)cpu + i * sz;
        if (memcmp(g, c, sz) == 0 || (arith && is_nan(g, dt) && is_nan(c, dt)))
            continue;
        if (bad++ == 0)
            first = i;
    }
    checks++;
    if (bad == 0)
        return;
    failures++;
    uint64_t g = 0, c = 0;
    memcpy(&g, (const char *)gpu + first * sz, sz);
    memcpy(&c, (const char *)cpu + first * sz, sz);
    fprintf(stderr,
            "FAIL %s %s %s count %zu: %ld elements differ, first at "
            "%zu: gpu 0x%llx cpu 0x%llx\n",
            what, dt_name[dt], op_name[op], count, bad, first,
            (unsigned long long)g, (unsigned long long)c);
}

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    fprintf(stderr, "FAIL %s: %s\n", what, cudaGetErrorString(e));
    failures++;
    return 0;
}

/* One (dtype, op, count): out of place, in place, and AVG's division. */
static void run_case(braid_dtype_t dt, braid_op_t op, size_t count,
                     unsigned char *ha, unsigned char *hb, unsigned char *hc,
                     unsigned char *hg, void *da, void *db, void *dd)
{
    size_t bytes = count * dt_size[dt];
    fill(ha, count, dt);
    fill(hb, count, dt);
    if (!cuda_ok(cudaMemcpy(da, ha, bytes, cudaMemcpyHostToDevice),
                 "copy a") ||
        !cuda_ok(cudaMemcpy(db, hb, bytes, cudaMemcpyHostToDevice), "copy b"))
        return;

    braid_kernel_reduce2(hc, ha, hb, count, dt, op);
    if (!cuda_ok(
            (cudaError_t)braid_cuda_reduce2(dd, da, db, count, dt, op, NULL),
            "launch") ||
        !cuda_ok(cudaMemcpy(hg, dd, bytes, cudaMemcpyDeviceToHost),
                 "copy back"))
        return;
    compare(hg, hc, count, dt, op, "out of place");

    /* In place into a: a = a op b. */
    if (!cuda_ok(
            (cudaError_t)braid_cuda_reduce2(da, da, db, count, dt, op, NULL),
            "launch in place") ||
        !cuda_ok(cudaMemcpy(hg, da, bytes, cudaMemcpyDeviceToHost),
                 "copy back"))
        return;
    compare(hg, hc, count, dt, op, "in place");

    if (op != BRAID_AVG)
        return;
    for (int n = 2; n <= 8; n++) {
        memcpy(hg, hc, bytes);
        braid_kernel_finish_avg(hg, count, dt, op, n);
        if (!cuda_ok(cudaMemcpy(dd, hc, bytes, cudaMemcpyHostToDevice),
                     "copy") ||
            !cuda_ok(
                (cudaError_t)braid_cuda_finish_avg(dd, count, dt, op, n, NULL),
                "launch avg") ||
            !cuda_ok(cudaMemcpy(ha, dd, bytes, cudaMemcpyDeviceToHost),
                     "copy back"))
            return;
        compare(ha, hg, count, dt, op, "finish_avg");
    }
}

int main(void)
{
    int         ndev = 0;
    cudaError_t e    = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: %s (%s)\n",
               e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary
                   ? "CUDA driver not loaded"
                   : "no CUDA device",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return SKIP;
    }
    size_t         cap = MAX_COUNT * 8;
    unsigned char *ha = malloc(cap), *hb = malloc(cap), *hc = malloc(cap),
                  *hg = malloc(cap);
    void *da = NULL, *db = NULL, *dd = NULL;
    if (!ha || !hb || !hc || !hg ||
        !cuda_ok(cudaMalloc(&da, cap), "cudaMalloc") ||
        !cuda_ok(cudaMalloc(&db, cap), "cudaMalloc") ||
        !cuda_ok(cudaMalloc(&dd, cap), "cudaMalloc"))
        return 1;

    static const size_t counts[] = {1, 7, 256, 4097, MAX_COUNT};
    for (int dt = 0; dt < BRAID_DTYPE_COUNT; dt++)
        for (int op = 0; op < BRAID_OP_COUNT; op++)
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
                run_case((braid_dtype_t)dt, (braid_op_t)op, counts[k], ha, hb,
                         hc, hg, da, db, dd);

    /* Every f16 and bf16 value against every other in one shifted pass. */
    for (int dt = BRAID_F16; dt <= BRAID_BF16; dt++)
        for (int op = 0; op < BRAID_OP_COUNT; op++) {
            uint16_t *a = (uint16_t *)ha, *b = (uint16_t *)hb;
            for (uint32_t i = 0; i < 65536; i++) {
                a[i] = (uint16_t)i;
                b[i] = (uint16_t)(i * 40503u + 7u);
            }
            size_t bytes = 65536 * 2;
            braid_kernel_reduce2(hc, ha, hb, 65536, (braid_dtype_t)dt,
                                 (braid_op_t)op);
            if (cuda_ok(cudaMemcpy(da, ha, bytes, cudaMemcpyHostToDevice),
                        "copy") &&
                cuda_ok(cudaMemcpy(db, hb, bytes, cudaMemcpyHostToDevice),
                        "copy") &&
                cuda_ok((cudaError_t)braid_cuda_reduce2(dd, da, db, 65536,
                                                        (braid_dtype_t)dt,
                                                        (braid_op_t)op, NULL),
                        "launch") &&
                cuda_ok(cudaMemcpy(hg, dd, bytes, cudaMemcpyDeviceToHost),
                        "copy"))
                compare(hg, hc, 65536, (braid_dtype_t)dt, (braid_op_t)op,
                        "all values");
        }

    cudaFree(da);
    cudaFree(db);
    cudaFree(dd);
    free(ha);
    free(hb);
    free(hc);
    free(hg);
    printf("cuda_kernels: %ld checks, %ld failed\n", checks, failures);
    return failures != 0;
}
