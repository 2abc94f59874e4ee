/* Whether a received block is copied out of the receive area into the
 * caller's buffer with streaming stores (svc->copy).
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
