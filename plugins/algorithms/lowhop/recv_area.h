/* The receive area of the lowhop algorithms: its layout and flag protocol.
 *
 * Every (communicator, candidate) owns one registered area per rank, the
 * core's (svc->area_get: made and grown by the transport's collective
 * mem_alloc); its layout lives in *task->comm_state.  Peers write into it
 * with put_signal; the owner only reads it.
 *
 * Layout of one rank's area: 2 banks x (n-1) slots, one slot per peer
 * (braid_lowhop_slot_index), each slot `stride` bytes, a multiple of a cache
 * line:
 *
 *     area:  | bank 0: slot 0 | slot 1 | ... | slot n-2 | bank 1: slot 0 | ...
 *     slot:  | flag (u64) | data (slot_bytes) | pad to 64 |
 *
 * The flag comes first and the data right after it, so a message of up to
 * 56 bytes shares the flag's cache line: the reader pulls one line instead of
 * two.  The transport writes the data and then the flag, ordered; the owner
 * polls the flag with an acquire load and, once it holds this call's value,
 * may read the data.
 *
 * Flag values.  A call writes braid_lowhop_flag(task): its low half is the
 * call's number (seq, 31 bits, with the top bit set so that the value is
 * never 0 and the zero-filled area never looks written), its high half the
 * call's signature bits (task->sig32).  The owner waits for exact equality,
 * so a flag left over from an older call never passes for this one.  A flag
 * with this call's number but other signature bits comes from a peer that
 * called something else in this call (another collective, count, dtype, op
 * or root): braid_lowhop_arrived says so, and the call fails with
 * BRAID_ERR_MISMATCH instead of reading data laid out for another call.
 * (An older call's flag is told apart by its number, unless that is
 * exactly a multiple of 2^31 calls older.)  There is no barrier
 * per call: the reuse rules below follow from data dependencies alone.
 *
 * Banks.  The one-stage algorithms (oneshot, allgather and reduce_scatter
 * "direct") use bank c % 2 in the c-th call of this (communicator,
 * candidate); the counter lives in the area, so every rank has the same one.
 * (Not task->seq % 2: calls that go to other candidates interleave, so two
 * consecutive calls of this candidate may have seq of equal parity.)  Two
 * banks suffice: peer F writes S's bank b in call c and next in call c+2.
 * F can start call c+2 only after completing call c+1, which needs S's data
 * of call c+1, which S sends only once it started call c+1, i.e. after it
 * finished reading bank b for call c.  One bank would not do: F completes
 * call c as soon as it has everyone's data and may write call c+1 into S
 * while S is still reducing call c.  twoshot uses bank 0 for its
 * reduce-scatter stage and bank 1 for its allgather stage; twoshot.c argues
 * why one buffer per stage suffices there.
 *
 * Growth.  A call needing a larger slot than the area has replaces the area
 * in start(), before it writes anything, through svc->area_get.  It is
 * collective and safe there: all ranks make the same calls with the same
 * sizes and the same history, so they all grow at the same call; a rank
 * completes a call only after it saw the flag of every write addressed to
 * it in that call (every algorithm here waits for all the data sent to it),
 * so when it starts the next call nothing is in flight into its old area,
 * and no peer writes to the old area again (a peer writes this call into
 * the new one, which exists only once the collective mem_alloc has
 * returned).  The core frees the old area after the new one exists
 * (core/algo/area.c says why). */
#ifndef BRAID_LOWHOP_RECV_AREA_H
#define BRAID_LOWHOP_RECV_AREA_H

#include <stddef.h>
#include <stdint.h>

#include <braid/plugin.h>

#define BRAID_LOWHOP_LINE       64
#define BRAID_LOWHOP_FLAG_BYTES 8
/* Smallest slot: one allocation serves the small calls of decode steps. */
#define BRAID_LOWHOP_MIN_SLOT ((size_t)4096 - BRAID_LOWHOP_FLAG_BYTES)

typedef struct braid_lowhop_area {
    braid_rmem_t  *mem;        /* the core's area; NULL until the first call */
    unsigned char *base;       /* mem->local */
    int            nslots;     /* per bank: n - 1 */
    size_t         slot_bytes; /* data a slot holds */
    size_t         stride;     /* slot to slot: flag + data, whole lines */
    uint64_t       calls;      /* calls run on this area (bank selection) */
    /* [nslots]: 1 where the slot's writer is pinned to this rank's CPU
     * (topo->mates), so that it runs only when this rank does not; nmates
     * of them, or -1 when this rank is not pinned (who shares its CPU is
     * then unknown, and no hint is given). */
    unsigned char *mate;
    int            nmates;
} braid_lowhop_area_t;

/* The area of this (communicator, candidate), created on first use and
 * grown (collectively) so that a slot holds need bytes; limit is the largest
 * need the algorithm can ever have (growth rounds up to a power of two but
 * not past it). */
braid_status_t braid_lowhop_area_get_slow(braid_lowhop_area_t **area,
                                          braid_task_t *task, size_t need,
                                          size_t limit);
