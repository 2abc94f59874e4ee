/* The bw engines' arithmetic: how a call is cut into slices and chunks
 * (every element in exactly one chunk of exactly one slice, chunks within
 * the staging size and the 24-bit chunk count), and the cost model's
 * shape (no size cap; pull needs a get path). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bw.h"
#include "tests/unit/check.h"

static const braid_coll_t colls[] = {
    BRAID_COLL_ALLREDUCE, BRAID_COLL_REDUCE_SCATTER, BRAID_COLL_ALLGATHER};

/* Every element of the cut buffer is covered once, in order. */
static void check_cover(braid_coll_t coll, int n, size_t count, size_t dts,
                        size_t chunk_bytes)
{
    braid_bw_plan_t p;
    braid_bw_plan(&p, coll, n, count, dts, chunk_bytes);
    size_t total = coll == BRAID_COLL_ALLREDUCE ? count : (size_t)n * count;
    size_t next  = 0;
    /* Whole elements within chunk_bytes (at least one), unless the slice
     * would need more than 24 bits of chunks. */
    size_t want = chunk_bytes / dts ? chunk_bytes / dts : 1;
    if (braid_bw_slice_len(&p, 0) / want < BRAID_BW_MAX_CHUNKS)
        CHECK(p.chunk == want, "chunk %zu elements, expected %zu", p.chunk,
              want);
    else
        CHECK(p.chunk > want, "chunk %zu not raised", p.chunk);
    for (int j = 0; j < n; j++) {
        size_t off = braid_bw_slice_off(&p, j),
               len = braid_bw_slice_len(&p, j);
        CHECK(off == next,
              "coll %d n %d count %zu: slice %d starts at %zu, "
              "expected %zu",
              coll, n, count, j, off, next);
        size_t k = braid_bw_nchunks(&p, j), sum = 0;
        CHECK(k <= BRAID_BW_MAX_CHUNKS, "slice %d: %zu chunks", j, k);
        CHECK((len == 0) == (k == 0), "slice %d: %zu elements in %zu chunks",
              j, len, k);
        for (size_t c = 0; c < k && c < 100000; c++) {
            size_t cl = braid_bw_chunk_len(&p, j, c);
            CHECK(braid_bw_chunk_off(&p, c) == sum,
                  "slice %d chunk %zu at "
                  "%zu, expected %zu",
                  j, c, braid_bw_chunk_off(&p, c), sum);
            CHECK(cl >= 1 && cl <= p.chunk,
                  "slice %d chunk %zu: %zu "
                  "elements (chunk %zu)",
                  j, c, cl, p.chunk);
            sum += cl;
        }
        if (k < 100000)
            CHECK(sum == len, "slice %d: chunks hold %zu of %zu", j, sum, len);
        CHECK(braid_bw_chunk_len(&p, j, k) == 0, "chunk past the end");
        next += len;
    }
    CHECK(next == total, "coll %d n %d count %zu: slices cover %zu of %zu",
          coll, n, count, next, total);
    /* Slice 0 is a longest one (the staging buffers are sized by it). */
    for (int j = 1; j < n; j++)
        CHECK(braid_bw_slice_len(&p, j) <= braid_bw_slice_len(&p, 0),
              "slice %d longer than slice 0", j);
}

static braid_cost_in_t cost_in(braid_coll_t coll, int n, size_t bytes,
                               double get_gbps)
{
    braid_cost_in_t in;
    memset(&in, 0, sizeof(in));
    in.struct_size        = sizeof(in);
    in.coll               = coll;
    in.bytes              = bytes;
    in.nranks             = n;
    in.nnodes             = 1;
    in.ppn                = n;
    in.link.struct_size   = sizeof(in.link);
    in.link.alpha_us      = 0.4;
    in.link.beta_gbps     = 2.0;
    in.link.put_alpha_us  = 0.1;
    in.link.put_beta_gbps = 4.0;
    in.reduce_gbps        = 8.0;
    in.get_alpha_us       = get_gbps > 0 ? 1.0 : 0.0;
    in.get_beta_gbps      = get_gbps;
    return in;
}

/* cost.c's pipe formula with the put link's us per byte bp; shared: the
 * finished chunks go out once (BRAID_CAP_LOAD), not once per peer. */
