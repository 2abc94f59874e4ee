/* CPU reduction kernels for every dtype and op.
 *
 * f16 and bf16 are converted to f32, combined, and rounded back to nearest
 * even, so one call accumulates in f32.  BRAID_AVG combines as BRAID_SUM; the
 * caller divides once with braid_kernel_finish_avg (integers truncate toward
 * zero, as NCCL does).  Integer SUM/PROD wrap (two's complement, computed in
 * unsigned arithmetic so there is no undefined behaviour). */
#ifndef BRAID_KERNELS_REDUCE_H
#define BRAID_KERNELS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

/* inout[i] = inout[i] op in[i] */
void braid_kernel_reduce(void *inout, const void *in, size_t count,
                         braid_dtype_t dtype, braid_op_t op);
/* dst[i] = a[i] op b[i]; dst may alias a or b */
void braid_kernel_reduce2(void *dst, const void *a, const void *b,
                          size_t count, braid_dtype_t dtype, braid_op_t op);
/* buf[i] /= n when op is BRAID_AVG; nothing otherwise */
void braid_kernel_finish_avg(void *buf, size_t count, braid_dtype_t dtype,
                             braid_op_t op, int n);

/* dst = src, n bytes; stream 1: streaming stores, fenced (copy.c). */
void braid_kernel_copy(void *dst, const void *src, size_t n, int stream);

/* Scalar reference of braid_kernel_reduce2, for tests. */
void braid_kernel_reduce2_ref(void *dst, const void *a, const void *b,
                              size_t count, braid_dtype_t dtype,
                              braid_op_t op);

float    braid_f16_to_f32(uint16_t h);
uint16_t braid_f32_to_f16(float f); /* round to nearest even, NaN kept */
float    braid_bf16_to_f32(uint16_t h);
uint16_t braid_f32_to_bf16(float f); /* round to nearest even, NaN kept */

#endif