static inline braid_status_t braid_lowhop_area_get(braid_lowhop_area_t **area,
                                                   braid_task_t         *task,
                                                   size_t need, size_t limit)
{
    braid_lowhop_area_t *a = *task->comm_state;
    /* Every call but the first few of a communicator: nothing to create or
     * grow, and no call out of the plugin before its first put. */
    if (a != NULL && a->mem != NULL && a->slot_bytes >= need &&
        a->nslots == task->size - 1) {
        *area = a;
        return BRAID_OK;
    }
    return braid_lowhop_area_get_slow(area, task, need, limit);
}
/* comm_state_free of every lowhop algorithm (the core frees the area). */
void braid_lowhop_area_free(void *state, braid_tl_t *tl);

/* Slot that rank src writes in rank dst's area (n - 1 slots, none for dst
 * itself). */
static inline int braid_lowhop_slot_index(int src, int dst, int n)
{
    int s = src - dst - 1; /* in [-n, n - 2]: no division on the hot path */
    return s < 0 ? s + n : s;
}

/* The rank that writes slot `slot` of rank dst's area. */
static inline int braid_lowhop_slot_source(int slot, int dst, int n)
{
    int r = dst + 1 + slot; /* in [1, 2n - 2] */
    return r >= n ? r - n : r;
}

static inline size_t braid_lowhop_slot_off(const braid_lowhop_area_t *a,
                                           int bank, int slot)
{
    return ((size_t)bank * (size_t)a->nslots + (size_t)slot) * a->stride;
}

/* This rank's copy of the data rank src put into slot (bank, src). */
static inline const void *braid_lowhop_slot_data(const braid_lowhop_area_t *a,
                                                 int bank, int slot)
{
    return a->base + braid_lowhop_slot_off(a, bank, slot) +
           BRAID_LOWHOP_FLAG_BYTES;
}

/* The flag value of this call: its number and signature bits (above);
 * never 0. */
static inline uint64_t braid_lowhop_flag(const braid_task_t *task)
{
    return (uint64_t)braid_task_sig32(task) << 32 | 0x80000000u |
           (uint32_t)(task->seq & 0x7fffffffu);
}

/* 1 once slot (bank, slot) of this rank's area carries flag: the data of
 * the slot may be read after that (acquire).  0 while it holds an older
 * call's flag, or none.  -1 when its writer is in this call number with
 * another signature (braid_lowhop_mismatch says so). */
static inline int braid_lowhop_arrived(const braid_lowhop_area_t *a, int bank,
                                       int slot, uint64_t flag)
{
    const uint64_t *p =
        (const uint64_t *)(const void *)(a->base +
                                         braid_lowhop_slot_off(a, bank, slot));
    uint64_t f = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    if (f == flag)
        return 1;
    return (uint32_t)(f ^ flag) == 0 ? -1 : 0;
}

/* mismatch.c: the error of a call whose slot (bank, slot) holds a flag of
 * this call's number with other signature bits. */
braid_status_t braid_lowhop_mismatch(const braid_task_t        *task,
                                     const braid_lowhop_area_t *a, int bank,
                                     int slot, uint64_t flag);

/* Writes len bytes of src into this rank's slot of bank in peer's area, then
 * the flag; src must stay unchanged until req completes.  Inline: it is on
 * the path from a call's entry to its first byte leaving. */
static inline braid_status_t braid_lowhop_put(braid_task_t        *task,
                                              braid_lowhop_area_t *a, int peer,
                                              int bank, const void *src,
                                              size_t len, uint64_t flag,
                                              braid_treq_t *req)
{
    const braid_tl_t *tl = task->tl;
    int    slot = braid_lowhop_slot_index(task->rank, peer, task->size);
    size_t off  = braid_lowhop_slot_off(a, bank, slot);

    /* A failing transport has already said what and why (svc->error);
     * re-raising here would replace its message with a vaguer one. */
    return tl->ops->put_signal(tl->tcomm, a->mem, peer,
                               off + BRAID_LOWHOP_FLAG_BYTES, src, len, off,
                               flag, req);
}

/* One round of transport progress, so that puts aimed at this rank land
 * (UCX over TCP needs the target to progress). */
braid_status_t braid_lowhop_tl_progress(braid_task_t *task);

/* mate[k] = 1 when the writer of slot k of this rank's area is pinned to
 * the same CPU of the same host (k < n - 1), from the core's topo->mates;
 * returns how many, or -1 (and no mates) when this rank is not pinned or
 * the core does not say. */
int braid_lowhop_slot_mates(unsigned char *mate, const braid_task_t *task);
/* 1 when got[k] is set for every slot k written by a CPU mate (a->mate):
 * what a call that still waits has left to come from other CPUs only.
 * 0 when this rank is not pinned. */
int braid_lowhop_mates_in(const braid_lowhop_area_t *a,
                          const unsigned char *got, int n);

/* copy.c: whether a call should copy blocks of `block` bytes out of its
 * area with streaming stores (a large message on a shared CPU): the
 * stream argument of svc->copy. */
int braid_lowhop_stream_ok(const braid_task_t        *task,
                           const braid_lowhop_area_t *a, size_t block);

#endif
