/* CUDA reduction kernels: one grid-stride kernel per (dtype, op), built
 * from an element functor, with the rules of the CPU kernels (see
 * reduce_cuda.h and kernels/reduce.c).  Every float operation is spelled
 * with a round-to-nearest intrinsic (__fadd_rn, ...) so that nvcc cannot
 * contract a multiply and an add into an FMA or use a fast approximation:
 * the result must not depend on the compiler. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/reduce_cuda.h"

#define THREADS 256
#define MAX_BLOCKS 4096 /* the grid-stride loop covers the rest */

/* ------------------------------------------------------------- elements */

/* Float MIN/MAX on bit patterns.  The key maps sign-magnitude onto an
 * unsigned order equal to IEEE's total order, one-to-one, so the choice
 * never depends on argument order; a NaN wins over any number, and of two
 * NaNs the larger pattern.  T is the storage (uint16_t, uint32_t,
 * uint64_t), INF the format's infinity without sign. */
template <typename T, uint64_t INF, bool MAX> struct FloatPick {
    static constexpr unsigned BITS = sizeof(T) * 8;
    __device__ static uint64_t key(uint64_t u)
    {
        const uint64_t top  = (uint64_t)1 << (BITS - 1);
        const uint64_t mask = BITS == 64 ? ~(uint64_t)0 : (top << 1) - 1;
        return u & top ? ~u & mask : u | top;
    }
    __device__ static T apply(T a, T b)
    {
        const uint64_t mag = ((uint64_t)1 << (BITS - 1)) - 1;
        uint64_t na = ((uint64_t)a & mag) > INF ? (uint64_t)a : 0;
        uint64_t nb = ((uint64_t)b & mag) > INF ? (uint64_t)b : 0;
        if (na | nb)
            return (T)(na > nb ? na : nb);
        bool a_first = MAX ? key(a) > key(b) : key(a) < key(b);
        return a_first ? a : b;
    }
};

struct F32Sum  { __device__ static float apply(float a, float b) { return __fadd_rn(a, b); } };
struct F32Prod { __device__ static float apply(float a, float b) { return __fmul_rn(a, b); } };
struct F64Sum  { __device__ static double apply(double a, double b) { return __dadd_rn(a, b); } };
struct F64Prod { __device__ static double apply(double a, double b) { return __dmul_rn(a, b); } };

/* f16 <-> f32.  Widening is exact (a NaN keeps sign and payload);
 * narrowing rounds to nearest even, overflows to infinity, and keeps a
 * NaN a NaN with the top of its payload. */
__device__ static float f16_widen(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em   = h & 0x7fffu;
    if (em >= 0x7c00u)
        return __uint_as_float(sign | 0x7f800000u | (em & 0x3ffu) << 13);
    if (em >= 0x400u)
        return __uint_as_float(sign | ((em << 13) + (112u << 23)));
    /* Subnormal: em * 2^-24, an exact product. */
    return __uint_as_float(sign | __float_as_uint(__fmul_rn((float)em, 0x1p-24f)));
}

__device__ static uint16_t f16_narrow(float f)
{
    uint32_t u    = __float_as_uint(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a    = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
        uint32_t m = (a >> 13) & 0x3ffu;
        return (uint16_t)(sign | 0x7c00u | (m != 0 ? m : 0x200u));
    }
    if (a >= 0x477ff000u) /* 65520 and up round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) /* normal: round the 13 dropped bits */
        return (uint16_t)(sign | (((a + 0xfffu + ((a >> 13) & 1u)) >> 13) -
                                  (112u << 10)));
    /* Below 2^-14: adding 0.5 (ulp 2^-24, the f16 subnormal step) rounds
     * |f| onto that grid, ties to even; the low bits are the encoding. */
    return (uint16_t)(sign | (__float_as_uint(__fadd_rn(__uint_as_float(a), 0.5f)) -
                              0x3f000000u));
}

