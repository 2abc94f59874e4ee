/* The schedule of allreduce "rabenseifner", run symbolically for every
 * rank count and several sizes: every send meets a receive of the same
 * phase, peer and range; every element ends up combined from every rank
 * exactly once on every rank; and every rank ends with the same
 * expression (the same tree of lower op higher), so the results are
 * bitwise identical.  A partial result is a bitmask of ranks and a hash
 * of its expression, in which a op b differs from b op a. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rabenseifner.h"
#include "tests/unit/check.h"

typedef struct part {
    uint32_t set;
    uint64_t expr;
} part_t;

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t x = a * UINT64_C(0x9e3779b97f4a7c15) ^ (b + UINT64_C(0x632be5ab));
    x ^= x >> 29;
    return x * UINT64_C(0xbf58476d1ce4e5b9);
}

static int plan_phase(const braid_p2p_rab_plan_t *pl, int id)
{
    for (int i = 0; i < pl->nphases; i++)
        if (pl->ph[i].id == id)
            return i;
    return -1;
}

static void run(int n, size_t count, size_t seg_bytes)
{
    braid_p2p_rab_plan_t *pl    = calloc((size_t)n, sizeof(*pl));
    part_t              **buf   = calloc((size_t)n, sizeof(part_t *));
    part_t              **send  = calloc((size_t)n, sizeof(part_t *));
    int                   maxid = 0;
    for (int r = 0; r < n; r++) {
        CHECK(braid_p2p_rab_plan(&pl[r], n, r, count, 4, seg_bytes) == 0,
              "n %d: plan refused", n);
        buf[r]  = calloc(count ? count : 1, sizeof(part_t));
        send[r] = calloc(count ? count : 1, sizeof(part_t));
        for (size_t i = 0; i < count; i++)
            send[r][i] = (part_t){1u << r, (uint64_t)r + 1};
        for (int i = 0; i < pl[r].nphases; i++)
            if (pl[r].ph[i].id > maxid)
                maxid = pl[r].ph[i].id;
        if (n == 1 || count == 0)
            CHECK(pl[r].nphases == 0, "n %d count %zu: %d phases", n, count,
                  pl[r].nphases);
        /* Tags stay within BRAID_TAG's 16 bits. */
        for (int i = 0; i < pl[r].nphases; i++) {
            const braid_p2p_rab_phase_t *ph = &pl[r].ph[i];
            size_t                       len =
                ph->send_len > ph->recv_len ? ph->send_len : ph->recv_len;
            CHECK(braid_p2p_rab_nseg(&pl[r], len) <= (size_t)pl[r].maxseg &&
                      (long)(ph->id + 1) * pl[r].maxseg <= BRAID_P2P_MAX_STEPS,
                  "n %d rank %d phase %d: tags overflow", n, r, ph->id);
        }
    }
    /* Phases in id order; within one id, all sends read the state before
     * any receive of that id lands (the exchanges are simultaneous). */
    part_t **out         = calloc((size_t)n, sizeof(part_t *));
    int      bad_overlap = 0;
    for (int r = 0; r < n; r++)
        out[r] = calloc(count ? count : 1, sizeof(part_t));
    for (int id = 0; id <= maxid; id++) {
        for (int r = 0; r < n; r++) {
            int i = plan_phase(&pl[r], id);
            if (i < 0 || pl[r].ph[i].send_peer < 0)
                continue;
            const braid_p2p_rab_phase_t *ph = &pl[r].ph[i];
            int q = ph->send_peer, k = plan_phase(&pl[q], id);
            CHECK(k >= 0 && pl[q].ph[k].recv_peer == r &&
                      pl[q].ph[k].recv_lo == ph->send_lo &&
                      pl[q].ph[k].recv_len == ph->send_len,
                  "n %d count %zu: rank %d's send of phase %d has no "
                  "matching receive on rank %d",
                  n, count, r, id, q);
            const part_t *src = ph->from_send ? send[r] : buf[r];
            memcpy(out[r] + ph->send_lo, src + ph->send_lo,
                   ph->send_len * sizeof(part_t));
        }
        for (int r = 0; r < n; r++) {
            int i = plan_phase(&pl[r], id);
            if (i < 0 || pl[r].ph[i].recv_peer < 0)
                continue;
            const braid_p2p_rab_phase_t *ph = &pl[r].ph[i];
            int                          q  = ph->recv_peer;
            for (size_t e = ph->recv_lo; e < ph->recv_lo + ph->recv_len; e++) {
                part_t theirs = out[q][e];
                if (!ph->reduce) {
                    buf[r][e] = theirs;
                    continue;
                }
                part_t mine = ph->from_send ? send[r][e] : buf[r][e];
                part_t lo   = ph->mine_lower ? mine : theirs;
                part_t hi   = ph->mine_lower ? theirs : mine;
                if ((lo.set & hi.set) != 0 && bad_overlap++ < 5)
                    CHECK(0,
                          "n %d: element %zu reduced twice from one "
                          "rank (phase %d, rank %d)",
                          n, e, id, r);
                buf[r][e] = (part_t){lo.set | hi.set, mix(lo.expr, hi.expr)};
            }
        }
    }
    uint32_t all = n >= 32 ? UINT32_MAX : (1u << n) - 1;
    int      bad = 0;
    for (int r = 0; r < n && count > 0 && n > 1; r++)
        for (size_t e = 0; e < count && bad < 5; e++)
            if (buf[r][e].set != all || buf[r][e].expr != buf[0][e].expr) {
                bad++;
                CHECK(0,
                      "n %d count %zu: rank %d element %zu holds ranks "
                      "0x%x%s",
                      n, count, r, e, buf[r][e].set,
                      buf[r][e].set == all ? " combined otherwise than on "
                                             "rank 0"
                                           : "");
            }
    for (int r = 0; r < n; r++) {
        free(buf[r]);
        free(send[r]);
        free(out[r]);
    }
    free(buf);
    free(send);
    free(out);
    free(pl);
}

int main(void)
{
    static const size_t counts[] = {0, 1, 2, 3, 5, 8, 17, 100, 1031, 9000};
    for (int n = 1; n <= 17; n++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            run(n, counts[c], 64);        /* many segments */
            run(n, counts[c], 128 << 10); /* the default */
        }
    /* A huge count still fits the tag space (larger segments). */
    braid_p2p_rab_plan_t pl;
    CHECK(braid_p2p_rab_plan(&pl, 8, 3, (size_t)1 << 34, 4, 4096) == 0 &&
              braid_p2p_rab_nseg(&pl, (size_t)1 << 34) <= (size_t)pl.maxseg,
          "2^34 elements: %zu segments of %zu, %d allowed",
          braid_p2p_rab_nseg(&pl, (size_t)1 << 34), pl.seg, pl.maxseg);
    return check_summary("p2p_rab_plan");
}
