/* The schedule of allreduce "rabenseifner": which ranges go to and come
 * from whom in each phase (rabenseifner.h).  Pure arithmetic: the unit
 * tests (tests/unit/p2p) run it for every rank count and check that every
 * send meets its receive and every element is reduced once per rank, in
 * rank-consistent order. */
#include <string.h>

#include "rabenseifner.h"

int braid_p2p_rab_plan(braid_p2p_rab_plan_t *plan, int n, int rank,
                       size_t count, size_t dts, size_t seg_bytes)
{
    int p = braid_p2p_pow2_floor(n), rem = n - p;
    int steps  = braid_p2p_log2_ceil(p);
    int ids    = 2 * steps + 2;
    int folded = rank < 2 * rem;
    int v      = braid_p2p_rab_vrank(rank, rem);

    memset(plan, 0, sizeof(*plan));
    if (ids > BRAID_P2P_RAB_MAX_PHASES)
        return -1;
    plan->maxseg = (int)(BRAID_P2P_MAX_STEPS / ids);
    plan->seg    = seg_bytes / (dts ? dts : 1);
    if (plan->seg == 0)
        plan->seg = 1;
    if (count / plan->seg >= (size_t)plan->maxseg)
        plan->seg = count / (size_t)plan->maxseg + 1;
    if (n == 1 || count == 0)
        return 0;

    braid_p2p_rab_phase_t *ph = plan->ph;
    int                    k  = 0;
    if (v < 0) { /* even rank folded into rank + 1 */
        ph[k++]       = (braid_p2p_rab_phase_t){.id        = 0,
                                                .send_peer = rank + 1,
                                                .send_len  = count,
                                                .recv_peer = -1,
                                                .from_send = 1};
        ph[k++]       = (braid_p2p_rab_phase_t){.id        = ids - 1,
                                                .send_peer = -1,
                                                .recv_peer = rank + 1,
                                                .recv_len  = count};
        plan->nphases = k;
        return 0;
    }
    int have = 0; /* a partial result is in recvbuf */
    if (folded) {
        ph[k++] = (braid_p2p_rab_phase_t){.id         = 0,
                                          .send_peer  = -1,
                                          .recv_peer  = rank - 1,
                                          .recv_len   = count,
                                          .reduce     = 1,
                                          .mine_lower = 0,
                                          .from_send  = 1};
        have    = 1;
    }
    /* Halving over the window [lo, hi) of virtual ranks. */
    int lo = 0, hi = p;
    for (int s = 0; s < steps; s++) {
        int    mask = p >> (s + 1), pv = v ^ mask, mid = lo + mask;
        int    peer = braid_p2p_rab_real_rank(pv, rem);
        int    klo = v < mid ? lo : mid, khi = v < mid ? mid : hi;
        int    slo = v < mid ? mid : lo, shi = v < mid ? hi : mid;
        size_t kb = braid_chunk_off(count, p, klo);
        size_t ke = braid_chunk_off(count, p, khi);
        size_t sb = braid_chunk_off(count, p, slo);
        size_t se = braid_chunk_off(count, p, shi);
        ph[k++]   = (braid_p2p_rab_phase_t){.id         = 1 + s,
                                            .send_peer  = peer,
                                            .send_lo    = sb,
                                            .send_len   = se - sb,
                                            .recv_peer  = peer,
                                            .recv_lo    = kb,
                                            .recv_len   = ke - kb,
                                            .reduce     = 1,
                                            .mine_lower = v < pv,
                                            .from_send  = !have};
        have      = 1;
        lo = klo, hi = khi;
    }
    ph[k - 1].avg_lo  = braid_chunk_off(count, p, v);
    ph[k - 1].avg_len = braid_chunk_len(count, p, v);
    /* Doubling: the owned window grows from block v to all p. */
    for (int s = 0; s < steps; s++) {
        int    mask = 1 << s, pv = v ^ mask;
        int    peer = braid_p2p_rab_real_rank(pv, rem);
        int    mlo = v & ~(mask - 1), plo = pv & ~(mask - 1);
        size_t mb = braid_chunk_off(count, p, mlo);
        size_t me = braid_chunk_off(count, p, mlo + mask);
        size_t pb = braid_chunk_off(count, p, plo);
        size_t pe = braid_chunk_off(count, p, plo + mask);
        ph[k++]   = (braid_p2p_rab_phase_t){.id        = 1 + steps + s,
                                            .send_peer = peer,
                                            .send_lo   = mb,
                                            .send_len  = me - mb,
                                            .recv_peer = peer,
                                            .recv_lo   = pb,
                                            .recv_len  = pe - pb};
    }
    if (folded)
        ph[k++] = (braid_p2p_rab_phase_t){.id        = ids - 1,
                                          .send_peer = rank - 1,
                                          .send_len  = count,
                                          .recv_peer = -1};
    plan->nphases = k;
    return 0;
}
