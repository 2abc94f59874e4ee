/* Matrix-vector kernels (decode) and blocked sgemm (prefill); see linalg.h.
 *
 * The matvec kernels read one row at a time, start to end: the weight is
 * then one sequential stream, which the hardware prefetchers follow at full
 * bandwidth (four rows at a time, four interleaved streams, reached a third
 * of it on the machine these were written on).  Two vectors of partial sums
 * per row keep the multiply-adds from waiting on each other; x stays in L1.
 * They are written with GCC vector types, which the compiler lowers to
 * AVX-512, AVX2 or SSE; the hot loops get one clone per ISA level (chosen
 * once by the loader), like the reduction kernels in kernels/. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/hot.h"
#include "engine/common/linalg.h"

typedef float    v16f __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));
typedef uint16_t v16h __attribute__((vector_size(32)));
#if defined(__FLT16_MAX__) /* the compiler has _Float16 (GCC 12, x86) */
typedef _Float16 v16hf __attribute__((vector_size(32)));
#endif

/* Rows per block of the prefill's widened weight: 64 KiB..1 MiB of f32. */
#define MM_BLOCK_FLOATS (1u << 18)

braid_status_t braid_eng_mat_alloc(braid_eng_mat_t *m, braid_dtype_t dtype,
                                   int64_t rows, int64_t cols)
{
    size_t bytes = (size_t)rows * (size_t)cols * braid_dtype_size(dtype);
    *m           = (braid_eng_mat_t){dtype, rows, cols, NULL, NULL};
    if (bytes &&
        posix_memalign(&m->block, 64, (bytes + 63) & ~(size_t)63) != 0) {
        m->block = NULL;
        return braid_eng_fail(
            BRAID_ERR_NO_MEMORY, "out of memory for a [%lld, %lld] %s matrix",
            (long long)rows, (long long)cols, braid_dtype_name(dtype));
    }
    m->data = m->block;
    return BRAID_OK;
}

void braid_eng_mat_free(braid_eng_mat_t *m)
{
    free(m->block);
    m->block = m->data = NULL;
}

size_t braid_eng_mat_bytes(const braid_eng_mat_t *m)
{
    return (size_t)m->rows * (size_t)m->cols * braid_dtype_size(m->dtype);
}

#define HUGE_PAGE ((size_t)2 << 20)

braid_status_t braid_eng_arena_init(braid_eng_arena_t *a, size_t bytes)
{
    *a         = (braid_eng_arena_t){NULL, 0, 0};
    size_t len = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (!len)
        return BRAID_OK;
    /* Map one huge page more and trim, for the alignment. */
    unsigned char *p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory for %zu MiB",
                              len >> 20);
    unsigned char *base = (unsigned char *)(((uintptr_t)p + HUGE_PAGE - 1) &
                                            ~(uintptr_t)(HUGE_PAGE - 1));
    if (base > p)
        munmap(p, (size_t)(base - p));
    if (p + HUGE_PAGE > base)
        munmap(base + len, (size_t)(p + HUGE_PAGE - base));
    madvise(base, len, MADV_HUGEPAGE); /* a hint: fine if refused */
    a->base = base;
    a->size = len;
    return BRAID_OK;
}

size_t braid_eng_arena_need(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

void *braid_eng_arena_take(braid_eng_arena_t *a, size_t bytes)
{
    size_t need = braid_eng_arena_need(bytes);
    if (need > a->size - a->used)
        return NULL;
    void *p = a->base + a->used;
    a->used += need;
    return p;
}

void braid_eng_arena_free(braid_eng_arena_t *a)
{
    if (a->base)
        munmap(a->base, a->size);
    *a = (braid_eng_arena_t){NULL, 0, 0};
}

braid_status_t braid_eng_mat_from(braid_eng_mat_t *m, braid_eng_arena_t *a,
                                  braid_dtype_t dtype, int64_t rows,
                                  int64_t cols)
{
    size_t bytes = (size_t)rows * (size_t)cols * braid_dtype_size(dtype);
    *m           = (braid_eng_mat_t){dtype, rows, cols, NULL, NULL};
    if (bytes && !(m->data = braid_eng_arena_take(a, bytes)))
        return braid_eng_fail(BRAID_ERR_INTERNAL,
                              "arena of %zu bytes full at a [%lld, %lld] %s "
                              "matrix",
                              a->size, (long long)rows, (long long)cols,
                              braid_dtype_name(dtype));
    return BRAID_OK;
}

/* Macros rather than functions: a function returning a 64-byte vector
 * would have a different ABI in each clone. */
#define LOAD_F32(dst, p) memcpy(&(dst), (p), sizeof(v16f))
#if defined(__FLT16_MAX__)
#define LOAD_F16(dst, p)                                                      \
    do {                                                                      \
        v16hf h_;                                                             \
        memcpy(&h_, (p), sizeof(h_));                                         \
        (dst) = __builtin_convertvector(h_, v16f);                            \
    } while (0)
#else
#define LOAD_F16(dst, p)                                                      \
    do {                                                                      \
        for (int k_ = 0; k_ < 16; k_++)                                       \
            (dst)[k_] = braid_eng_f16_to_f32((p)[k_]);                        \
    } while (0)
#endif

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
    return dt == BRAID_BF16 ? braid_eng_bf16_to_f32(h)
                            : braid_eng_f16_to_f32(h);
}

