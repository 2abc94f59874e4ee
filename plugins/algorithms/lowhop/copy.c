/* Copying a received block out of the receive area into the caller's buffer.
 *
 * Large calls on an oversubscribed host stream: every rank of a CPU moves
 * its whole message through the cache between two hand-offs, so the blocks
 * it copies out are evicted before anything reads them again, and each
 * ordinary store first reads its destination line (write-allocate).
 * Streaming (non-temporal) stores skip that read.  glibc's memcpy switches
 * to them only above a threshold it derives from the last-level cache, and
 * a VM may report the host's whole cache, so it never does.  Streaming
 * helps only where the data no longer fits the cache a rank gets
 * (docs/performance.md has the figures), hence the rule in
 * braid_lowhop_stream_ok: blocks of 256 KiB or more, and
 * message bytes times the ranks pinned to this CPU (a->nmates + 1; unpinned
 * ranks count as one) at least 32 MiB. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#endif

#include "lowhop.h"
#include "recv_area.h"

#define BRAID_LOWHOP_STREAM_BYTES ((size_t)32 << 20)
#define BRAID_LOWHOP_STREAM_BLOCK ((size_t)256 << 10)

int braid_lowhop_stream_ok(const braid_task_t        *task,
                           const braid_lowhop_area_t *a, size_t block)
{
    size_t msg = task->count * task->dtsize;
    size_t per_cpu;

    if (block < BRAID_LOWHOP_STREAM_BLOCK)
        return 0;
    size_t ranks = a->nmates > 0 ? (size_t)a->nmates + 1 : 1;
    if (__builtin_mul_overflow(msg, ranks, &per_cpu))
        return 1; /* more than any cache */
    return per_cpu >= BRAID_LOWHOP_STREAM_BYTES;
}

void braid_lowhop_copy_out(void *dst, const void *src, size_t n, int stream)
{
#ifdef HAVE_STREAM
    unsigned char       *d = dst;
    const unsigned char *s = src;

    if (!stream || n < 64) {
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
    /* Streaming stores are weakly ordered: fence them before whatever the
     * caller does next (return the buffer, raise a flag). */
    _mm_sfence();
#else
    (void)stream;
    memcpy(dst, src, n);
#endif
}
