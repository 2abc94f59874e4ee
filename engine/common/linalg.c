/* Matrix-vector kernels (decode) and blocked sgemm (prefill); see linalg.h.
 *
 * The matvec kernels take four rows at a time so that each load of x serves
 * four weights, and keep 16 partial sums a row in a vector so that the
 * multiply-adds do not wait on each other.  They are written with GCC
 * vector types, which the compiler lowers to AVX-512, AVX2 or SSE; the hot
 * loops get one clone per ISA level (chosen once by the loader), like the
 * reduction kernels in kernels/. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/hot.h"
#include "engine/common/linalg.h"

typedef float    v16f __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));
typedef uint16_t v16h __attribute__((vector_size(32)));
typedef _Float16 v16hf __attribute__((vector_size(32)));

/* Rows per block of the prefill's widened weight: 64 KiB..1 MiB of f32. */
#define MM_BLOCK_FLOATS (1u << 18)

braid_status_t braid_eng_mat_alloc(braid_eng_mat_t *m, braid_dtype_t dtype,
                                   int64_t rows, int64_t cols)
{
    size_t bytes = (size_t)rows * (size_t)cols * braid_dtype_size(dtype);
    m->dtype = dtype;
    m->rows = rows;
    m->cols = cols;
    m->data = NULL;
    if (bytes && posix_memalign(&m->data, 64, (bytes + 63) & ~(size_t)63) != 0) {
        m->data = NULL;
        return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                              "out of memory for a [%lld, %lld] %s matrix",
                              (long long)rows, (long long)cols,
                              braid_dtype_name(dtype));
    }
    return BRAID_OK;
}

void braid_eng_mat_free(braid_eng_mat_t *m)
{
    free(m->data);
    m->data = NULL;
}

size_t braid_eng_mat_bytes(const braid_eng_mat_t *m)
{
    return (size_t)m->rows * (size_t)m->cols * braid_dtype_size(m->dtype);
}

/* ------------------------------------------------------------ widen 16 */

/* Macros rather than functions: a function returning a 64-byte vector
 * would have a different ABI in each clone. */
#define LOAD_F32(dst, p) memcpy(&(dst), (p), sizeof(v16f))
#define LOAD_F16(dst, p)                                                 \
    do {                                                                 \
        v16hf h_;                                                        \
        memcpy(&h_, (p), sizeof(h_));                                    \
        (dst) = __builtin_convertvector(h_, v16f);                       \
    } while (0)

static inline float hsum(const v16f *v)
{
    float s = 0;
    for (int i = 0; i < 16; i++)
        s += (*v)[i];
    return s;
}

static inline float scalar_of(braid_dtype_t dt, const void *w, size_t i)
{
    if (dt == BRAID_F32)
        return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return dt == BRAID_BF16 ? braid_eng_bf16_to_f32(h) : braid_eng_f16_to_f32(h);
}

/* One kernel per weight type: y[r0..r1) of W . x.  LOAD widens 16 weights. */
#define MATVEC_KERNEL(NAME, WT, LOAD, DT)                                      \
    ENG_HOT static void NAME(float *y, const WT *W, const float *x,           \
                             size_t cols, size_t r0, size_t r1)                \
    {                                                                          \
        size_t r = r0, c16 = cols & ~(size_t)15;                               \
        v16f xv, w;                                                            \
        for (; r + 4 <= r1; r += 4) {                                          \
            const WT *w0 = W + r * cols, *w1 = w0 + cols, *w2 = w1 + cols,     \
                     *w3 = w2 + cols;                                          \
            v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                       \
            for (size_t c = 0; c < c16; c += 16) {                             \
                LOAD_F32(xv, x + c);                                           \
                LOAD(w, w0 + c);                                               \
                a0 += w * xv;                                                  \
                LOAD(w, w1 + c);                                               \
                a1 += w * xv;                                                  \
                LOAD(w, w2 + c);                                               \
                a2 += w * xv;                                                  \
                LOAD(w, w3 + c);                                               \
                a3 += w * xv;                                                  \
            }                                                                  \
            float s0 = hsum(&a0), s1 = hsum(&a1), s2 = hsum(&a2),              \
                  s3 = hsum(&a3);                                              \
            for (size_t c = c16; c < cols; c++) {                              \
                s0 += scalar_of(DT, w0, c) * x[c];                             \
                s1 += scalar_of(DT, w1, c) * x[c];                             \
                s2 += scalar_of(DT, w2, c) * x[c];                             \
                s3 += scalar_of(DT, w3, c) * x[c];                             \
            }                                                                  \
            y[r] = s0, y[r + 1] = s1, y[r + 2] = s2, y[r + 3] = s3;            \
        }                                                                      \
        for (; r < r1; r++) {                                                  \
            const WT *w0 = W + r * cols;                                       \
            v16f a0 = {0};                                                     \
            for (size_t c = 0; c < c16; c += 16) {                             \
                LOAD_F32(xv, x + c);                                           \
                LOAD(w, w0 + c);                                               \
                a0 += w * xv;                                                  \
            }                                                                  \
            float s0 = hsum(&a0);                                              \
            for (size_t c = c16; c < cols; c++)                                \
                s0 += scalar_of(DT, w0, c) * x[c];                             \
            y[r] = s0;                                                         \
        }                                                                      \
    }

