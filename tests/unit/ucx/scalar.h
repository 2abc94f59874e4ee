/* Scalar reference arithmetic for the ucx plugin's unit test: the test's own
 * implementation of the reduce services, deliberately simple (one element
 * at a time) so that it is obviously right. */
#ifndef BRAID_TEST_UCX_SCALAR_H
#define BRAID_TEST_UCX_SCALAR_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

size_t   ts_dtsize(braid_dtype_t dt);
float    ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_f16(float f);
float    ts_bf16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float f);

/* Element i of buf as a double, and stored from a double (rounded to the
 * dtype: nearest-even for floats, wrap-around for integers). */
double ts_get(const void *buf, size_t i, braid_dtype_t dt);
void   ts_set(void *buf, size_t i, braid_dtype_t dt, double v);

/* The services the test hands the plugin. */
void ts_reduce(void *inout, const void *in, size_t count, braid_dtype_t dt,
               braid_op_t op);
void ts_reduce2(void *dst, const void *a, const void *b, size_t count,
                braid_dtype_t dt, braid_op_t op);
void ts_finish_avg(void *buf, size_t count, braid_dtype_t dt, braid_op_t op,
                   int n);

#endif
