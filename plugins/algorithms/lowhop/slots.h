/* The receive area of the lowhop algorithms and its flag protocol.
 *
 * Every (communicator, candidate) owns one registered area per rank, made by
 * the transport's collective mem_alloc and kept in *task->comm_state.  Peers
 * write into it with put_signal; the owner only reads it.
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
 * in start(), before it writes anything.  It is collective and safe there:
 * all ranks make the same calls with the same sizes and the same history, so
 * they all grow at the same call; a rank completes a call only after it saw
 * the flag of every write addressed to it in that call (every algorithm here
 * waits for all the data sent to it), so when it starts the next call nothing
 * is in flight into its old area, and no peer writes to the old area again
 * (a peer writes this call into the new one, which exists only once the
 * collective mem_alloc has returned).  The old area is freed only after the
 * new one exists: mem_free may wait on the peers (roce waits for its puts'
 * signals, which need the targets' receives), and a peer that grew first is
 * blocked in the collective mem_alloc without progressing, so freeing first
 * could stall both until the timeout.  Peak memory is old + new area. */
#ifndef BRAID_LOWHOP_SLOTS_H
#define BRAID_LOWHOP_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include <braid/plugin.h>

#define BRAID_LOWHOP_LINE       64
#define BRAID_LOWHOP_FLAG_BYTES 8
/* Smallest slot: one allocation serves the small calls of decode steps. */
#define BRAID_LOWHOP_MIN_SLOT   ((size_t)4096 - BRAID_LOWHOP_FLAG_BYTES)

typedef struct braid_lowhop_area {
    braid_rmem_t mem;        /* mem.local is NULL until the first call */
    int          nslots;     /* per bank: n - 1 */
    size_t       slot_bytes; /* data a slot holds */
    size_t       stride;     /* slot to slot: flag + data, whole lines */
    uint64_t     calls;      /* calls run on this area (bank selection) */
    /* The per-call state of the last call, kept for the next: a decode
     * step's all-reduce is a few hundred instructions, and malloc + free
     * were a fifth of them.  One call at a time runs on a (communicator,
     * candidate), so one spare is all it takes. */
    void        *spare;
    size_t       spare_size, priv_size;
    /* [nslots]: 1 where the slot's writer is pinned to this rank's CPU
     * (svc->cpu_mates), so that it runs only when this rank does not;
     * nmates of them, or -1 when this rank is not pinned (who shares its
     * CPU is then unknown, and no hint is given). */
    unsigned char *mate;
    int            nmates;
} braid_lowhop_area_t;

/* The area of this (communicator, candidate), created on first use and
 * grown (collectively) so that a slot holds need bytes; limit is the largest
 * need the algorithm can ever have (growth rounds up to a power of two but
 * not past it). */
braid_status_t braid_lowhop_area_get(braid_lowhop_area_t **area,
                                     braid_task_t *task, size_t need,
                                     size_t limit);
/* comm_state_free of every lowhop algorithm. */
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
    return (const char *)a->mem.local + braid_lowhop_slot_off(a, bank, slot) +
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
    const uint64_t *p = (const uint64_t *)(const void *)((const char *)
        a->mem.local + braid_lowhop_slot_off(a, bank, slot));
    uint64_t f = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    if (f == flag)
        return 1;
    return (uint32_t)(f ^ flag) == 0 ? -1 : 0;
}

/* mismatch.c: the error of a call whose slot (bank, slot) holds a flag of
 * this call's number with other signature bits. */
braid_status_t braid_lowhop_mismatch(const braid_task_t *task,
                                     const braid_lowhop_area_t *a, int bank,
                                     int slot, uint64_t flag);

/* Writes len bytes of src into this rank's slot of bank in peer's area, then
 * the flag; src must stay unchanged until req completes. */
braid_status_t braid_lowhop_put(braid_task_t *task, braid_lowhop_area_t *a,
                                int peer, int bank, const void *src,
                                size_t len, uint64_t flag, braid_treq_t *req);

/* Tests every active request: BRAID_OK when none is left active,
 * BRAID_INPROGRESS, or the first error.  *ndone counts the inactive ones. */
braid_status_t braid_lowhop_reqs_test(braid_task_t *task, braid_treq_t *reqs,
                                      int n, int *ndone);

/* Withdraws every request still active (finish after an error): once it
 * returns the transport no longer reads the requests' sources, so the
 * caller's buffers may go back to it. */
void braid_lowhop_reqs_cancel(braid_task_t *task, braid_treq_t *reqs, int n);

/* One round of transport progress, so that puts aimed at this rank land
 * (UCX over TCP needs the target to progress). */
braid_status_t braid_lowhop_tl_progress(braid_task_t *task);

/* Zeroed task->priv of size bytes. */
braid_status_t braid_lowhop_priv_alloc(braid_task_t *task, size_t size);
/* The result of a reduction with nothing to exchange (one rank): its own
 * buffer, copied unless in place; avg over one rank divides by 1. */