__device__ static float bf16_widen(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ static uint16_t bf16_narrow(float f)
{
    uint32_t u = __float_as_uint(f);
    uint32_t t = u >> 16;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((t & 0x7fu) != 0 ? t : t | 0x40u);
    return (uint16_t)((u + 0x7fffu + (t & 1u)) >> 16);
}

struct F16  { __device__ static float widen(uint16_t h) { return f16_widen(h); }
              __device__ static uint16_t narrow(float f) { return f16_narrow(f); } };
struct BF16 { __device__ static float widen(uint16_t h) { return bf16_widen(h); }
              __device__ static uint16_t narrow(float f) { return bf16_narrow(f); } };

/* f16/bf16 SUM/PROD: combined in f32, rounded back once. */
template <typename H, typename OP> struct HalfArith {
    __device__ static uint16_t apply(uint16_t a, uint16_t b)
    {
        return H::narrow(OP::apply(H::widen(a), H::widen(b)));
    }
};

/* Integers: SUM/PROD in the unsigned type wrap without undefined
 * behaviour; MIN/MAX compare in the signed one. */
template <typename T> struct IntSum  { __device__ static T apply(T a, T b) { return (T)(a + b); } };
template <typename T> struct IntProd { __device__ static T apply(T a, T b) { return (T)(a * b); } };
template <typename T> struct IntMin  { __device__ static T apply(T a, T b) { return b < a ? b : a; } };
template <typename T> struct IntMax  { __device__ static T apply(T a, T b) { return b > a ? b : a; } };

/* -------------------------------------------------------------- kernels */

/* Each element is read before it is written, so dst may equal a or b. */
template <typename T, typename OP>
__global__ void reduce2_kernel(T *dst, const T *a, const T *b, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = OP::apply(a[i], b[i]);
}

template <typename T, typename OP>
static cudaError_t launch2(void *dst, const void *a, const void *b, size_t n,
                           cudaStream_t stream)
{
    size_t blocks = (n + THREADS - 1) / THREADS;
    if (blocks > MAX_BLOCKS)
        blocks = MAX_BLOCKS;
    reduce2_kernel<T, OP><<<(unsigned)blocks, THREADS, 0, stream>>>(
        (T *)dst, (const T *)a, (const T *)b, n);
    return cudaGetLastError();
}

/* AVG's final division: floats divide (a multiply by 1/n is not exact),
 * f16/bf16 in f32, integers truncate toward zero as C division does. */
struct AvgF32  { __device__ static float apply(float x, int n) { return __fdiv_rn(x, (float)n); } };
struct AvgF64  { __device__ static double apply(double x, int n) { return __ddiv_rn(x, (double)n); } };
template <typename H> struct AvgHalf {
    __device__ static uint16_t apply(uint16_t x, int n)
    {
        return H::narrow(__fdiv_rn(H::widen(x), (float)n));
    }
};
template <typename T> struct AvgInt { __device__ static T apply(T x, int n) { return (T)(x / (T)n); } };
struct AvgU8 { __device__ static uint8_t apply(uint8_t x, int n) { return (uint8_t)(x / (unsigned)n); } };

template <typename T, typename AVG>
__global__ void avg_kernel(T *buf, size_t n, int div)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        buf[i] = AVG::apply(buf[i], div);
}

template <typename T, typename AVG>
static cudaError_t launch_avg(void *buf, size_t n, int div, cudaStream_t stream)
{
    size_t blocks = (n + THREADS - 1) / THREADS;
    if (blocks > MAX_BLOCKS)
        blocks = MAX_BLOCKS;
    avg_kernel<T, AVG><<<(unsigned)blocks, THREADS, 0, stream>>>((T *)buf, n, div);
    return cudaGetLastError();
}

/* ------------------------------------------------------------- dispatch */

typedef cudaError_t (*launch2_fn)(void *, const void *, const void *, size_t,
                                  cudaStream_t);

#define ROW(SUM, PROD, MIN, MAX) {SUM, PROD, MIN, MAX, SUM}

