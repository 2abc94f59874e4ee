/* The signature of a collective call, and where each rank records the calls
 * it has entered and completed (internal).
 *
 * A call's signature is what every rank must agree on: collective, count,
 * dtype, op and root, plus its number on the communicator.  BRAID_CHECK
 * compares it before every call; the failure inquiry (comm/inquiry.c)
 * compares the recorded ones after a call has failed or timed out; and
 * braid_sig_hash32 is the compact form meant for algorithms to carry in
 * their headers and flags (docs/architecture.md, "Mismatched calls"). */
#ifndef BRAID_CORE_SIG_H
#define BRAID_CORE_SIG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

/* Fields a collective ignores are 0, so that they cause no false alarm. */
typedef struct braid_sig {
    uint64_t count;
    int32_t  root;
    uint8_t  coll, dtype, op, pad;
} braid_sig_t;

static inline braid_sig_t braid_sig_make(braid_coll_t coll, size_t count,
                                         braid_dtype_t dtype, braid_op_t op,
                                         int root)
{
    braid_sig_t s = {0};
    s.coll        = (uint8_t)coll;
    s.count       = count;
    s.dtype       = coll == BRAID_COLL_BARRIER ? 0 : (uint8_t)dtype;
    s.op   = coll == BRAID_COLL_ALLREDUCE || coll == BRAID_COLL_REDUCE_SCATTER
                 ? (uint8_t)op
                 : 0;
    s.root = coll == BRAID_COLL_BROADCAST ? root : 0;
    return s;
}
/* One word, and back: what the progress record keeps besides the count. */
static inline uint64_t braid_sig_pack(const braid_sig_t *s)
{
    return (uint64_t)s->coll | (uint64_t)s->dtype << 8 |
           (uint64_t)s->op << 16 | (uint64_t)(uint32_t)s->root << 32;
}
braid_sig_t braid_sig_unpack(uint64_t count, uint64_t packed);
int         braid_sig_equal(const braid_sig_t *a, const braid_sig_t *b);
/* "allreduce(count 16384, f32, sum)", "broadcast(count 4, u8, root 2)". */
void braid_sig_describe(char *buf, size_t len, const braid_sig_t *s);
/* 32 bits of the signature and call number, for algorithms to carry in a
 * header or flag they send anyway.  A few multiplies: cheap enough for
 * every call.  Each of the three words goes through a bijection before
 * they are combined and mixed, so calls that differ in one of count,
 * (collective, dtype, op, root) or number always differ in the 64-bit mix;
 * folding it to 32 bits leaves a 2^-32 chance of a collision. */
static inline uint32_t braid_sig_hash32(const braid_sig_t *s, uint64_t seq)
{
    uint64_t h = s->count * 0x9e3779b97f4a7c15ull ^
                 braid_sig_pack(s) * 0xc2b2ae3d27d4eb4full ^
                 seq * 0x165667b19e3779f9ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* ------------------------------------------------------------- progress */

/* Calls remembered per rank: a rank runs at most a few calls ahead of a
 * stuck one (each call needs every rank), so 8 cover the call a failure
 * is about. */
#define BRAID_HIST 8

typedef struct braid_hist {
    _Atomic uint64_t seq1; /* call number + 1; 0: empty */
    _Atomic uint64_t count;
    _Atomic uint64_t packed;
} braid_hist_t;

/* One rank's record, written by that rank only: in the host's shared board
 * when there is one (comm/board.c), so that the ranks of its host can read
 * it when this one is stuck, and in private memory otherwise.  Stores are
 * relaxed: readers look only after a failure, and check seq1 around their
 * reads of an entry. */
typedef struct braid_progress {
    /* Cache-line aligned (256 bytes a slot): ranks write only their own. */
    _Alignas(64) _Atomic uint64_t entered; /* calls issued: last number + 1 */
    _Atomic uint64_t completed; /* calls completed (they complete in order) */
    _Atomic int64_t  pid;
    _Atomic uint64_t failed; /* 1 once a call failed here: final */
    braid_hist_t     hist[BRAID_HIST];
} braid_progress_t;

/* A consistent copy of a record, or of what is left of one. */
typedef struct braid_hist_snap {
    uint64_t seq1, count, packed;
} braid_hist_snap_t;

typedef struct braid_progress_snap {
    uint64_t          entered, completed;
    int64_t           pid;
    uint64_t          failed;
    braid_hist_snap_t hist[BRAID_HIST];
} braid_progress_snap_t;

/* The recording, inlined into the call path: a few stores per call. */
static inline void braid_progress_enter(braid_progress_t *p, uint64_t seq,
                                        const braid_sig_t *s)
{
    braid_hist_t *h = &p->hist[seq & (BRAID_HIST - 1)];
    atomic_store_explicit(&h->seq1, 0, memory_order_relaxed);
    atomic_store_explicit(&h->count, s->count, memory_order_relaxed);
    atomic_store_explicit(&h->packed, braid_sig_pack(s), memory_order_relaxed);
    atomic_store_explicit(&h->seq1, seq + 1, memory_order_release);
    atomic_store_explicit(&p->entered, seq + 1, memory_order_relaxed);
}

static inline void braid_progress_done(braid_progress_t *p, uint64_t seq)
{
    atomic_store_explicit(&p->completed, seq + 1, memory_order_relaxed);
}

void braid_progress_read(braid_progress_snap_t *out, braid_progress_t *p);
/* The signature the snapshot holds for call seq; 0 when it has none. */
int braid_progress_sig(braid_sig_t *out, const braid_progress_snap_t *p,
                       uint64_t seq);

#endif
