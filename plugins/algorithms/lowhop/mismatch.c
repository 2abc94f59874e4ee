/* The error of a call whose peer wrote a flag of this call's number with
 * other signature bits (recv_area.h, "Flag values"): the peer called another
 * collective, count, dtype, op or root.  The core's failure inquiry, which
 * follows every failed call, compares the ranks' recorded calls and names
 * both sides; this message says what this rank saw. */
#include "lowhop.h"
#include "recv_area.h"

braid_status_t braid_lowhop_mismatch(const braid_task_t        *task,
                                     const braid_lowhop_area_t *a, int bank,
                                     int slot, uint64_t flag)
{
    const uint64_t *p =
        (const uint64_t *)(const void *)((const char *)a->base +
                                         braid_lowhop_slot_off(a, bank, slot));
    uint64_t got = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    return task->svc->error(
        BRAID_ERR_MISMATCH,
        "lowhop: rank %d: rank %d is in call #%llu with "
        "another signature (bits %08x, this rank's %08x): the ranks called "
        "different collectives, counts, dtypes, ops or roots",
        task->rank, braid_lowhop_slot_source(slot, task->rank, task->size),
        (unsigned long long)task->seq, (unsigned)(got >> 32),
        (unsigned)(flag >> 32));
}