MATVEC_KERNEL(matvec_f32, float, LOAD_F32, BRAID_F32)

/* bf16 is the top half of an f32, so a 32-bit lane holding two bf16 values
 * gives the even one as lane << 16 and the odd one as lane & 0xffff0000:
 * 32 weights widened with one shift and one and, no shuffles.  x comes
 * pre-arranged to match (interleave_x): per 32 columns, the 16 even ones,
 * then the 16 odd ones.  The sum runs in another order than the f32
 * kernel's; both are exact to f32 rounding. */
#define BF16_STEP(acc, wrow)                                                   \
    do {                                                                       \
        v16u u_, lo_, hi_;                                                     \
        memcpy(&u_, (wrow) + c, sizeof(u_));                                   \
        lo_ = u_ << 16;                                                        \
        hi_ = u_ & 0xffff0000u;                                                \
        memcpy(&we, &lo_, sizeof(we));                                         \
        memcpy(&wo, &hi_, sizeof(wo));                                         \
        acc += we * xe;                                                        \
        acc += wo * xo;                                                        \
    } while (0)

ENG_HOT static void matvec_bf16(float *y, const uint16_t *W, const float *x,
                                const float *xp, size_t cols, size_t r0,
                                size_t r1)
{
    size_t r = r0, c32 = cols & ~(size_t)31;
    v16f xe, xo, we, wo;
    for (; r + 4 <= r1; r += 4) {
        const uint16_t *w0 = W + r * cols, *w1 = w0 + cols, *w2 = w1 + cols,
                       *w3 = w2 + cols;
        v16f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (size_t c = 0; c < c32; c += 32) {
            LOAD_F32(xe, xp + c);
            LOAD_F32(xo, xp + c + 16);
            BF16_STEP(a0, w0);
            BF16_STEP(a1, w1);
            BF16_STEP(a2, w2);
            BF16_STEP(a3, w3);
        }
        float s0 = hsum(&a0), s1 = hsum(&a1), s2 = hsum(&a2), s3 = hsum(&a3);
        for (size_t c = c32; c < cols; c++) {
            s0 += braid_eng_bf16_to_f32(w0[c]) * x[c];
            s1 += braid_eng_bf16_to_f32(w1[c]) * x[c];
            s2 += braid_eng_bf16_to_f32(w2[c]) * x[c];
            s3 += braid_eng_bf16_to_f32(w3[c]) * x[c];
        }
        y[r] = s0, y[r + 1] = s1, y[r + 2] = s2, y[r + 3] = s3;
    }
    for (; r < r1; r++) {
        const uint16_t *w0 = W + r * cols;
        v16f a0 = {0};
        for (size_t c = 0; c < c32; c += 32) {
            LOAD_F32(xe, xp + c);
            LOAD_F32(xo, xp + c + 16);
            BF16_STEP(a0, w0);
        }
        float s0 = hsum(&a0);
        for (size_t c = c32; c < cols; c++)
            s0 += braid_eng_bf16_to_f32(w0[c]) * x[c];
        y[r] = s0;
    }
}

/* xp[cols]: per 32 columns of x the even ones, then the odd ones; the
 * tail as it is. */