/* One kernel per weight type: y[r0..r1) of W . x, 32 columns a step.
 * LOAD widens 16 weights into a v16f. */
#define MATVEC_KERNEL(NAME, WT, LOAD, DT)                                     \
    ENG_HOT static void NAME(float *y, const WT *W, const float *x,           \
                             size_t cols, size_t r0, size_t r1)               \
    {                                                                         \
        size_t c32 = cols & ~(size_t)31;                                      \
        v16f   x0, x1, w0, w1;                                                \
        for (size_t r = r0; r < r1; r++) {                                    \
            const WT *wr = W + r * cols;                                      \
            v16f      a0 = {0}, a1 = {0};                                     \
            for (size_t c = 0; c < c32; c += 32) {                            \
                LOAD_F32(x0, x + c);                                          \
                LOAD_F32(x1, x + c + 16);                                     \
                LOAD(w0, wr + c);                                             \
                LOAD(w1, wr + c + 16);                                        \
                a0 += w0 * x0;                                                \
                a1 += w1 * x1;                                                \
            }                                                                 \
            a0 += a1;                                                         \
            float s = hsum(&a0);                                              \
            for (size_t c = c32; c < cols; c++)                               \
                s += scalar_of(DT, wr, c) * x[c];                             \
            y[r] = s;                                                         \
        }                                                                     \
    }

MATVEC_KERNEL(matvec_f32, float, LOAD_F32, BRAID_F32)
MATVEC_KERNEL(matvec_f16, uint16_t, LOAD_F16, BRAID_F16)

/* bf16 is the top half of an f32, so a 32-bit lane holding two bf16 values
 * gives the even one as lane << 16 and the odd one as lane & 0xffff0000:
 * 32 weights widened with one shift and one and, no shuffles.  x comes
 * pre-arranged to match (interleave_x): per 32 columns, the 16 even ones,
 * then the 16 odd ones.  The sum runs in another order than the f32
 * kernel's; both are exact to f32 rounding. */
#define BF16_STEP(acc, wrow, col, xe, xo)                                     \
    do {                                                                      \
        v16u u_, lo_, hi_;                                                    \
        v16f we_, wo_;                                                        \
        memcpy(&u_, (wrow) + (col), sizeof(u_));                              \
        lo_ = u_ << 16;                                                       \
        hi_ = u_ & 0xffff0000u;                                               \
        memcpy(&we_, &lo_, sizeof(we_));                                      \
        memcpy(&wo_, &hi_, sizeof(wo_));                                      \
        acc += we_ * (xe);                                                    \
        acc += wo_ * (xo);                                                    \
    } while (0)

/* 64 columns a step, two accumulators; a 32-column step and scalars after. */
ENG_HOT static void matvec_bf16(float *y, const uint16_t *W, const float *x,
                                const float *xp, size_t cols, size_t r0,
                                size_t r1)
{
    size_t c64 = cols & ~(size_t)63, c32 = cols & ~(size_t)31;
    v16f   x0, x1, x2, x3;
    for (size_t r = r0; r < r1; r++) {
        const uint16_t *wr = W + r * cols;
        v16f            a0 = {0}, a1 = {0};
        for (size_t c = 0; c < c64; c += 64) {
            LOAD_F32(x0, xp + c);
            LOAD_F32(x1, xp + c + 16);
            LOAD_F32(x2, xp + c + 32);
            LOAD_F32(x3, xp + c + 48);
            BF16_STEP(a0, wr, c, x0, x1);
            BF16_STEP(a1, wr, c + 32, x2, x3);
        }
        if (c64 < c32) {
            LOAD_F32(x0, xp + c64);
            LOAD_F32(x1, xp + c64 + 16);
            BF16_STEP(a0, wr, c64, x0, x1);
        }
        a0 += a1;
        float s = hsum(&a0);
        for (size_t c = c32; c < cols; c++)
            s += braid_eng_bf16_to_f32(wr[c]) * x[c];
        y[r] = s;
    }
}

