/* The schedule of allreduce "rabenseifner" (allreduce_rabenseifner.c): its
 * phases, a pure function of (n, rank, count), kept apart so that the unit
 * tests check it without a transport. */
#ifndef BRAID_P2P_RABENSEIFNER_H
#define BRAID_P2P_RABENSEIFNER_H

#include <stddef.h>

#include "algo_common.h"

/* Segment of the pipelined exchanges: small enough that the reduction of
 * one overlaps the transfer of the next, large enough that a message's
 * fixed cost is small against it (docs/performance.md, "rabenseifner
 * segment sweep"). */
#ifndef BRAID_P2P_RAB_SEG_BYTES
#define BRAID_P2P_RAB_SEG_BYTES ((size_t)128 << 10)
#endif
/* allreduce "halving" (allreduce_halving.c) carries every rank's input
 * unreduced through the halving steps, (n/p)·m/2 bytes a step and as
 * much scratch: a latency algorithm, capped where oneshot is. */
#define BRAID_P2P_HALVING_MAX_BYTES ((size_t)4 << 20)
/* Segments in flight each way within a phase. */
#define BRAID_P2P_RAB_WINDOW 4
/* Phases: fold-in, log2(p) halvings, log2(p) doublings, fold-out. */
#define BRAID_P2P_RAB_MAX_PHASES 66

typedef struct braid_p2p_rab_phase {
    int    id;        /* the same on both ends: tags are id·maxseg + seg */
    int    send_peer; /* -1: sends nothing */
    size_t send_lo, send_len; /* elements of the buffer */
    int    recv_peer;         /* -1: receives nothing */
    size_t recv_lo, recv_len;
    int    reduce;          /* received data is combined into recvbuf (else it
                               lands there) */
    int mine_lower;         /* reduce: this rank's data is the lower operand */
    int from_send;          /* sends and this rank's operand read sendbuf (no
                               partial result in recvbuf yet) */
    size_t avg_lo, avg_len; /* after the phase: finish_avg over this range
                               (the block this rank reduced last) */
} braid_p2p_rab_phase_t;

typedef struct braid_p2p_rab_plan {
    int                   nphases;
    int                   maxseg; /* segments a phase may have (tag space) */
    size_t                seg;    /* elements per segment */
    braid_p2p_rab_phase_t ph[BRAID_P2P_RAB_MAX_PHASES];
} braid_p2p_rab_plan_t;

/* The phases of rank `rank` of n for count elements of dts bytes.  With
 * p = the largest power of two <= n and rem = n - p: an even rank below
 * 2·rem hands its input to the next rank and gets the result back (2
 * phases); the p others reduce-scatter by recursive halving over p blocks
 * (block v of virtual rank v) and allgather by recursive doubling, the odd
 * ranks below 2·rem with a fold-in before and a fold-out after.  Returns
 * -1 when n is too large for the tag space. */
int braid_p2p_rab_plan(braid_p2p_rab_plan_t *plan, int n, int rank,
                       size_t count, size_t dts, size_t seg_bytes);

/* Virtual ranks (the plan above): with rem = n - p, rank r below 2·rem
 * is virtual rank r/2 when odd and -1 (folded into r + 1) when even; the
 * others are r - rem.  real_rank is the inverse for v >= 0. */
static inline int braid_p2p_rab_vrank(int rank, int rem)
{
    return rank < 2 * rem ? (rank % 2 ? rank / 2 : -1) : rank - rem;
}
static inline int braid_p2p_rab_real_rank(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

/* Whether halving's tags, phase id·n + rank, fit a call's steps. */
static inline int braid_p2p_halving_tags_fit(int n)
{
    int steps = braid_p2p_log2_ceil(braid_p2p_pow2_floor(n));
    return (long)(2 * steps + 2) * n <= BRAID_P2P_MAX_STEPS;
}

/* Segments of a range of len elements. */
static inline size_t braid_p2p_rab_nseg(const braid_p2p_rab_plan_t *plan,
                                        size_t                      len)
{
    return len / plan->seg + (len % plan->seg != 0);
}

#endif