static const launch2_fn table[BRAID_DTYPE_COUNT][BRAID_OP_COUNT] = {
    /* BRAID_F32 */ ROW((launch2<float, F32Sum>), (launch2<float, F32Prod>),
                        (launch2<uint32_t, FloatPick<uint32_t, 0x7f800000u, false>>),
                        (launch2<uint32_t, FloatPick<uint32_t, 0x7f800000u, true>>)),
    /* BRAID_F64 */ ROW((launch2<double, F64Sum>), (launch2<double, F64Prod>),
                        (launch2<uint64_t, FloatPick<uint64_t, 0x7ff0000000000000u, false>>),
                        (launch2<uint64_t, FloatPick<uint64_t, 0x7ff0000000000000u, true>>)),
    /* BRAID_F16 */ ROW((launch2<uint16_t, HalfArith<F16, F32Sum>>),
                        (launch2<uint16_t, HalfArith<F16, F32Prod>>),
                        (launch2<uint16_t, FloatPick<uint16_t, 0x7c00u, false>>),
                        (launch2<uint16_t, FloatPick<uint16_t, 0x7c00u, true>>)),
    /* BRAID_BF16 */ ROW((launch2<uint16_t, HalfArith<BF16, F32Sum>>),
                         (launch2<uint16_t, HalfArith<BF16, F32Prod>>),
                         (launch2<uint16_t, FloatPick<uint16_t, 0x7f80u, false>>),
                         (launch2<uint16_t, FloatPick<uint16_t, 0x7f80u, true>>)),
    /* BRAID_I32 */ ROW((launch2<uint32_t, IntSum<uint32_t>>), (launch2<uint32_t, IntProd<uint32_t>>),
                        (launch2<int32_t, IntMin<int32_t>>), (launch2<int32_t, IntMax<int32_t>>)),
    /* BRAID_I64 */ ROW((launch2<uint64_t, IntSum<uint64_t>>), (launch2<uint64_t, IntProd<uint64_t>>),
                        (launch2<int64_t, IntMin<int64_t>>), (launch2<int64_t, IntMax<int64_t>>)),
    /* BRAID_U8 */ ROW((launch2<uint8_t, IntSum<uint8_t>>), (launch2<uint8_t, IntProd<uint8_t>>),
                       (launch2<uint8_t, IntMin<uint8_t>>), (launch2<uint8_t, IntMax<uint8_t>>)),
};

extern "C" int braid_cuda_reduce2(void *dst, const void *a, const void *b,
                                  size_t count, braid_dtype_t dtype,
                                  braid_op_t op, void *stream)
{
    if ((unsigned)dtype >= BRAID_DTYPE_COUNT || (unsigned)op >= BRAID_OP_COUNT)
        return (int)cudaErrorInvalidValue;
    if (count == 0)
        return (int)cudaSuccess;
    return (int)table[dtype][op](dst, a, b, count, (cudaStream_t)stream);
}

extern "C" int braid_cuda_finish_avg(void *buf, size_t count,
                                     braid_dtype_t dtype, braid_op_t op, int n,
                                     void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (op != BRAID_AVG || n <= 1 || count == 0)
        return (int)cudaSuccess;
    switch (dtype) {
    case BRAID_F32: return (int)launch_avg<float, AvgF32>(buf, count, n, s);
    case BRAID_F64: return (int)launch_avg<double, AvgF64>(buf, count, n, s);
    case BRAID_F16: return (int)launch_avg<uint16_t, AvgHalf<F16>>(buf, count, n, s);
    case BRAID_BF16: return (int)launch_avg<uint16_t, AvgHalf<BF16>>(buf, count, n, s);
    case BRAID_I32: return (int)launch_avg<int32_t, AvgInt<int32_t>>(buf, count, n, s);
    case BRAID_I64: return (int)launch_avg<int64_t, AvgInt<int64_t>>(buf, count, n, s);
    case BRAID_U8: return (int)launch_avg<uint8_t, AvgU8>(buf, count, n, s);
    default: return (int)cudaErrorInvalidValue;
    }
}
