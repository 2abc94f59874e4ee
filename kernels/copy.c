/* svc->copy: the copy for data that crosses cores, or that nobody reads
 * again soon.
 *
 * stream 0, from COPY_VEC_MIN bytes: a loop of 16-byte vector moves.
 * glibc's memcpy moves such sizes with `rep movsb` where the CPU reports
 * ERMS/FSRM, and on some CPUs (AMD's Zen among them) that instruction runs
 * several times slower than vector moves when the destination lines are
 * held by another core -- the normal case of a put into a peer's receive
 * area or a message into a shm cell, whose lines the peer read last
 * (docs/performance.md, "rep movsb between cores").  Below it memcpy's own
 * vector paths run, as fast and with less code.
 *
 * stream 1, from 4 KiB: streaming (non-temporal) stores.  An ordinary
 * store first reads its destination line (write-allocate) and leaves it
 * in the cache, evicting what the caller needs next; a streaming store
 * does neither, which halves the memory traffic of a copy into a buffer
 * larger than the cache.  glibc's memcpy switches to such stores only
 * above a threshold derived from the last-level cache, which a VM may
 * report as the whole host's: so the caller says when. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_VEC 1
#endif

#include "kernels/reduce.h"

#define COPY_VEC_MIN 2048

#ifdef HAVE_VEC
/* Whole 64-byte steps of n, then the tail with memcpy; stream (a constant
 * where this is inlined) picks the stores. */
static inline __attribute__((always_inline)) void
copy_lines(unsigned char *d, const unsigned char *s, size_t n, int stream)
{
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i x[4];
        for (int k = 0; k < 4; k++)
            x[k] =
                _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * k));
        for (int k = 0; k < 4; k++) {
            __m128i *to = (__m128i *)(void *)(d + 16 * k);
            if (stream)
                _mm_stream_si128(to, x[k]);
            else
                _mm_storeu_si128(to, x[k]);
        }
        /* Keeps the compiler from seeing a copy loop and calling memcpy
         * for it (-ftree-loop-distribute-patterns), which is what this
         * loop is here to avoid. */
        __asm__ __volatile__("" ::: "memory");
    }
    memcpy(d, s, n);
}

static void copy_stream(unsigned char *d, const unsigned char *s, size_t n)
{
    /* Streaming stores want 16-byte aligned destinations. */
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    memcpy(d, s, head);
    copy_lines(d + head, s + head, n - head, 1);
    /* Weakly ordered: fenced before the caller raises a flag. */
    _mm_sfence();
}
#endif

void braid_kernel_copy(void *dst, const void *src, size_t n, int stream)
{
#ifdef HAVE_VEC
    if (stream && n >= 4096)
        copy_stream(dst, src, n);
    else if (n >= COPY_VEC_MIN)
        copy_lines(dst, src, n, 0);
    else
        memcpy(dst, src, n);
#else
    (void)stream;
    memcpy(dst, src, n);
#endif
}
