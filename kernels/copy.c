/* A copy for data nobody reads again soon (svc->copy).
 *
 * An ordinary store first reads its destination line (write-allocate)
 * and leaves it in the cache, evicting what the caller needs next; a
 * streaming (non-temporal) store does neither, which halves the memory
 * traffic of a copy into a buffer larger than the cache.  glibc's memcpy
 * switches to such stores only above a threshold derived from the
 * last-level cache, which a VM may report as the whole host's: so the
 * caller says when. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#endif

#include "kernels/reduce.h"

void braid_kernel_copy(void *dst, const void *src, size_t n, int stream)
{
#ifdef HAVE_STREAM
    unsigned char       *d = dst;
    const unsigned char *s = src;

    if (!stream || n < 4096) {
        memcpy(dst, src, n);
        return;
    }
    /* Streaming stores want 16-byte aligned destinations. */
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
        _mm_stream_si128((__m128i *)(void *)d, x0);
        _mm_stream_si128((__m128i *)(void *)(d + 16), x1);
        _mm_stream_si128((__m128i *)(void *)(d + 32), x2);
        _mm_stream_si128((__m128i *)(void *)(d + 48), x3);
    }
    memcpy(d, s, n);
    /* Weakly ordered: fenced before the caller raises a flag. */
    _mm_sfence();
#else
    (void)stream;
    memcpy(dst, src, n);
#endif
}
