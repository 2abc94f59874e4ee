/* engine/common: dtype conversions, parsing, the hash map, the thread team
 * and the matrix kernels, each against a plain reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/linalg.h"
#include "engine/common/pool.h"
#include "engine/common/strmap.h"
#include "engine/common/util.h"
#include "tests/unit/check.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even at `keep` mantissa bits, the slow obvious way, for
 * finite values in bf16's range. */
static float round_mantissa(float f, int drop)
{
    uint32_t u = bits(f), mask = (1u << drop) - 1, half = 1u << (drop - 1);
    uint32_t low = u & mask, base = u & ~mask;
    if (low > half || (low == half && (base >> drop) & 1))
        base += 1u << drop;
    return from_bits(base);
}

static void test_dtypes(void)
{
    int bad_bf = 0, bad_f16 = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float b = braid_eng_bf16_to_f32((uint16_t)h);
        if (braid_eng_f32_to_bf16(b) != h && !isnan(b))
            bad_bf++;
        float f = braid_eng_f16_to_f32((uint16_t)h);
        if (!isnan(f) && braid_eng_f32_to_f16(f) != h)
            bad_f16++;
        if (isnan(f) && !isnan(braid_eng_f16_to_f32(braid_eng_f32_to_f16(f))))
            bad_f16++;
    }
    CHECK(bad_bf == 0, "bf16 -> f32 -> bf16 changed %d values", bad_bf);
    CHECK(bad_f16 == 0, "f16 -> f32 -> f16 changed %d values", bad_f16);
    CHECK(braid_eng_f16_to_f32(0x3c00) == 1.0f, "f16 1.0");
    CHECK(braid_eng_f16_to_f32(0x0001) == 0x1p-24f, "f16 smallest subnormal");
    CHECK(braid_eng_f16_to_f32(0xfbff) == -65504.0f, "f16 lowest");
    CHECK(braid_eng_f32_to_f16(65520.0f) == 0x7c00, "f16 overflow to inf");
    CHECK(braid_eng_f32_to_f16(65519.0f) == 0x7bff, "f16 just below overflow");
    CHECK(braid_eng_f32_to_f16(0x1p-25f) == 0x0000, "f16 tie to even zero");
    CHECK(braid_eng_f32_to_f16(0x1.8p-24f) == 0x0002, "f16 tie to even 2");
    CHECK(isnan(braid_eng_bf16_to_f32(braid_eng_f32_to_bf16(NAN))),
          "bf16 NaN");

    /* Rounding of random f32 values, scalar and bulk paths alike. */
    enum { N = 100003 };
    float *src = malloc(N * sizeof(float)), *back = malloc(N * sizeof(float));
    uint16_t *h   = malloc(N * sizeof(uint16_t));
    int       bad = 0;
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)braid_eng_mix64((uint64_t)i);
        u = (u & 0x8fffffffu) | 0x30000000u; /* finite, moderate exponents */
        src[i] = from_bits(u);
    }
    braid_eng_convert(h, BRAID_BF16, src, BRAID_F32, N);
    for (int i = 0; i < N; i++) {
        if (h[i] != braid_eng_f32_to_bf16(src[i]) ||
            braid_eng_bf16_to_f32(h[i]) != round_mantissa(src[i], 16))
            bad++;
    }
    CHECK(bad == 0, "f32 -> bf16: %d of %d rounded wrong", bad, N);
    braid_eng_convert(back, BRAID_F32, h, BRAID_BF16, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += back[i] != braid_eng_bf16_to_f32(h[i]);
    CHECK(bad == 0, "bulk bf16 -> f32: %d wrong", bad);
    braid_eng_convert(h, BRAID_F16, src, BRAID_F32, N);
    braid_eng_convert(back, BRAID_F32, h, BRAID_F16, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += back[i] != braid_eng_f16_to_f32(braid_eng_f32_to_f16(src[i]));
    CHECK(bad == 0, "bulk f16 round trip: %d wrong", bad);
    /* unaligned source */
    braid_eng_convert(back, BRAID_F32, (const char *)h + 1, BRAID_BF16, 100);
    free(src);
    free(back);
    free(h);

    braid_dtype_t dt;
    CHECK(braid_eng_dtype_parse("bf16", &dt) == 0 && dt == BRAID_BF16,
          "parse bf16");
    CHECK(braid_eng_dtype_parse("f64", &dt) != 0, "f64 is not a weight type");
}

static void test_parsing(void)
{
    int64_t  v;
    double   d;
    int32_t *ids;
    size_t   n;
    CHECK(braid_eng_parse_int(&v, "16K", 0, 1 << 20, 1, "x") == BRAID_OK &&
              v == 16384,
          "16K");
    CHECK(braid_eng_parse_int(&v, "12x", 0, 100, 0, "-g") ==
                  BRAID_ERR_INVALID_ARG &&
              strstr(braid_eng_error(), "-g"),
          "12x refused: %s", braid_eng_error());
    CHECK(braid_eng_parse_int(&v, "101", 0, 100, 0, "-g") != BRAID_OK,
          "range");
    CHECK(braid_eng_parse_double(&d, "0.9", 0, 1, "top-p") == BRAID_OK &&
              d == 0.9,
          "0.9");
    CHECK(braid_eng_parse_double(&d, "nan", 0, 1, "top-p") != BRAID_OK, "nan");
    CHECK(braid_eng_parse_ids(&ids, &n, "1,22,333", 1000, "ids") == BRAID_OK &&
              n == 3 && ids[0] == 1 && ids[1] == 22 && ids[2] == 333,
          "1,22,333");
    free(ids);
    CHECK(braid_eng_parse_ids(&ids, &n, "1,,2", 1000, "ids") != BRAID_OK &&
              strstr(braid_eng_error(), "character 3"),
          "1,,2: %s", braid_eng_error());
    CHECK(braid_eng_parse_ids(&ids, &n, "5,2000", 1000, "ids") != BRAID_OK &&
              strstr(braid_eng_error(), "2000 at character 3"),
          "2000: %s", braid_eng_error());
    CHECK(braid_eng_parse_ids(&ids, &n, "", 1000, "ids") != BRAID_OK, "empty");
}

static void test_strmap(void)
{
    braid_eng_strmap_t m;
    enum { N = 5000 };
    static char keys[N][12];
    CHECK(braid_eng_strmap_init(&m, 4) == BRAID_OK, "init");
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        CHECK(braid_eng_strmap_put(&m, keys[i], strlen(keys[i]), i, NULL) ==
                  BRAID_OK,
              "put %d", i);
    }
    int32_t old = -1;
    CHECK(braid_eng_strmap_put(&m, "k77", 3, 1, &old) ==
                  BRAID_ERR_INVALID_ARG &&
              old == 77,
          "duplicate refused");
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += braid_eng_strmap_get(&m, keys[i], strlen(keys[i])) != i;
    CHECK(bad == 0, "%d lookups wrong", bad);
    CHECK(braid_eng_strmap_get(&m, "k7", 1) == -1, "prefix is not a key");
    CHECK(braid_eng_strmap_get(&m, "nope", 4) == -1, "absent");
    braid_eng_strmap_free(&m);
}