/* xp[cols]: per 32 columns of x the even ones, then the odd ones; the
 * tail as it is. */
static void interleave_x(float *xp, const float *x, size_t cols)
{
    size_t c32 = cols & ~(size_t)31;
    for (size_t c = 0; c < c32; c += 32)
        for (size_t k = 0; k < 16; k++) {
            xp[c + k]      = x[c + 2 * k];
            xp[c + 16 + k] = x[c + 2 * k + 1];
        }
    memcpy(xp + c32, x + c32, (cols - c32) * sizeof(float));
}

typedef struct {
    int                           n;
    float *const                 *y;
    const braid_eng_mat_t *const *W;
    const float                  *x;
    const float                  *xp; /* x interleaved, for bf16 weights */
} matvec_job_t;

/* Member `me` of `nt` takes a contiguous block of rows of each weight:
 * one sequential stream per thread. */
static void matvec_job(void *arg, int me, int nt)
{
    const matvec_job_t *j = arg;
    for (int i = 0; i < j->n; i++) {
        const braid_eng_mat_t *W    = j->W[i];
        size_t                 rows = (size_t)W->rows;
        size_t                 r0   = rows * (size_t)me / (size_t)nt;
        size_t                 r1   = rows * (size_t)(me + 1) / (size_t)nt;
        if (r0 >= r1)
            continue;
        size_t cols = (size_t)W->cols;
        switch (W->dtype) {
        case BRAID_BF16:
            matvec_bf16(j->y[i], W->data, j->x, j->xp, cols, r0, r1);
            break;
        case BRAID_F16:
            matvec_f16(j->y[i], W->data, j->x, cols, r0, r1);
            break;
        default: matvec_f32(j->y[i], W->data, j->x, cols, r0, r1); break;
        }
    }
}

/* The interleaved x of the calling thread, grown as needed. */
static _Thread_local float *xp_buf;
static _Thread_local size_t xp_cap;

void braid_eng_matvec(braid_eng_pool_t *pool, int n, float *const *y,
                      const braid_eng_mat_t *const *W, const float *x)
{
    matvec_job_t j    = {n, y, W, x, NULL};
    size_t       cols = 0;
    for (int i = 0; i < n; i++)
        if (W[i]->dtype == BRAID_BF16)
            cols = (size_t)W[i]->cols;
    if (cols) { /* the weights of one call share x, so one cols */
        if (cols > xp_cap) {
            float *nb = realloc(xp_buf, cols * sizeof(float));
            if (!nb)
                abort(); /* a few KiB; a process this short of memory is lost
                          */
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

/* Rows per block: as many as fit MM_BLOCK_FLOATS, at least 16; so the
 * scratch a width needs grows with the width, and the scratch sized for the
 * widest weight serves every narrower one. */
static int64_t mm_block_rows(int64_t cols)
{
    int64_t rows = (int64_t)MM_BLOCK_FLOATS / (cols > 0 ? cols : 1);
    return rows < 16 ? 16 : rows;
}

size_t braid_eng_matmul_scratch(int64_t cols)
{
    size_t need = (size_t)(mm_block_rows(cols) * cols);
    return need > MM_BLOCK_FLOATS ? need : MM_BLOCK_FLOATS;
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
    int64_t block = mm_block_rows(cols);
    size_t  es    = braid_dtype_size(W->dtype);
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        int64_t nr = rows - r0 < block ? rows - r0 : block;
        braid_eng_convert(scratch, BRAID_F32,
                          (const unsigned char *)W->data +
                              (size_t)(r0 * cols) * es,
                          W->dtype, (size_t)(nr * cols));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)nr,
                    (int)cols, 1.0f, X, (int)cols, scratch, (int)cols, 0.0f,
                    Y + r0, (int)rows);
    }
}

void braid_eng_transpose(float *dst, const float *src, int64_t rows,
                         int64_t cols)
{
    enum { TILE = 32 };
    for (int64_t r0 = 0; r0 < rows; r0 += TILE)
        for (int64_t c0 = 0; c0 < cols; c0 += TILE)
            for (int64_t r = r0; r < r0 + TILE && r < rows; r++)
                for (int64_t c = c0; c < c0 + TILE && c < cols; c++)
                    dst[c * rows + r] = src[r * cols + c];
}

void braid_eng_blas_threads(int n) { openblas_set_num_threads(n); }
