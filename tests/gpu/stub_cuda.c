/* A stand-in for the CUDA driver (libcuda.so.1), for the device-pointer
 * detection test only: it answers cuPointerGetAttributes from a range the
 * test declares device memory, and fails on request. */
#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

static uintptr_t dev_lo, dev_hi, managed_lo, managed_hi;
static int       next_error;

EXPORT void stub_cuda_set_ranges(const void *dev, size_t dev_len,
                                 const void *managed, size_t managed_len)
{
    dev_lo     = (uintptr_t)dev;
    dev_hi     = dev_lo + dev_len;
    managed_lo = (uintptr_t)managed;
    managed_hi = managed_lo + managed_len;
}

/* The next query returns err (0 for none). */
EXPORT void stub_cuda_fail_next(int err) { next_error = err; }

EXPORT int cuPointerGetAttributes(unsigned n, int *attrs, void **data,
                                  unsigned long long ptr)
{
    if (next_error != 0) {
        int err    = next_error;
        next_error = 0;
        return err;
    }
    for (unsigned i = 0; i < n; i++) {
        unsigned *out = data[i];
        int       dev = ptr >= dev_lo && ptr < dev_hi;
        int       man = ptr >= managed_lo && ptr < managed_hi;
        if (attrs[i] == 2) /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
            *out = dev || man ? 2u : 0u;
        else if (attrs[i] == 8) /* CU_POINTER_ATTRIBUTE_IS_MANAGED */
            *out = man ? 1u : 0u;
        else
            *out = 0;
    }
    return 0;
}

EXPORT int cuGetErrorString(int err, const char **str)
{
    *str = err == 999 ? "stub failure for the test" : "unknown";
    return 0;
}
