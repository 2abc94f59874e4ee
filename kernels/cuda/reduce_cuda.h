/* CUDA reduction kernels for every dtype and op, with the CPU kernels'
 * rules (kernels/reduce.h): f16/bf16 combine in f32 and round back to
 * nearest even, AVG combines as SUM and divides once at the end (integers
 * truncate toward zero), integer SUM/PROD wrap, float MIN/MAX pick one
 * input bit for bit (NaN wins, the larger NaN pattern of two, -0 < +0).
 * So MIN/MAX and every integer result equal the CPU's bit for bit, and so
 * do float SUM/PROD/AVG except for the payload of a NaN result: NVIDIA
 * GPUs return the canonical NaN where a CPU keeps an input's payload.
 *
 * Built only with -Dcuda=enabled (or auto with nvcc found); the functions
 * take the stream as a void * (a cudaStream_t) so that C code includes this
 * header without CUDA's.  Each enqueues one kernel and returns its launch
 * status as a cudaError_t (0 is cudaSuccess); a count of 0 launches
 * nothing. */
#ifndef BRAID_KERNELS_CUDA_REDUCE_H
#define BRAID_KERNELS_CUDA_REDUCE_H

#include <stddef.h>

#include <braid/braid.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = a[i] op b[i] for i < count, device memory; dst may equal a or b. */
int braid_cuda_reduce2(void *dst, const void *a, const void *b, size_t count,
                       braid_dtype_t dtype, braid_op_t op, void *stream);
/* buf[i] /= n when op is BRAID_AVG and n > 1; nothing otherwise. */
int braid_cuda_finish_avg(void *buf, size_t count, braid_dtype_t dtype,
                          braid_op_t op, int n, void *stream);

#ifdef __cplusplus
}
#endif
#endif