/* y = W x in double, for comparison. */
static void ref_matvec(double *y, const braid_eng_mat_t *W, const float *x)
{
    for (int64_t r = 0; r < W->rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < W->cols; c++) {
            float w;
            braid_eng_convert(&w, BRAID_F32,
                              (const char *)W->data +
                                  (size_t)(r * W->cols + c) *
                                      braid_dtype_size(W->dtype),
                              W->dtype, 1);
            s += (double)w * x[c];
        }
        y[r] = s;
    }
}

static void test_kernels(void)
{
    static const braid_dtype_t types[] = {BRAID_F32, BRAID_BF16, BRAID_F16};
    static const int64_t       shapes[][2] = {
              {1, 1}, {7, 33}, {16, 64}, {37, 100}, {130, 1030}};
    braid_eng_pool_t *pool3;
    CHECK(braid_eng_pool_new(&pool3, 3) == BRAID_OK, "pool of 3");
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
            int64_t         rows = shapes[si][0], cols = shapes[si][1];
            braid_eng_mat_t W;
            CHECK(braid_eng_mat_alloc(&W, types[ti], rows, cols) == BRAID_OK,
                  "alloc");
            float  *wf  = malloc((size_t)(rows * cols) * sizeof(float));
            float  *x   = malloc((size_t)cols * sizeof(float));
            float  *X   = malloc((size_t)(3 * cols) * sizeof(float));
            float  *y   = malloc((size_t)rows * sizeof(float));
            float  *y3  = malloc((size_t)rows * sizeof(float));
            float  *Y   = malloc((size_t)(3 * rows) * sizeof(float));
            double *ref = malloc((size_t)rows * sizeof(double));
            float  *scratch =
                malloc(braid_eng_matmul_scratch(cols) * sizeof(float));
            for (int64_t i = 0; i < rows * cols; i++)
                wf[i] = braid_eng_uniform((uint64_t)i) * 2 - 1;
            for (int64_t i = 0; i < 3 * cols; i++)
                X[i] = braid_eng_uniform(1000003 + (uint64_t)i) * 2 - 1;
            memcpy(x, X + cols, (size_t)cols * sizeof(float));
            braid_eng_convert(W.data, W.dtype, wf, BRAID_F32,
                              (size_t)(rows * cols));
            const braid_eng_mat_t *Wp = &W;
            float                 *yp = y, *y3p = y3;
            braid_eng_matvec(NULL, 1, &yp, &Wp, x);
            braid_eng_matvec(pool3, 1, &y3p, &Wp, x);
            braid_eng_matmul(Y, X, &W, 3, scratch);
            ref_matvec(ref, &W, x);
            double worst = 0, worst3 = 0, worst_mm = 0;
            for (int64_t r = 0; r < rows; r++) {
                /* f32 sums of `cols` products of magnitude <= 1 */
                worst    = fmax(worst, fabs(y[r] - ref[r]));
                worst3   = fmax(worst3, fabs(y3[r] - y[r]));
                worst_mm = fmax(worst_mm, fabs(Y[rows + r] - ref[r]));
            }
            double tol = 1e-6 * (double)cols;
            CHECK(worst <= tol, "matvec %s [%lld, %lld]: off by %g",
                  braid_dtype_name(types[ti]), (long long)rows,
                  (long long)cols, worst);
            CHECK(worst3 == 0, "matvec %s with 3 threads differs by %g",
                  braid_dtype_name(types[ti]), worst3);
            CHECK(worst_mm <= tol, "matmul %s [%lld, %lld]: off by %g",
                  braid_dtype_name(types[ti]), (long long)rows,
                  (long long)cols, worst_mm);
            braid_eng_mat_free(&W);
            free(wf), free(x), free(X), free(y), free(y3), free(Y), free(ref);
            free(scratch);
        }
    braid_eng_pool_free(pool3);
}

int main(void)
{
    braid_eng_blas_threads(1);
    test_dtypes();
    test_parsing();
    test_strmap();
    test_kernels();
    return check_summary("engine-common");
}
