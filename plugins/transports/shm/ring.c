/* The cells of one (sender, receiver) ring.
 *
 * Single producer, single consumer, no locks: the sender owns `produced`,
 * the receiver owns `consumed`, and each cell's `seq` says whether it is
 * full.  The release store of seq orders the cell's header and payload
 * before it; the receiver's acquire load of seq orders its reads after.  The
 * same pair on `tail` keeps the sender from reusing a cell the receiver is
 * still reading. */
#include <string.h>

#include "shm.h"

#define RING_MASK ((uint64_t)BRAID_SHM_NCELLS - 1)

/* Whether the ring has a free cell; reads the receiver's tail only when the
 * cached one says full, so a sender that keeps up never touches that line. */
static int ring_has_room(braid_shm_out_t *out)
{
    if (out->produced - out->tail_seen < BRAID_SHM_NCELLS) {
        return 1;
    }
    out->tail_seen = __atomic_load_n(&out->ring->tail, __ATOMIC_ACQUIRE);
    return out->produced - out->tail_seen < BRAID_SHM_NCELLS;
}

size_t braid_shm_ring_push(const braid_services_t *svc, braid_shm_out_t *out,
                           braid_shm_op_t *op)
{
    size_t moved = 0;

    /* A message always takes at least one cell, even with no payload: the
     * receiver must see its tag to complete the matching receive. */
    while ((op->done < op->len || moved == 0) && !op->complete) {
        braid_shm_cell_t *cell;
        size_t            chunk = op->len - op->done;
        int               first = op->done == 0;

        if (!ring_has_room(out)) {
            break;
        }
        if (chunk > BRAID_SHM_CELL_PAYLOAD) {
            chunk = BRAID_SHM_CELL_PAYLOAD;
        }
        cell          = &out->ring->cells[out->produced & RING_MASK];
        cell->tag     = op->tag;
        cell->msg_len = op->len;
        cell->len     = (uint32_t)chunk;
        cell->first   = (uint32_t)first;
        if (chunk != 0) {
            svc->copy(cell->payload, op->sbuf + op->done, chunk, 0);
        }
        out->produced++;
        __atomic_store_n(&cell->seq, out->produced, __ATOMIC_RELEASE);
        op->done += chunk;
        moved++;
        if (op->done == op->len) {
            op->complete = 1;
            op->status   = BRAID_OK;
        }
    }
    return moved;
}

braid_shm_cell_t *braid_shm_ring_peek(braid_shm_in_t *in)
{
    braid_shm_cell_t *cell = &in->ring->cells[in->consumed & RING_MASK];

    if (__atomic_load_n(&cell->seq, __ATOMIC_ACQUIRE) != in->consumed + 1) {
        return NULL;
    }
    return cell;
}

void braid_shm_ring_pop(braid_shm_in_t *in)
{
    in->consumed++;
    __atomic_store_n(&in->ring->tail, in->consumed, __ATOMIC_RELEASE);
}