braid_status_t braid_lowhop_local_result(braid_task_t *task);
/* Frees task->priv: the finish() of every lowhop algorithm. */
void braid_lowhop_priv_free(braid_task_t *task);

/* One stage of direct writes followed by a fold in rank order: the state
 * shared by oneshot (whole buffer to every peer) and reduce_scatter direct
 * (block j to rank j). */
typedef struct braid_lowhop_xchg {
    braid_lowhop_area_t *area;   /* NULL: nothing to exchange (n 1, len 0) */
    uint64_t             flag;
    int                  bank;
    int                  posted; /* the puts are out */
    int                  nseen;  /* peers whose data arrived */
    int                  reduced;
    int                  sent;   /* every put completed */
    int                  mates_left; /* writers on this CPU not seen yet
                                        (-1: not pinned, never 0) */
    int                  odd;    /* the slot whose writer called something
                                    else (xchg_arrived -1) */
    braid_treq_t        *reqs;   /* [n-1]: reqs[i-1] to rank+i */
    unsigned char       *seen;   /* [n-1], by slot */
    const void         **src;    /* [n]: contributions in rank order */
} braid_lowhop_xchg_t;

/* Refuses len above cap (what names the algorithm), allocates task->priv as
 * a braid_lowhop_xchg_t and, when there is something to exchange, gets the
 * area (growing it collectively) and picks this call's bank and flag.  On
 * error task->priv stays for finish(), which the core calls after a failed
 * start too. */
braid_status_t braid_lowhop_xchg_start(braid_task_t *task, size_t len,
                                       size_t cap, const char *what);
/* Puts len bytes to every peer j (src + j·stride; stride 0: the same bytes
 * to all) into this rank's slot of the call's bank, with the call's flag;
 * marks x posted. */
braid_status_t braid_lowhop_xchg_post(braid_task_t *task,
                                      braid_lowhop_xchg_t *x, const void *src,
                                      size_t len, size_t stride);
/* The transport side of one poll of an exchange: posts the puts the first
 * time (as braid_lowhop_xchg_post), drives the transport, and sets x->sent
 * once every put has completed.  BRAID_OK, or the transport's error. */
braid_status_t braid_lowhop_xchg_drive(braid_task_t *task,
                                       braid_lowhop_xchg_t *x,
                                       const void *src, size_t len,
                                       size_t stride);
/* 1 when every peer pinned to this rank's CPU has delivered this call's
 * data (vacuously with no such peer); 0 when this rank is not pinned. */
int braid_lowhop_xchg_mates_in(const braid_task_t *task,
                               const braid_lowhop_xchg_t *x);
/* The end of a one-stage start(): posts the puts (as xchg_post) and sets
 * *wait to BRAID_WAIT_REMOTE when xchg_mates_in -- the peers on this CPU
 * entered the call first, which the core's waiting policy uses (wait.c: a
 * lone call then yields to them once before its first progress).  Nothing
 * to exchange: nothing to do. */
braid_status_t braid_lowhop_xchg_open(braid_task_t *task,
                                      braid_lowhop_xchg_t *x, const void *src,
                                      size_t len, size_t stride,
                                      braid_wait_t *wait);
/* Looks at the flags not seen yet; 1 once all n-1 peers' data arrived.
 * Until then it sets *wait to BRAID_WAIT_REMOTE once every peer pinned to
 * this rank's CPU has delivered.  -1 when a peer is in this call with
 * another signature (x->odd: its slot; braid_lowhop_mismatch). */
int braid_lowhop_xchg_arrived(braid_task_t *task, braid_lowhop_xchg_t *x,
                              braid_wait_t *wait);
/* mate[k] = 1 when the writer of slot k of this rank's area is pinned to
 * the same CPU of the same host (k < n - 1), from svc->cpu_mates; returns
 * how many, or -1 (and no mates) when this rank is not pinned or there is
 * no topology. */
int braid_lowhop_slot_mates(unsigned char *mate, const braid_task_t *task);
/* copy.c: whether a call should copy blocks of `block` bytes out of its
 * area with streaming stores (a large message on a shared CPU), and the
 * copy itself (stream 0: memcpy). */
int  braid_lowhop_stream_ok(const braid_task_t *task,
                            const braid_lowhop_area_t *a, size_t block);
void braid_lowhop_copy_out(void *dst, const void *src, size_t n, int stream);

/* 1 when got[k] is set for every slot k written by a CPU mate (a->mate):
 * what a call that still waits has left to come from other CPUs only.
 * 0 when this rank is not pinned. */
int braid_lowhop_mates_in(const braid_lowhop_area_t *a,
                          const unsigned char *got, int n);
/* finish() of the algorithms built on braid_lowhop_xchg_t: cancels the puts
 * an error left active, then frees task->priv. */
void braid_lowhop_xchg_finish(braid_task_t *task);

#endif
