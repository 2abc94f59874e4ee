/* Matrix work of the engines: weights in f32, bf16 or f16, activations f32.
 *
 * Two regimes.  Decode multiplies a weight by one vector: every weight byte
 * is read once per token and used for one multiply-add, so the time is the
 * bytes read over the memory bandwidth; braid_eng_matvec reads the weight in
 * its own type (bf16: half the bytes of f32) and widens in registers.
 * Prefill multiplies by T vectors at once: that is compute, done by CBLAS
 * sgemm (OpenBLAS) on f32, with a bf16/f16 weight widened one block of rows
 * at a time into a scratch buffer that stays in cache.
 *
 * Threads: matvec splits rows over a braid_eng_pool_t (NULL: the caller
 * alone); sgemm uses OpenBLAS's own threads, set by braid_eng_blas_threads.
 * Give both the same count, the rank's "threads per rank". */
#ifndef BRAID_ENG_LINALG_H
#define BRAID_ENG_LINALG_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

#include "engine/common/pool.h"

/* A row-major matrix [rows, cols] of dtype f32, bf16 or f16.  block is the
 * allocation braid_eng_mat_free releases: set by braid_eng_mat_alloc, NULL
 * for a matrix carved from an arena (the arena owns it). */
typedef struct {
    braid_dtype_t dtype;
    int64_t       rows, cols;
    void         *data;
    void         *block;
} braid_eng_mat_t;

/* Allocates data for rows x cols of dtype (64-byte aligned, uninitialised);
 * free with braid_eng_mat_free. */
braid_status_t braid_eng_mat_alloc(braid_eng_mat_t *m, braid_dtype_t dtype,
                                   int64_t rows, int64_t cols);
void           braid_eng_mat_free(braid_eng_mat_t *m);
/* Bytes of data. */
size_t braid_eng_mat_bytes(const braid_eng_mat_t *m);

/* Memory for data that is streamed over and over (weights, KV cache): one
 * anonymous mapping, 2 MiB aligned and marked MADV_HUGEPAGE, so that the
 * kernel backs it with huge pages where transparent huge pages are allowed
 * (enabled = always or madvise).  A stream over 4 KiB pages misses the TLB
 * every page, which costs most under virtualisation (two-level page walks).
 * Blocks are carved in order, 64-byte aligned, and freed all at once. */
typedef struct {
    unsigned char *base;
    size_t         size, used;
} braid_eng_arena_t;

braid_status_t braid_eng_arena_init(braid_eng_arena_t *a, size_t bytes);
/* bytes from the arena, or NULL when it is full. */
void *braid_eng_arena_take(braid_eng_arena_t *a, size_t bytes);
void  braid_eng_arena_free(braid_eng_arena_t *a);
/* Bytes braid_eng_arena_take(bytes) uses up (its 64-byte rounding). */
size_t braid_eng_arena_need(size_t bytes);
/* A matrix whose data comes from the arena (m->block = NULL). */
braid_status_t braid_eng_mat_from(braid_eng_mat_t *m, braid_eng_arena_t *a,
                                  braid_dtype_t dtype, int64_t rows,
                                  int64_t cols);

/* y[W->rows] = W[rows, cols] . x[cols], for `n` weights sharing one x
 * (q, k, v of one layer: one pass of the pool instead of three):
 * y[i] = W[i] . x.  Rows are split over the pool's members. */
void braid_eng_matvec(braid_eng_pool_t *pool, int n, float *const *y,
                      const braid_eng_mat_t *const *W, const float *x);

/* Y[T, W->rows] = X[T, W->cols] . W^T (each token's row times the weight).
 * scratch holds at least braid_eng_matmul_scratch(W->cols) floats (the
 * scratch for a wider weight will do; unused
 * for f32 weights). */
void   braid_eng_matmul(float *Y, const float *X, const braid_eng_mat_t *W,
                        int64_t T, float *scratch);
size_t braid_eng_matmul_scratch(int64_t cols);

/* dst[cols, rows] = src[rows, cols]^T (f32), in tiles that stay in cache:
 * GPT-2 checkpoints store a block's matrices (in, out). */
void braid_eng_transpose(float *dst, const float *src, int64_t rows,
                         int64_t cols);

/* OpenBLAS threads for this process (openblas_set_num_threads). */
void braid_eng_blas_threads(int n);

#endif