static void interleave_x(float *xp, const float *x, size_t cols)
{
    size_t c32 = cols & ~(size_t)31;
    for (size_t c = 0; c < c32; c += 32)
        for (size_t k = 0; k < 16; k++) {
            xp[c + k] = x[c + 2 * k];
            xp[c + 16 + k] = x[c + 2 * k + 1];
        }
    memcpy(xp + c32, x + c32, (cols - c32) * sizeof(float));
}
MATVEC_KERNEL(matvec_f16, uint16_t, LOAD_F16, BRAID_F16)

typedef struct {
    int                           n;
    float *const                 *y;
    const braid_eng_mat_t *const *W;
    const float                  *x;
    const float                  *xp;  /* x interleaved, for bf16 weights */
} matvec_job_t;

/* Member `me` of `nt` takes a contiguous quarter-aligned row range of each
 * weight, so that the four-row kernel stays on its fast path. */
static void matvec_job(void *arg, int me, int nt)
{
    const matvec_job_t *j = arg;
    for (int i = 0; i < j->n; i++) {
        const braid_eng_mat_t *W = j->W[i];
        size_t rows = (size_t)W->rows, quads = (rows + 3) / 4;
        size_t r0 = quads * (size_t)me / (size_t)nt * 4;
        size_t r1 = quads * (size_t)(me + 1) / (size_t)nt * 4;
        if (r1 > rows)
            r1 = rows;
        if (r0 >= r1)
            continue;
        size_t cols = (size_t)W->cols;
        switch (W->dtype) {
        case BRAID_BF16: matvec_bf16(j->y[i], W->data, j->x, j->xp, cols, r0, r1); break;
        case BRAID_F16:  matvec_f16(j->y[i], W->data, j->x, cols, r0, r1); break;
        default:         matvec_f32(j->y[i], W->data, j->x, cols, r0, r1); break;
        }
    }
}

/* The interleaved x of the calling thread, grown as needed. */
static _Thread_local float *xp_buf;
static _Thread_local size_t xp_cap;

void braid_eng_matvec(braid_eng_pool_t *pool, int n, float *const *y,
                      const braid_eng_mat_t *const *W, const float *x)
{
    matvec_job_t j = {n, y, W, x, NULL};
    size_t cols = 0;
    for (int i = 0; i < n; i++)
        if (W[i]->dtype == BRAID_BF16)
            cols = (size_t)W[i]->cols;
    if (cols) { /* the weights of one call share x, so one cols */
        if (cols > xp_cap) {
            float *nb = realloc(xp_buf, cols * sizeof(float));
            if (!nb)
                abort(); /* a few KiB; a process this short of memory is lost */
            xp_buf = nb;
            xp_cap = cols;
        }
        interleave_x(xp_buf, x, cols);
        j.xp = xp_buf;
    }
    if (pool)
        braid_eng_pool_run(pool, matvec_job, &j);
    else
        matvec_job(&j, 0, 1);
}

/* ------------------------------------------------------------ matmul */

size_t braid_eng_matmul_scratch(int64_t cols)
{
    size_t rows = MM_BLOCK_FLOATS / (size_t)(cols > 0 ? cols : 1);
    return (rows < 16 ? 16 : rows) * (size_t)cols;
}

void braid_eng_matmul(float *Y, const float *X, const braid_eng_mat_t *W,
                      int64_t T, float *scratch)
{
    int64_t rows = W->rows, cols = W->cols;
    if (T == 0 || rows == 0)
        return;
    if (W->dtype == BRAID_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)rows,
                    (int)cols, 1.0f, X, (int)cols, W->data, (int)cols, 0.0f, Y,
                    (int)rows);
        return;
    }
    int64_t block = (int64_t)(braid_eng_matmul_scratch(cols) / (size_t)cols);
    size_t es = braid_dtype_size(W->dtype);
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        int64_t nr = rows - r0 < block ? rows - r0 : block;
        braid_eng_convert(scratch, BRAID_F32,
                          (const unsigned char *)W->data + (size_t)(r0 * cols) * es,
                          W->dtype, (size_t)(nr * cols));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)nr,
                    (int)cols, 1.0f, X, (int)cols, scratch, (int)cols, 0.0f,
                    Y + r0, (int)rows);
    }
}

void braid_eng_blas_threads(int n)
{
    openblas_set_num_threads(n);
}