static double pipe_cost(const braid_cost_in_t *in, double bp, int shared)
{
    double n = in->nranks, m = (double)in->bytes, g = 1.0 / (8.0 * 1e3);
    double ap = in->link.put_alpha_us, d = BRAID_BW_PIPE_DEPTH;
    double c = BRAID_COST_COPY_OVER_REDUCE;
    if (in->coll == BRAID_COLL_ALLREDUCE) {
        double k = ceil(m / n / BRAID_BW_PIPE_CHUNK);
        return 2.0 * ap * (1.0 + fmin(k, d) + k / d) +
               (shared ? 1.0 : 2.0 * (n - 1) / n) * m * bp +
               (1.0 + c) * (n - 1) / n * m * g;
    }
    double puts = shared && in->coll == BRAID_COLL_ALLGATHER ? 1.0 : (n - 1);
    double work = in->coll == BRAID_COLL_ALLGATHER ? c : 1.0;
    return ap * (1.0 + ceil(m / BRAID_BW_PIPE_CHUNK) / d) + puts * m * bp +
           (n - 1) * m * g * work;
}

static void check_cost(void)
{
    for (size_t i = 0; i < 3; i++) {
        braid_coll_t c = colls[i];
        /* No get path: pull cannot run; pipe always can. */
        braid_cost_in_t in = cost_in(c, 4, 1 << 20, 0.0);
        CHECK(braid_bw_cost_pull(&in) < 0, "pull without a get path");
        CHECK(braid_bw_cost_pipe(&in) > 0, "pipe refused");
        /* No cap, finite, growing with the size. */
        double last_pull = 0, last_pipe = 0;
        for (size_t m = 8; m <= ((size_t)1 << 40); m *= 16) {
            in       = cost_in(c, 8, m, 4.0);
            double a = braid_bw_cost_pull(&in), b = braid_bw_cost_pipe(&in);
            CHECK(isfinite(a) && a > last_pull, "pull at %zu: %g", m, a);
            CHECK(isfinite(b) && b > last_pipe, "pipe at %zu: %g", m, b);
            last_pull = a, last_pipe = b;
        }
        in = cost_in(c, 1, 1 << 20, 4.0);
        CHECK(braid_bw_cost_pull(&in) == 0 && braid_bw_cost_pipe(&in) == 0,
              "one rank costs nothing");
        /* A broken link is refused. */
        in                    = cost_in(c, 4, 1 << 20, 4.0);
        in.link.put_beta_gbps = 0;
        CHECK(braid_bw_cost_pull(&in) < 0 && braid_bw_cost_pipe(&in) < 0,
              "no put bandwidth");
        /* With shm's declared links (put faster than get): the copy path
         * leads while the buffers stay in cache, the single copy once
         * they do not (4 ranks: 1 MiB all-reduce, 64 MiB). */
        in                    = cost_in(c, 4, (size_t)1 << 20, 4.0);
        in.link.put_beta_gbps = 10.0;
        CHECK(braid_bw_cost_pipe(&in) < braid_bw_cost_pull(&in),
              "copy path behind at 1 MiB: pipe %g, pull %g",
              braid_bw_cost_pipe(&in), braid_bw_cost_pull(&in));
        in.bytes = (size_t)64 << 20;
        CHECK(braid_bw_cost_pull(&in) < braid_bw_cost_pipe(&in),
              "single copy behind at 64 MiB: pull %g, pipe %g",
              braid_bw_cost_pull(&in), braid_bw_cost_pipe(&in));
        /* A measured put curve: the core read it at the call's buffers
         * (here beyond its out-of-cache point), and each of pipe's puts
         * runs half at that figure and half at the in-cache one, instead of
         * at the declared out-of-cache copy rate; an older core's
         * cost_in, without the curve, still gets the declared one. */
        in                    = cost_in(c, 4, (size_t)64 << 20, 4.0);
        in.link.put_beta_gbps = 8.0;
        in.put_curve    = (braid_bw_curve_t){20.0, 1 << 20, 8.0, 32 << 20};
        in.call_ws      = 128.0 * (1 << 20);
        double measured = braid_bw_cost_pipe(&in);
        double want     = pipe_cost(&in, 0.5 / 8e3 + 0.5 / 20e3, 0);
        CHECK(fabs(measured - want) < 1e-9 * want,
              "pipe on a measured curve %g, want %g", measured, want);
        in.struct_size  = offsetof(braid_cost_in_t, put_curve);
        double declared = braid_bw_cost_pipe(&in);
        want = pipe_cost(&in, 1.0 / (BRAID_BW_DRAM_COPY_GBPS * 1e3), 0);
        CHECK(fabs(declared - want) < 1e-9 * want,
              "pipe on the declared rate %g, want %g", declared, want);
        in.struct_size = sizeof(in);
        /* Peers' areas mapped (BRAID_CAP_LOAD): the shared AG ring puts
         * each finished chunk once; cheaper from 3 ranks on wherever there
         * is an AG phase, the same on 2 ranks and for reduce_scatter; an
         * older core's cost_in (without caps) gets the puts per peer. */
        for (int n = 2; n <= 8; n += 6) {
            in              = cost_in(c, n, (size_t)64 << 10, 4.0);
            double per_peer = braid_bw_cost_pipe(&in);
            in.caps         = BRAID_CAP_LOAD;
            double once     = braid_bw_cost_pipe(&in);
            want = pipe_cost(&in, 1.0 / (in.link.put_beta_gbps * 1e3), 1);
            CHECK(fabs(once - want) < 1e-9 * want,
                  "pipe with the shared ring on %d ranks %g, want %g", n, once,
                  want);
            if (n > 2 && c != BRAID_COLL_REDUCE_SCATTER)
                CHECK(once < per_peer, "shared ring not cheaper: %g, %g", once,
                      per_peer);
            else
                CHECK(fabs(once - per_peer) < 1e-9 * once,
                      "shared ring changed coll %d on %d ranks: %g, %g",
                      (int)c, n, once, per_peer);
            in.struct_size = offsetof(braid_cost_in_t, caps);
            CHECK(braid_bw_cost_pipe(&in) == per_peer,
                  "caps read past struct_size");
        }
        /* Streamed slots (pipe.c's wants_stream: with the shared rings,
         * an allgather, or a reduction whose buffers outgrow the cache):
         * both ends of every put at the call's working-set figure, none at
         * the in-cache one. */
        in                    = cost_in(c, 4, (size_t)64 << 20, 4.0);
        in.link.put_beta_gbps = 8.0;
        in.put_curve = (braid_bw_curve_t){20.0, 1 << 20, 8.0, 32 << 20};
        in.call_ws   = 128.0 * (1 << 20);
        in.caps      = BRAID_CAP_LOAD;
        double streamed = braid_bw_cost_pipe(&in);
        double want_s   = pipe_cost(&in, 1.0 / 8e3, 1);
        CHECK(fabs(streamed - want_s) < 1e-9 * want_s,
              "pipe with streamed slots %g, want %g", streamed, want_s);
        /* Each chunk goes to n-1 peers: n-2 puts' overhead more than its
         * wave's one (link.put_msg_us); the shared AG ring puts once. */
        for (int load = 0; load < 2; load++) {
            in                 = cost_in(c, 8, (size_t)1 << 20, 4.0);
            in.caps            = load ? BRAID_CAP_LOAD : 0;
            double base        = braid_bw_cost_pipe(&in);
            in.link.put_msg_us = 2.0;
            double m = (double)in.bytes, chunk = BRAID_BW_PIPE_CHUNK;
            double extra =
                c == BRAID_COLL_ALLREDUCE
                    ? (load ? 1.0 : 2.0) * ceil(m / 8 / chunk) * 6 * 2.0
                : c == BRAID_COLL_REDUCE_SCATTER || !load
                    ? ceil(m / chunk) * 6 * 2.0
                    : 0.0;
            double got = braid_bw_cost_pipe(&in) - base;
            CHECK(fabs(got - extra) < 1e-9 * base,
                  "coll %d load %d: message overhead %g, want %g", (int)c,
                  load, got, extra);
        }
        /* An older core's cost_in (without the get fields): pull refuses. */
        in             = cost_in(c, 4, 1 << 20, 4.0);
        in.struct_size = offsetof(braid_cost_in_t, get_alpha_us);
        CHECK(braid_bw_cost_pull(&in) < 0, "pull read past struct_size");
    }
    /* Collectives the engines do not run. */
    braid_cost_in_t in = cost_in(BRAID_COLL_BROADCAST, 4, 1 << 20, 4.0);
    CHECK(braid_bw_cost_pull(&in) < 0 && braid_bw_cost_pipe(&in) < 0,
          "broadcast estimated");
}

int main(void)
{
    static const size_t counts[] = {
        1, 2, 3, 7, 8, 63, 64, 65, 1000, 65537, (1u << 20) + 3};
    static const size_t dtss[]   = {1, 2, 4, 8};
    static const size_t chunks[] = {1, 4096, 65536, 262144};
    for (size_t i = 0; i < 3; i++)
        for (int n = 1; n <= 9; n++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                for (size_t d = 0; d < 4; d++)
                    for (size_t k = 0; k < 4; k++)
                        check_cover(colls[i], n, counts[c], dtss[d],
                                    chunks[k]);
    /* Slices too long for 24 bits of chunks get larger chunks. */
    size_t          huge = (size_t)BRAID_BW_MAX_CHUNKS * 3 + 5;
    braid_bw_plan_t p;
    braid_bw_plan(&p, BRAID_COLL_ALLREDUCE, 2, huge * 2, 1, 1);
    CHECK(braid_bw_max_chunks(&p) <= BRAID_BW_MAX_CHUNKS,
          "%zu chunks for a %zu-element slice", braid_bw_max_chunks(&p), huge);
    check_cover(BRAID_COLL_REDUCE_SCATTER, 3, huge, 1, 1);
    check_cost();
    return check_summary("bw_chunk");
}
