/* The shm transport, driven through the plugin ABI by 1..8 forked ranks.
 *
 *   test_shm PLUGIN.so
 *
 * Per rank count: probe; refusal of a multi-host communicator; put_signal
 * from every rank into every peer's slot with sequence-numbered flags (data
 * visible once the flag is); send/receive matched by (peer, tag) with
 * receives posted in reverse order, before and after the messages arrive,
 * zero-length, ring-sized and 8 MiB messages, self-sends, a length mismatch,
 * tag check bits that differ (BRAID_TAG_CHECKED),
 * cancelled sends and receives; single-copy gets of every peer's exposed
 * buffer; then that comm_destroy leaves no fd, mapping or /dev/shm name
 * behind.
 * Failure paths: one rank unable to open a file fails comm_create and
 * mem_alloc on every rank, cleanly; without the get path (BRAID_SHM_CMA=off,
 * malformed, or the kernel refusing cross-memory attach) every rank agrees
 * and says why. */
#include <linux/capability.h>
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"

#define SLOT_BYTES 192 /* put_signal payload per (parity, source) */
#define BIG        ((size_t)8 << 20)

/* Byte i of the message (src -> dst, number k). */
static unsigned char pattern(int src, int dst, uint64_t k, size_t i)
{
    uint64_t x = ((uint64_t)src * 131 + (uint64_t)dst * 7 + k * 1009 + i) *
                 UINT64_C(0x9e3779b97f4a7c15);
    return (unsigned char)(x >> 56);
}

static void fill(unsigned char *buf, size_t len, int src, int dst, uint64_t k)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = pattern(src, dst, k, i);
    }
}

/* Index of the first wrong byte, or -1. */
static long verify(const unsigned char *buf, size_t len, int src, int dst,
                   uint64_t k)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != pattern(src, dst, k, i)) {
            return (long)i;
        }
    }
    return -1;
}

static braid_topo_t one_host(th_rank_t *r, int *nodes)
{
    return tu_topo(r->size, nodes);
}

/* ------------------------------------------------------------ put_signal */

static size_t data_off(int n, int par, int src)
{
    return ((size_t)par * (size_t)n + (size_t)src) * SLOT_BYTES;
}

static size_t flag_off(int n, int par, int src)
{
    /* Flags on their own lines, after all data slots. */
    return 2 * (size_t)n * SLOT_BYTES +
           ((size_t)par * (size_t)n + (size_t)src) * 64;
}

static void wait_flag(th_rank_t *r, void *tc, const volatile void *p,
                      uint64_t want, const char *what)
{
    double   deadline = th_now() + 15.0;
    unsigned polls    = 0;

    while (__atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE) < want) {
        braid_status_t st = r->tl->progress(tc);
        TH_CHECK(st == BRAID_OK, "progress: %s", th_status_str(st));
        if (th_now() > deadline) {
            TH_CHECK(0, "rank %d: %s: flag stuck at %llu, want %llu", r->rank,
                     what, (unsigned long long)*(const volatile uint64_t *)p,
                     (unsigned long long)want);
            exit(1);
        }
        th_relax(r, &polls);
    }
}

/* mem_peer (BRAID_CAP_LOAD): every rank's area as mapped here; a rank's
 * plain stores into its own area, published by a release store of a flag
 * there, are what every peer reads through its mapping. */
static void test_mem_peer(th_rank_t *r, void *tc)
{
    const int    n = r->size;
    braid_rmem_t mem;

    TH_CHECK(r->tl->mem_alloc(tc, 64 + SLOT_BYTES, &mem) == BRAID_OK,
             "mem_alloc");
    TH_CHECK(r->tl->mem_peer(tc, &mem, r->rank) == mem.local, "own area");
    TH_CHECK(r->tl->mem_peer(tc, &mem, n) == NULL &&
                 r->tl->mem_peer(tc, &mem, -1) == NULL &&
                 r->tl->mem_peer(tc, NULL, 0) == NULL,
             "mem_peer out of range");
    unsigned char *mine = mem.local;
    fill(mine + 64, SLOT_BYTES, r->rank, 0, 7);
    __atomic_store_n((uint64_t *)(void *)mine, 7, __ATOMIC_RELEASE);
    for (int s = 0; s < n; s++) {
        const unsigned char *at = r->tl->mem_peer(tc, &mem, s);
        TH_CHECK(at != NULL, "no mapping of rank %d's area", s);
        wait_flag(r, tc, at, 7, "mem_peer");
        long bad = verify(at + 64, SLOT_BYTES, s, 0, 7);
        TH_CHECK(bad < 0, "rank %d's area read here: byte %ld wrong", s, bad);
    }
    th_barrier(r); /* nobody reads it any more */
    r->tl->mem_free(tc, &mem);
}

static void test_put_signal(th_rank_t *r, void *tc)
{
    const int     n     = r->size;
    const int     iters = 2000 / n + 50;
    size_t        len   = flag_off(n, 2, 0);
    braid_rmem_t  mem;
    braid_treq_t  req;
    unsigned char src[SLOT_BYTES];
    int           bad = 0;

    TH_CHECK(r->tl->mem_alloc(tc, len, &mem) == BRAID_OK, "mem_alloc");
    TH_CHECK(mem.len == len && mem.local != NULL, "mem fields");
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char *)mem.local)[i] != 0) {
            TH_CHECK(0, "mem_alloc area not zeroed at %zu", i);
            break;
        }
    }
    th_barrier(r); /* before anyone writes into it */
    /* Every iteration: every rank writes its slot of this iteration's parity
     * in every rank (itself included), then waits for everyone's flag.  A
     * slot is rewritten two iterations later, which a sender reaches only
     * after this rank's next flag, i.e. after this rank read it. */
    for (uint64_t it = 1; it <= (uint64_t)iters; it++) {
        int par = (int)(it & 1);
        for (int k = 0; k < n; k++) {
            int peer = (r->rank + k) % n; /* spread the writers */
            fill(src, sizeof(src), r->rank, peer, it);
            req.active        = 1;
            braid_status_t st = r->tl->put_signal(
                tc, &mem, peer, data_off(n, par, r->rank), src, sizeof(src),
                flag_off(n, par, r->rank), it, &req);
            TH_CHECK(st == BRAID_OK && req.active == 0, "put_signal to %d",
                     peer);
        }
        for (int s = 0; s < n; s++) {
            unsigned char *base = mem.local;
            wait_flag(r, tc, base + flag_off(n, par, s), it, "put_signal");
            uint64_t f = __atomic_load_n(
                (uint64_t *)(void *)(base + flag_off(n, par, s)),
                __ATOMIC_ACQUIRE);
            long at =
                verify(base + data_off(n, par, s), SLOT_BYTES, s, r->rank, it);
            if ((f != it || at >= 0) && bad++ < 5) {
                TH_CHECK(0,
                         "rank %d iter %llu from %d: flag %llu, byte %ld "
                         "wrong",
                         r->rank, (unsigned long long)it, s,
                         (unsigned long long)f, at);
            }
        }
    }

    /* Bad arguments are refused, not written. */
    req.active = 1;
    TH_CHECK(r->tl->put_signal(tc, &mem, n, 0, src, 8, 64, 1, &req) ==
                 BRAID_ERR_INVALID_ARG,
             "peer out of range refused");
    TH_CHECK(r->tl->put_signal(tc, &mem, 0, 0, src, 8, 12, 1, &req) ==
                 BRAID_ERR_INVALID_ARG,
             "misaligned flag refused");
    TH_CHECK(r->tl->put_signal(tc, &mem, 0, len - 4, src, 8, 0, 1, &req) ==
                 BRAID_ERR_INVALID_ARG,
             "data past the end refused");
    TH_CHECK(r->tl->put_signal(tc, &mem, 0, 0, src, 8, len, 1, &req) ==
                 BRAID_ERR_INVALID_ARG,
             "flag past the end refused");
    th_barrier(r);
    r->tl->mem_free(tc, &mem);
    TH_CHECK(mem.impl == NULL && mem.local == NULL, "mem_free clears");

    /* Large puts: 1 MiB from every rank into every rank. */
    size_t         chunk = (size_t)1 << 20;
    unsigned char *big   = malloc(chunk);
    TH_CHECK(r->tl->mem_alloc(tc, (size_t)n * (chunk + 64), &mem) == BRAID_OK,
             "mem_alloc big");
    for (int k = 0; k < n; k++) {
        int peer = (r->rank + k) % n;
        fill(big, chunk, r->rank, peer, 77);
        TH_CHECK(r->tl->put_signal(tc, &mem, peer, (size_t)r->rank * chunk,
                                   big, chunk,
                                   (size_t)n * chunk + (size_t)r->rank * 64, 5,
                                   &req) == BRAID_OK,
                 "big put_signal");
    }
    for (int s = 0; s < n; s++) {
        unsigned char *base = mem.local;
        wait_flag(r, tc, base + (size_t)n * chunk + (size_t)s * 64, 5, "big");
        long at = verify(base + (size_t)s * chunk, chunk, s, r->rank, 77);
        TH_CHECK(at < 0, "big put from %d: byte %ld wrong", s, at);
    }
    free(big);
    th_barrier(r);
    r->tl->mem_free(tc, &mem);
}

/* ------------------------------------------------------------ send/recv */

/* Every rank exchanges with every rank (itself included), sizes around the
 * cell payload, many rounds. */
/* The contract of plugin.h: zero-length messages (NULL buffers) match and
 * complete; a request may be complete when isend returns (shm completes a
 * small send into a ring with room at once), and test() of an inactive
 * request is BRAID_OK at once. */
static void test_zero_and_inline(th_rank_t *r, void *tc)
{
    const int n = r->size, to = (r->rank + 1) % n,
              from = (r->rank + n - 1) % n;
    braid_treq_t   reqs[2];
    uint64_t       v = 42, got = 0;
    braid_status_t st;

    memset(reqs, 0, sizeof(reqs));
    TH_CHECK(r->tl->irecv(tc, from, BRAID_TAG(1, 9), NULL, 0, &reqs[0]) ==
                     BRAID_OK &&
                 r->tl->isend(tc, to, BRAID_TAG(1, 9), NULL, 0, &reqs[1]) ==
                     BRAID_OK,
             "zero-length isend/irecv with NULL buffers");
    st = th_wait(r, tc, reqs, 2);
    TH_CHECK(st == BRAID_OK, "zero-length messages complete: %s",
             th_status_str(st));
    th_barrier(r);
    TH_CHECK(r->tl->isend(tc, to, BRAID_TAG(2, 9), &v, sizeof(v), &reqs[1]) ==
                     BRAID_OK &&
                 !reqs[1].active && reqs[1].handle == NULL,
             "an 8-byte send into an empty ring is complete on return");
    TH_CHECK(r->tl->test(tc, &reqs[1]) == BRAID_OK,
             "test() of a request complete on return");
    TH_CHECK(r->tl->irecv(tc, from, BRAID_TAG(2, 9), &got, sizeof(got),
                          &reqs[0]) == BRAID_OK &&
                 th_wait(r, tc, reqs, 1) == BRAID_OK && got == 42,
             "the message of the inline send arrives");
    th_barrier(r);
}

static void test_all_pairs(th_rank_t *r, void *tc)
{
    static const size_t sizes[] = {0, 1, 8, 100, 16352, 16353, 40000, 70001};
    const int           n       = r->size;
    const int           rounds  = 8 * 4;
    braid_treq_t       *reqs    = calloc((size_t)(2 * n), sizeof(*reqs));
    unsigned char     **sbuf    = calloc((size_t)n, sizeof(*sbuf));
    unsigned char     **rbuf    = calloc((size_t)n, sizeof(*rbuf));

    for (int p = 0; p < n; p++) {
        sbuf[p] = malloc(70002);
        rbuf[p] = malloc(70002);
    }
    for (int it = 0; it < rounds; it++) {
        size_t   len = sizes[it % 8];
        uint64_t tag = BRAID_TAG(it, 3);
        for (int k = 0; k < n; k++) {
            int from = (r->rank - k + n) % n, to = (r->rank + k) % n;
            memset(rbuf[from], 0xEE, 70002);
            TH_CHECK(r->tl->irecv(tc, from, tag, rbuf[from], len,
                                  &reqs[2 * k]) == BRAID_OK,
                     "irecv");
            fill(sbuf[to], len, r->rank, to, (uint64_t)it);
            TH_CHECK(r->tl->isend(tc, to, tag, sbuf[to], len,
                                  &reqs[2 * k + 1]) == BRAID_OK,
                     "isend");
        }
        braid_status_t st = th_wait(r, tc, reqs, 2 * n);
        TH_CHECK(st == BRAID_OK, "all-pairs round %d (%zu bytes): %s", it, len,
                 th_status_str(st));
        for (int p = 0; p < n; p++) {
            long at = verify(rbuf[p], len, p, r->rank, (uint64_t)it);
            TH_CHECK(at < 0,
                     "all-pairs round %d from %d (%zu bytes): byte %ld", it, p,
                     len, at);
            TH_CHECK(rbuf[p][len] == 0xEE, "all-pairs: wrote past %zu bytes",
                     len);
        }
    }
    for (int p = 0; p < n; p++) {
        free(sbuf[p]);
        free(rbuf[p]);
    }
    free(sbuf);
    free(rbuf);
    free(reqs);
}

#define NMSG 9
static const size_t msg_sizes[NMSG] = {8,      0,  100000, 16353, 1,
                                       700000, 64, 16352,  3};

/* Messages to the right neighbour with tags 0..NMSG-1; the receiver posts
 * them in reverse order, either before the sender starts (all posted) or
 * after it finished (all unexpected, the large ones wrapping the ring). */
static void test_reverse_order(th_rank_t *r, void *tc, int posted_first)
{
    const int n = r->size, right = (r->rank + 1) % n,
              left = (r->rank - 1 + n) % n;
    braid_treq_t   sreq[NMSG], rreq[NMSG];
    unsigned char *sbuf[NMSG], *rbuf[NMSG];

    for (int m = 0; m < NMSG; m++) {
        sbuf[m] = malloc(msg_sizes[m] + 1);
        rbuf[m] = malloc(msg_sizes[m] + 1);
        fill(sbuf[m], msg_sizes[m], r->rank, right, (uint64_t)m + 100);
        memset(rbuf[m], 0xEE, msg_sizes[m] + 1);
    }
    if (posted_first) {
        for (int m = NMSG - 1; m >= 0; m--) {
            TH_CHECK(r->tl->irecv(tc, left, BRAID_TAG(1, m), rbuf[m],
                                  msg_sizes[m], &rreq[m]) == BRAID_OK,
                     "irecv %d", m);
        }
        th_barrier(r);
    }
    for (int m = 0; m < NMSG; m++) {
        TH_CHECK(r->tl->isend(tc, right, BRAID_TAG(1, m), sbuf[m],
                              msg_sizes[m], &sreq[m]) == BRAID_OK,
                 "isend %d", m);
    }
    if (!posted_first) {
        /* Drive the sends to completion first: the receiver must buffer. */
        TH_CHECK(th_wait(r, tc, sreq, NMSG) == BRAID_OK, "sends done");
        th_progress_barrier(r, tc);
        for (int m = NMSG - 1; m >= 0; m--) {
            TH_CHECK(r->tl->irecv(tc, left, BRAID_TAG(1, m), rbuf[m],
                                  msg_sizes[m], &rreq[m]) == BRAID_OK,
                     "irecv %d", m);
        }
    }
    /* Wait for the last-posted receive first: the others must keep going. */
    TH_CHECK(th_wait(r, tc, &rreq[0], 1) == BRAID_OK, "first receive");
    TH_CHECK(th_wait(r, tc, rreq, NMSG) == BRAID_OK, "receives");
    TH_CHECK(th_wait(r, tc, sreq, NMSG) == BRAID_OK, "sends");
    for (int m = 0; m < NMSG; m++) {
        long at =
            verify(rbuf[m], msg_sizes[m], left, r->rank, (uint64_t)m + 100);
        TH_CHECK(at < 0 && rbuf[m][msg_sizes[m]] == 0xEE,
                 "reverse order (%s): message %d (%zu bytes) byte %ld wrong",
                 posted_first ? "posted first" : "unexpected", m, msg_sizes[m],
                 at);
        free(sbuf[m]);
        free(rbuf[m]);
    }
    th_barrier(r);
}

/* Bytes of heap in use (0 where the allocator does not say, e.g. ASan). */
static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* A pipelined algorithm's segments: a receive takes its message out of the
 * ring and leaves the next ones there for their receives, which follow at
 * once, instead of buffering them as unexpected (an allocation per message
 * is fresh pages to fault in on every call).  Messages that do go through
 * the unexpected queue reuse its buffers from one round to the next. */
static void test_segments(th_rank_t *r, void *tc)
{
    enum { NSEG = 3, SEG = 128 << 10 };
    const int n = r->size, right = (r->rank + 1) % n,
              left = (r->rank - 1 + n) % n;
    braid_treq_t   sreq[NSEG], rreq[NSEG];
    unsigned char *sbuf = malloc((size_t)NSEG * SEG),
                  *rbuf = malloc((size_t)NSEG * SEG);
    /* Sanitizers' allocators report nothing: then only the data is
     * checked. */
    const int counted  = heap_in_use() != 0;
    size_t    swept[2] = {0, 0}; /* heap taken by rounds 1, 2's sweeps */

    TH_CHECK(sbuf != NULL && rbuf != NULL, "buffers");
    if (sbuf == NULL || rbuf == NULL || n < 2) {
        free(sbuf);
        free(rbuf);
        return;
    }
    if (!counted)
        printf("note: the allocator reports no heap use; only the segments' "
               "data is checked\n");
    for (int round = 0; round < 3; round++) {
        fill(sbuf, (size_t)NSEG * SEG, r->rank, right, (uint64_t)round + 7);
        memset(rbuf, 0xEE, (size_t)NSEG * SEG);
        for (int k = 0; k < NSEG; k++)
            TH_CHECK(r->tl->isend(tc, right, BRAID_TAG(3, k), sbuf + k * SEG,
                                  SEG, &sreq[k]) == BRAID_OK,
                     "isend %d", k);
        th_barrier(r); /* every segment is in its receiver's ring */
        size_t base = heap_in_use();
        if (round > 0) {
            /* Unexpected on purpose: the periodic sweep takes them all. */
            for (int i = 0; i < 64; i++)
                r->tl->progress(tc);
            swept[round - 1] = heap_in_use() - base;
            base             = heap_in_use();
        }
        for (int k = 0; k < NSEG; k++) {
            TH_CHECK(r->tl->irecv(tc, left, BRAID_TAG(3, k), rbuf + k * SEG,
                                  SEG, &rreq[k]) == BRAID_OK,
                     "irecv %d", k);
            if (round == 0 && counted)
                TH_CHECK(heap_in_use() < base + SEG,
                         "receive %d left the next segments in the ring "
                         "(heap %zu -> %zu bytes)",
                         k, base, heap_in_use());
        }
        TH_CHECK(th_wait(r, tc, rreq, NSEG) == BRAID_OK, "receives");
        TH_CHECK(th_wait(r, tc, sreq, NSEG) == BRAID_OK, "sends");
        TH_CHECK(verify(rbuf, (size_t)NSEG * SEG, left, r->rank,
                        (uint64_t)round + 7) < 0,
                 "segments of round %d", round);
        th_barrier(r);
    }
    /* Round 1's sweep allocated its buffers; round 2's took them back. */
    if (counted) {
        TH_CHECK(swept[0] >= SEG,
                 "the sweep buffered the segments (heap "
                 "+%zu bytes)",
                 swept[0]);
        TH_CHECK(swept[1] < SEG,
                 "unexpected buffers reused (round 1 took "
                 "%zu bytes, round 2 %zu)",
                 swept[0], swept[1]);
    }
    free(sbuf);
    free(rbuf);
}

/* Same (peer, tag) several times: delivered in the order sent. */
static void test_same_tag_fifo(th_rank_t *r, void *tc)
{
    const int n = r->size, right = (r->rank + 1) % n,
              left = (r->rank - 1 + n) % n;
    braid_treq_t  sreq[4], rreq[4];
    unsigned char sbuf[4][300], rbuf[4][300];

    for (int m = 0; m < 4; m++) {
        fill(sbuf[m], 300, r->rank, right, (uint64_t)m + 500);
        TH_CHECK(r->tl->isend(tc, right, 42, sbuf[m], 300, &sreq[m]) ==
                     BRAID_OK,
                 "isend");
    }
    th_barrier(r); /* first two arrive unexpected, the rest posted */
    for (int m = 0; m < 4; m++) {
        TH_CHECK(r->tl->irecv(tc, left, 42, rbuf[m], 300, &rreq[m]) ==
                     BRAID_OK,
                 "irecv");
    }
    TH_CHECK(th_wait(r, tc, rreq, 4) == BRAID_OK, "fifo receives");
    TH_CHECK(th_wait(r, tc, sreq, 4) == BRAID_OK, "fifo sends");
    for (int m = 0; m < 4; m++) {
        TH_CHECK(verify(rbuf[m], 300, left, r->rank, (uint64_t)m + 500) < 0,
                 "same-tag message %d out of order", m);
    }
    th_barrier(r);
}

/* 8 MiB to the right neighbour twice: receive posted first, then late. */
static void test_big(th_rank_t *r, void *tc)
{
    const int n = r->size, right = (r->rank + 1) % n,
              left      = (r->rank - 1 + n) % n;
    unsigned char *sbuf = malloc(BIG), *rbuf = malloc(BIG);
    braid_treq_t   req[2];

    fill(sbuf, BIG, r->rank, right, 9);
    for (int late = 0; late < 2; late++) {
        memset(rbuf, 0, BIG);
        if (!late) {
            TH_CHECK(r->tl->irecv(tc, left, BRAID_TAG(2, 0), rbuf, BIG,
                                  &req[0]) == BRAID_OK,
                     "irecv big");
        }
        TH_CHECK(r->tl->isend(tc, right, BRAID_TAG(2, 0), sbuf, BIG,
                              &req[1]) == BRAID_OK,
                 "isend big");
        if (late) {
            /* Let most of it land in the unexpected queue first. */
            unsigned polls = 0;
            for (int i = 0; i < 2000; i++) {
                r->tl->progress(tc);
                th_relax(r, &polls);
            }
            TH_CHECK(r->tl->irecv(tc, left, BRAID_TAG(2, 0), rbuf, BIG,
                                  &req[0]) == BRAID_OK,
                     "irecv big late");
        }
        TH_CHECK(th_wait(r, tc, req, 2) == BRAID_OK, "big exchange");
        long at = verify(rbuf, BIG, left, r->rank, 9);
        TH_CHECK(at < 0, "8 MiB message (%s): byte %ld wrong",
                 late ? "late receive" : "posted receive", at);
        th_barrier(r);
    }
    free(sbuf);
    free(rbuf);
}

/* A message longer than its receive, or one with the receive's match bits
 * but other check bits, fails that receive only; the stream stays usable. */
static void test_mismatch(th_rank_t *r, void *tc)
{
    const int n = r->size, right = (r->rank + 1) % n,
              left = (r->rank - 1 + n) % n;
    unsigned char  sbuf[64], rbuf[64];
    braid_treq_t   sreq, rreq;
    braid_status_t st;

    fill(sbuf, 64, r->rank, right, 1);
    TH_CHECK(r->tl->isend(tc, right, 7, sbuf, 32, &sreq) == BRAID_OK, "isend");
    st = r->tl->irecv(tc, left, 7, rbuf, 16, &rreq);
    if (st == BRAID_OK) {
        st = th_wait(r, tc, &rreq, 1);
    }
    TH_CHECK(st == BRAID_ERR_MISMATCH, "mismatched length reported: %s",
             th_status_str(st));
    TH_CHECK(strstr(th_last_error(), "32 bytes") != NULL,
             "mismatch message names the length");
    TH_CHECK(th_wait(r, tc, &sreq, 1) == BRAID_OK,
             "mismatched send completes");
    TH_CHECK(r->tl->isend(tc, right, 8, sbuf, 64, &sreq) == BRAID_OK, "isend");
    TH_CHECK(r->tl->irecv(tc, left, 8, rbuf, 64, &rreq) == BRAID_OK, "irecv");
    TH_CHECK(th_wait(r, tc, &rreq, 1) == BRAID_OK, "after mismatch");
    TH_CHECK(th_wait(r, tc, &sreq, 1) == BRAID_OK, "after mismatch send");
    TH_CHECK(verify(rbuf, 64, left, r->rank, 1) < 0, "stream intact after a "
                                                     "mismatch");

    /* The same match bits (seq, step) with other check bits (another
     * call's signature, plugin.h): the receive fails, posted before the
     * message or after it sat in the unexpected queue; then a message whose
     * check bits agree arrives intact. */
    for (int late = 0; late < 2; late++) {
        uint64_t mine   = BRAID_TAG_CHECKED(40 + late, 2, 0x1111);
        uint64_t theirs = BRAID_TAG_CHECKED(40 + late, 2, 0x2222);
        unsigned polls  = 0;
        if (!late) {
            TH_CHECK(r->tl->irecv(tc, left, mine, rbuf, 16, &rreq) == BRAID_OK,
                     "irecv");
        }
        th_barrier(r);
        TH_CHECK(r->tl->isend(tc, right, theirs, sbuf, 16, &sreq) == BRAID_OK,
                 "isend");
        th_barrier(r);
        if (late) { /* the message into the unexpected queue */
            for (int i = 0; i < 2000; i++) {
                (void)r->tl->progress(tc);
                th_relax(r, &polls);
            }
            st = r->tl->irecv(tc, left, mine, rbuf, 16, &rreq);
        } else {
            st = BRAID_OK;
        }
        if (st == BRAID_OK) {
            st = th_wait(r, tc, &rreq, 1);
        }
        TH_CHECK(st == BRAID_ERR_MISMATCH &&
                     strstr(th_last_error(), "another signature") != NULL,
                 "other check bits (%s receive) reported: %s: %s",
                 late ? "late" : "posted", th_status_str(st), th_last_error());
        TH_CHECK(th_wait(r, tc, &sreq, 1) == BRAID_OK, "isend completes");
    }
    fill(sbuf, 64, r->rank, right, 2);
    TH_CHECK(r->tl->isend(tc, right, BRAID_TAG_CHECKED(42, 2, 0x1111), sbuf,
                          64, &sreq) == BRAID_OK,
             "isend");
    TH_CHECK(r->tl->irecv(tc, left, BRAID_TAG_CHECKED(42, 2, 0x1111), rbuf, 64,
                          &rreq) == BRAID_OK,
             "irecv");
    TH_CHECK(th_wait(r, tc, &rreq, 1) == BRAID_OK &&
                 th_wait(r, tc, &sreq, 1) == BRAID_OK &&
                 verify(rbuf, 64, left, r->rank, 2) < 0,
             "matching check bits after a mismatch");

    TH_CHECK(r->tl->isend(tc, n, 1, sbuf, 1, &sreq) == BRAID_ERR_INVALID_ARG,
             "send to rank n refused");
    TH_CHECK(r->tl->irecv(tc, -1, 1, rbuf, 1, &rreq) == BRAID_ERR_INVALID_ARG,
             "receive from rank -1 refused");
    TH_CHECK(r->tl->isend(tc, right, UINT64_C(1) << 50, sbuf, 1, &sreq) ==
                 BRAID_ERR_INVALID_ARG,
             "tag beyond BRAID_TAG_BITS refused");
    th_barrier(r);
}

/* cancel.  A receive withdrawn before anything matched it is never written;
 * a send withdrawn halfway through the ring still arrives whole although
 * its buffer is scribbled over and freed at once; a receive withdrawn with
 * a message halfway in takes no more of it, and the ring carries on with
 * the next message.  (Freed buffers: AddressSanitizer sees late writes.) */
#define CANCEL_LEN ((size_t)700000) /* more than a ring holds */
static void test_cancel(th_rank_t *r, void *tc)
{
    const braid_transport_t *tl = r->tl;
    const int                n = r->size, right = (r->rank + 1) % n,
              left      = (r->rank - 1 + n) % n;
    unsigned char *sbuf = malloc(CANCEL_LEN), *rbuf = malloc(CANCEL_LEN);
    unsigned char *gone = malloc(64), small[64], got[64];
    braid_treq_t   sreq, rreq, req[2], idle = {0};

    /* A receive nothing matched yet. */
    TH_CHECK(tl->irecv(tc, left, 51, gone, 64, &rreq) == BRAID_OK, "irecv");
    tl->cancel(tc, &rreq);
    tl->cancel(tc, &idle); /* not active: nothing happens */
    TH_CHECK(!rreq.active && !idle.active, "cancelled receive inactive");
    free(gone);
    th_barrier(r);

    /* A send cut off after the cells that fit the ring. */
    fill(sbuf, CANCEL_LEN, r->rank, right, 50);
    TH_CHECK(tl->isend(tc, right, 50, sbuf, CANCEL_LEN, &sreq) == BRAID_OK,
             "isend");
    tl->cancel(tc, &sreq);
    TH_CHECK(!sreq.active, "cancelled send inactive");
    memset(sbuf, 0x55, CANCEL_LEN);
    free(sbuf);
    fill(small, sizeof(small), r->rank, right, 51);
    TH_CHECK(tl->isend(tc, right, 51, small, sizeof(small), &req[0]) ==
                 BRAID_OK,
             "isend small");
    TH_CHECK(tl->irecv(tc, left, 50, rbuf, CANCEL_LEN, &req[1]) == BRAID_OK,
             "irecv");
    TH_CHECK(th_wait(r, tc, req, 2) == BRAID_OK, "cancelled send arrives: %s",
             th_last_error());
    TH_CHECK(verify(rbuf, CANCEL_LEN, left, r->rank, 50) < 0,
             "cancelled send arrived whole");
    TH_CHECK(tl->irecv(tc, left, 51, got, sizeof(got), &req[0]) == BRAID_OK &&
                 th_wait(r, tc, req, 1) == BRAID_OK &&
                 verify(got, sizeof(got), left, r->rank, 51) < 0,
             "the message of the cancelled receive's tag went to the next");
    th_progress_barrier(r, tc);

    /* A receive cancelled with the first ring-full of its message in. */
    sbuf = malloc(CANCEL_LEN);
    fill(sbuf, CANCEL_LEN, r->rank, right, 52);
    TH_CHECK(tl->isend(tc, right, 52, sbuf, CANCEL_LEN, &sreq) == BRAID_OK,
             "isend");
    th_barrier(r); /* the first cells are in every ring */
    TH_CHECK(tl->irecv(tc, left, 52, rbuf, CANCEL_LEN, &rreq) == BRAID_OK,
             "irecv");
    tl->cancel(tc, &rreq);
    TH_CHECK(!rreq.active, "cancelled receive inactive");
    free(rbuf);
    TH_CHECK(th_wait(r, tc, &sreq, 1) == BRAID_OK,
             "send whose receive was "
             "cancelled completes: %s",
             th_last_error());
    free(sbuf);
    fill(small, sizeof(small), r->rank, right, 53);
    TH_CHECK(
        tl->isend(tc, right, 53, small, sizeof(small), &req[0]) == BRAID_OK &&
            tl->irecv(tc, left, 53, got, sizeof(got), &req[1]) == BRAID_OK &&
            th_wait(r, tc, req, 2) == BRAID_OK &&
            verify(got, sizeof(got), left, r->rank, 53) < 0,
        "the ring carries on after a cancelled receive: %s", th_last_error());
    th_progress_barrier(r, tc);
}

/* Left behind at comm_destroy: a send stuck behind a full ring, a message
 * nobody receives (buffered as unexpected), a receive nothing matches.
 * comm_destroy must free all of it (LeakSanitizer checks at exit). */
static unsigned char *test_abandon(th_rank_t *r, void *tc)
{
    const int n = r->size, right = (r->rank + 1) % n,
              left           = (r->rank - 1 + n) % n;
    size_t               len = (size_t)2 << 20;
    unsigned char       *big = calloc(1, len);
    static unsigned char small[16]; /* outlives the queued ops */
    braid_treq_t         req[3];

    /* Usually still queued at comm_destroy (a busy peer may have drained
     * it all already). */
    TH_CHECK(r->tl->isend(tc, right, 999, big, len, &req[0]) == BRAID_OK,
             "big send");
    TH_CHECK(r->tl->isend(tc, right, 998, small, 16, &req[1]) == BRAID_OK,
             "small send behind it");
    TH_CHECK(r->tl->irecv(tc, left, 997, small, 16, &req[2]) == BRAID_OK &&
                 req[2].active,
             "receive never matched");
    for (int i = 0; i < 100; i++) {
        r->tl->test(tc, &req[0]);
    }
    th_progress_barrier(r, tc);
    return big; /* the queued send may point into it until comm_destroy */
}

/* ------------------------------------------------------------------ get */

/* Single-copy reads (cross-memory attach): every rank exposes a buffer of
 * its own, the keys go round through the oob, and every rank reads ranges
 * of every peer's (odd offsets and lengths, 0 bytes, the whole buffer).
 * Bad ranges and peers are refused. */
static void test_get(th_rank_t *r, void *tc)
{
    const braid_transport_t *tl = r->tl;
    const int                n  = r->size;
    const size_t   len  = (size_t)3 << 20; /* several page-pinning batches */
    unsigned char *mine = malloc(len), *got = malloc(len);
    braid_rkey_t   key, *keys = calloc((size_t)n, sizeof(braid_rkey_t));
    void          *handle = (void *)1;
    braid_treq_t   req;
    double         alpha = -1, beta = -1;
    char           why[160] = "";

    TH_CHECK(tl->get_link(tc, &alpha, &beta, why, sizeof(why)) == BRAID_OK &&
                 alpha > 0 && beta > 0,
             "get path: %s (%g us, %g GB/s)", why, alpha, beta);
    fill(mine, len, r->rank, 0, 3);
    TH_CHECK(tl->mem_expose(tc, mine, len, &key, &handle) == BRAID_OK &&
                 key.addr == (uint64_t)(uintptr_t)mine && key.len == len,
             "mem_expose");
    TH_CHECK(r->oob.allgather(r->oob.ctx, &key, keys, sizeof(key)) == BRAID_OK,
             "key exchange");
    static const size_t offs[][2] = {{0, 0},          {0, 1},
                                     {4095, 2},       {1, 4097},
                                     {12345, 700000}, {0, (size_t)3 << 20}};
    for (int k = 1; k < n; k++) {
        int peer = (r->rank + k) % n;
        for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
            size_t off = offs[i][0], cnt = offs[i][1];
            memset(got, 0, cnt ? cnt : 1);
            req.active = 1;
            braid_status_t st =
                tl->get(tc, peer, &keys[peer], off, got, cnt, &req);
            TH_CHECK(st == BRAID_OK && !req.active,
                     "get %zu at %zu from %d: "
                     "%s",
                     cnt, off, peer, th_last_error());
            /* fill() writes pattern(src, dst, k, i) at byte i. */
            for (size_t b = 0; b < cnt; b++)
                if (got[b] != pattern(peer, 0, 3, off + b)) {
                    TH_CHECK(0, "get from %d: byte %zu of %zu at %zu wrong",
                             peer, b, cnt, off);
                    break;
                }
        }
        req.active = 1;
        TH_CHECK(tl->get(tc, peer, &keys[peer], len - 4, got, 8, &req) ==
                         BRAID_ERR_INVALID_ARG &&
                     strstr(th_last_error(), "outside") != NULL,
                 "a get past the exposed range is refused: %s",
                 th_last_error());
    }
    if (n > 1)
        TH_CHECK(tl->get(tc, n, &keys[0], 0, got, 8, &req) ==
                         BRAID_ERR_INVALID_ARG &&
                     tl->get(tc, r->rank, &keys[0], 0, got, 8, &req) ==
                         BRAID_ERR_INVALID_ARG,
                 "a get from no peer (or from itself) is refused");
    th_barrier(r); /* nobody reads `mine` any more */
    tl->mem_unexpose(tc, handle);
    free(keys);
    free(mine);
    free(got);
}

/* Reads of buffers from braid_mem_alloc come from the owner's file mapped
 * by the reader, not through process_vm_readv: the owner takes its own
 * access to the buffer away (PROT_NONE, which process_vm_readv obeys) and
 * its peers still read every range right, where a get from a private
 * buffer so protected fails.  Two rounds: the second allocation likely
 * takes the first one's fd number, and must not be read through the first
 * one's mapping (a new inode). */
static void get_protected(th_rank_t *r, void *tc, unsigned char *mine,
                          size_t len, int round, int mapped)
{
    const braid_transport_t   *tl  = r->tl;
    const int                  n   = r->size;
    unsigned char             *got = malloc(len);
    braid_rkey_t               key, *keys = calloc((size_t)n, sizeof(key));
    void                      *handle = NULL;
    braid_treq_t               req;
    static const unsigned char zero[BRAID_RKEY_BYTES];

    fill(mine, len, r->rank, round, 5);
    TH_CHECK(tl->mem_expose(tc, mine, len, &key, &handle) == BRAID_OK,
             "mem_expose");
    TH_CHECK((memcmp(key.key, zero, sizeof(zero)) != 0) == mapped,
             "the key %s mappable", mapped ? "is" : "is not");
    TH_CHECK(r->oob.allgather(r->oob.ctx, &key, keys, sizeof(key)) == BRAID_OK,
             "key exchange");
    TH_CHECK(mprotect(mine, len, PROT_NONE) == 0, "mprotect");
    th_barrier(r);
    static const size_t offs[][2] = {
        {0, 1}, {4095, 2}, {12345, 700000}, {0, (size_t)3 << 20}};
    for (int k = 1; k < n; k++) {
        int peer = (r->rank + k) % n;
        for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
            size_t off = offs[i][0], cnt = offs[i][1];
            memset(got, 0, cnt);
            braid_status_t st =
                tl->get(tc, peer, &keys[peer], off, got, cnt, &req);
            if (!mapped) {
                TH_CHECK(st == BRAID_ERR_TRANSPORT,
                         "a get from %d's protected private buffer fails "
                         "(%s)",
                         peer, braid_status_str(st));
                break;
            }
            TH_CHECK(st == BRAID_OK, "round %d: get %zu at %zu from %d: %s",
                     round, cnt, off, peer, th_last_error());
            for (size_t b = 0; b < cnt; b++)
                if (got[b] != pattern(peer, round, 5, off + b)) {
                    TH_CHECK(0,
                             "round %d: mapped get from %d: byte %zu of "
                             "%zu at %zu wrong",
                             round, peer, b, cnt, off);
                    break;
                }
        }
    }
    th_barrier(r); /* nobody reads `mine` any more */
    TH_CHECK(mprotect(mine, len, PROT_READ | PROT_WRITE) == 0, "mprotect");
    tl->mem_unexpose(tc, handle);
    free(keys);
    free(got);
}

static void test_get_mapped(th_rank_t *r, void *tc)
{
    const size_t len = (size_t)3 << 20;
    double       alpha, beta;
    char         why[160] = "";

    TH_CHECK(r->tl->get_link(tc, &alpha, &beta, why, sizeof(why)) ==
                     BRAID_OK &&
                 strstr(why, "braid_mem_alloc buffers mapped") != NULL,
             "the get path maps braid_mem_alloc buffers: %s", why);
    for (int round = 0; round < 2; round++) {
        unsigned char *mine = NULL;
        TH_CHECK(braid_mem_alloc(len, (void **)&mine) == BRAID_OK,
                 "braid_mem_alloc: %s", th_last_error());
        if (mine == NULL)
            return;
        get_protected(r, tc, mine, len, round, 1);
        TH_CHECK(braid_mem_free(mine) == BRAID_OK, "braid_mem_free");
    }
    unsigned char *priv = mmap(NULL, len, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TH_CHECK(priv != MAP_FAILED, "mmap");
    if (priv != MAP_FAILED) {
        get_protected(r, tc, priv, len, 2, 0);
        munmap(priv, len);
    }
}

/* Without the get path (BRAID_SHM_CMA=off, or the kernel refusing: both
 * ranks non-dumpable and without CAP_SYS_PTRACE), every rank agrees there
 * is none, says why, and get refuses; a malformed BRAID_SHM_CMA fails
 * comm_create, pointing at the position. */
static int no_get(th_rank_t *r, void *arg)
{
    const braid_transport_t *tl  = r->tl;
    const char              *how = arg;
    int                      nodes[16];
    braid_topo_t             topo  = one_host(r, nodes);
    void                    *tc    = NULL;
    double                   alpha = 1, beta = 1;
    char                     why[160] = "";
    braid_rkey_t             key      = {.addr = 4096, .len = 8};
    braid_treq_t             req;
    unsigned char            buf[8];

    if (strcmp(how, "off") == 0) {
        setenv("BRAID_SHM_CMA", "off", 1);
    } else if (strcmp(how, "bad") == 0) {
        setenv("BRAID_SHM_CMA", "offf", 1);
        TH_CHECK(tl->comm_create(tl, r->svc, &r->oob, &topo, &tc) ==
                         BRAID_ERR_PARSE &&
                     tc == NULL &&
                     strstr(th_last_error(), "position 3") != NULL,
                 "a malformed BRAID_SHM_CMA fails comm_create: %s",
                 th_last_error());
        return 0;
    } else {
        /* A real refusal: a process that is not dumpable may be read only
         * by one with CAP_SYS_PTRACE, which these ranks drop. */
        struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct   caps[2];
        TH_CHECK(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0, "not dumpable");
        if (syscall(SYS_capget, &hdr, caps) == 0) {
            caps[0].effective &= ~(1u << CAP_SYS_PTRACE);
            caps[0].permitted &= ~(1u << CAP_SYS_PTRACE);
            TH_CHECK(syscall(SYS_capset, &hdr, caps) == 0, "drop "
                                                           "CAP_SYS_PTRACE");
        }
    }
    TH_CHECK(tl->comm_create(tl, r->svc, &r->oob, &topo, &tc) == BRAID_OK,
             "comm_create without the get path (%s)", how);
    if (tc == NULL)
        return 1;
    braid_status_t st = tl->get_link(tc, &alpha, &beta, why, sizeof(why));
    if (r->size == 1) {
        /* Nobody to read: the path is there, vacuously (unless off). */
        TH_CHECK(strcmp(how, "off") == 0 ? st == BRAID_ERR_UNAVAILABLE
                                         : st == BRAID_OK,
                 "one rank: get_link %d: %s", st, why);
    } else {
        TH_CHECK(st == BRAID_ERR_UNAVAILABLE,
                 "get_link says there is no get path (%s)", how);
        TH_CHECK(strcmp(how, "off") == 0
                     ? strstr(why, "BRAID_SHM_CMA=off") != NULL
                     : strstr(why, "not permitted") != NULL,
                 "and why: %s", why);
        TH_CHECK(tl->get(tc, (r->rank + 1) % r->size, &key, 0, buf, 8, &req) ==
                     BRAID_ERR_NOT_SUPPORTED,
                 "get refuses");
    }
    th_barrier(r);
    tl->comm_destroy(tc);
    return 0;
}

/* -------------------------------------------------------------- scenario */

/* arg: NULL, or the BRAID_SLEEP_POLLS every rank is given (the core's
 * sleep policy, which th_wait plays). */
static int scenario(th_rank_t *r, void *arg)
{
    const braid_transport_t *tl = r->tl;
    int                      nodes[16], two_hosts[16];
    char                     why[256] = "";
    void                    *tc       = NULL;
    braid_topo_t             topo     = one_host(r, nodes);
    int                      fds0     = th_count_fds();
    braid_link_t             link     = {.struct_size = sizeof(braid_link_t)};

    if (arg != NULL) {
        th_set_sleep_polls((unsigned)atoi(arg));
    }
    TH_CHECK(tl->probe(tl, r->svc, why, sizeof(why)) == BRAID_OK, "probe: %s",
             why);
    TH_CHECK(tl->caps == (BRAID_CAP_PUT_SIGNAL | BRAID_CAP_SENDRECV |
                          BRAID_CAP_GET | BRAID_CAP_LOAD),
             "caps");

    braid_topo_t multi = tu_topo(r->size, two_hosts);
    for (int i = 0; i < r->size; i++) {
        two_hosts[i] = i % 2;
    }
    multi.kind   = BRAID_TOPO_SWITCH;
    multi.nnodes = 2;
    multi.ppn    = (r->size + 1) / 2;
    tc           = (void *)1;
    TH_CHECK(tl->comm_create(tl, r->svc, &r->oob, &multi, &tc) ==
                     BRAID_ERR_UNAVAILABLE &&
                 tc == NULL,
             "comm_create refuses 2 hosts");
    TH_CHECK(strstr(th_last_error(), "2 hosts") != NULL, "refusal says why");

    TH_CHECK(tl->comm_create(tl, r->svc, &r->oob, &topo, &tc) == BRAID_OK,
             "comm_create");
    if (tc == NULL) {
        return 1;
    }
    TH_CHECK(th_count_shm_names(getpid()) == 0,
             "segments unlinked right after comm_create");
    tl->link(tc, &link);
    TH_CHECK(link.alpha_us > 0 && link.alpha_us < 1 && link.beta_gbps >= 1,
             "link %g us %g GB/s", link.alpha_us, link.beta_gbps);

    test_put_signal(r, tc);
    test_mem_peer(r, tc);
    test_get(r, tc);
    test_get_mapped(r, tc);
    test_zero_and_inline(r, tc);
    test_all_pairs(r, tc);
    test_reverse_order(r, tc, 1);
    test_reverse_order(r, tc, 0);
    test_segments(r, tc);
    test_same_tag_fifo(r, tc);
    test_big(r, tc);
    test_mismatch(r, tc);
    test_cancel(r, tc);
    unsigned char *abandoned = test_abandon(r, tc);

    tl->comm_destroy(tc);
    free(abandoned);
    TH_CHECK(th_count_shm_maps() == 0, "no segment mapped after comm_destroy");
    TH_CHECK(th_count_shm_names(getpid()) == 0, "no segment left in /dev/shm");
    TH_CHECK(th_count_fds() == fds0, "fds: %d before, %d after", fds0,
             th_count_fds());
    return 0;
}

/* The last rank cannot open any file: comm_create and mem_alloc fail on
 * every rank, leaving nothing behind, and the ranks can try again. */
static int failure_paths(th_rank_t *r, void *arg)
{
    const braid_transport_t *tl = r->tl;
    int                      nodes[16];
    braid_topo_t             topo = one_host(r, nodes);
    int           fds0 = th_count_fds(), victim = r->rank == r->size - 1;
    int           maps1 = 0, fds1 = fds0;
    struct rlimit old;
    void         *tc = NULL;
    braid_rmem_t  mem;

    (void)arg;
    getrlimit(RLIMIT_NOFILE, &old);
    for (int step = 0; step < 2; step++) {
        if (victim) {
            /* The lowest free fd is the limit: the next open fails. */
            int           fd  = dup(0);
            struct rlimit low = {(rlim_t)fd, old.rlim_max};
            close(fd);
            setrlimit(RLIMIT_NOFILE, &low);
        }
        braid_status_t st =
            step == 0 ? tl->comm_create(tl, r->svc, &r->oob, &topo, &tc)
                      : tl->mem_alloc(tc, 4096, &mem);
        if (victim) {
            setrlimit(RLIMIT_NOFILE, &old);
        }
        TH_CHECK(st != BRAID_OK, "%s must fail on every rank",
                 step ? "mem_alloc" : "comm_create");
        TH_CHECK(victim ? strstr(th_last_error(), "shm_open") != NULL
                        : strstr(th_last_error(), "rank") != NULL,
                 "error names the cause: %s", th_last_error());
        TH_CHECK(th_count_shm_maps() == maps1, "mappings after the failed %s",
                 step ? "mem_alloc" : "comm_create");
        TH_CHECK(th_count_fds() == fds1,
                 "fds after the failure: %d, "
                 "expected %d",
                 th_count_fds(), fds1);
        TH_CHECK(th_count_shm_names(getpid()) == 0, "names after the failure");
        if (step == 0) {
            TH_CHECK(tl->comm_create(tl, r->svc, &r->oob, &topo, &tc) ==
                         BRAID_OK,
                     "comm_create after a failed one");
            maps1 = th_count_shm_maps(); /* the fifo segments */
            fds1  = th_count_fds();      /* and a pidfd per peer */
            TH_CHECK(maps1 == r->size, "one fifo mapping per rank: %d", maps1);
        }
    }
    TH_CHECK(tl->mem_alloc(tc, 4096, &mem) == BRAID_OK, "mem_alloc after a "
                                                        "failed one");
    tl->mem_free(tc, &mem);
    tl->comm_destroy(tc);
    TH_CHECK(th_count_shm_maps() == 0 && th_count_fds() == fds0, "clean end");
    return 0;
}

/* The last rank dies right after comm_create: a receive from it and a flag
 * it never writes end in BRAID_ERR_PEER naming it, not in the timeout. */
static int dead_peer(th_rank_t *r, void *arg)
{
    const braid_transport_t *tl = r->tl;
    int                      nodes[16];
    braid_topo_t             topo = one_host(r, nodes);
    void                    *tc   = NULL;
    braid_rmem_t             mem;
    braid_treq_t             req;
    unsigned char            buf[8];
    braid_status_t           st;
    double                   t0;
    unsigned                 polls = 0;
    const int                dead  = r->size - 1;

    (void)arg;
    if (tl->comm_create(tl, r->svc, &r->oob, &topo, &tc) != BRAID_OK ||
        tl->mem_alloc(tc, 4096, &mem) != BRAID_OK) {
        TH_CHECK(0, "setup");
        return 1;
    }
    if (r->rank == dead) {
        _exit(0); /* no clean-up at all, as if killed */
    }
    t0 = th_now();
    TH_CHECK(tl->irecv(tc, dead, 5, buf, 8, &req) == BRAID_OK, "irecv");
    st = th_wait(r, tc, &req, 1);
    TH_CHECK(st == BRAID_ERR_PEER, "receive from a dead rank: %s",
             th_status_str(st));
    TH_CHECK(strstr(th_last_error(), "has exited") != NULL,
             "the error names the dead rank: %s", th_last_error());
    do {
        st = tl->progress(tc);
        th_relax(r, &polls);
    } while (st == BRAID_OK && th_now() - t0 < 15);
    TH_CHECK(st == BRAID_ERR_PEER,
             "progress while polling a flag the dead "
             "rank never writes: %s",
             th_status_str(st));
    TH_CHECK(th_now() - t0 < 10, "found within seconds (%.1f s)",
             th_now() - t0);
    tl->mem_free(tc, &mem);
    tl->comm_destroy(tc);
    return 0;
}

int main(int argc, char **argv)
{
    int                      counts[16] = {1, 2, 3, 4, 8}, ncounts = 5;
    const braid_transport_t *tl;
    int                      failed = 0;
    double                   t0     = th_now();

    if (argc < 2) {
        fprintf(stderr, "usage: %s libbraid-shm.so [ranks...]\n", argv[0]);
        return 2;
    }
    tl = th_load(argv[1]);
    if (argc > 2) {
        ncounts = 0;
        for (int i = 2; i < argc && ncounts < 16; i++) {
            int n = atoi(argv[i]);
            if (n < 1 || n > 16) {
                fprintf(stderr, "ranks must be 1..16\n");
                return 2;
            }
            counts[ncounts++] = n;
        }
    }
    for (int i = 0; i < ncounts; i++) {
        double t = th_now();
        int    f = th_run(tl, counts[i], scenario, NULL, 60, "scenario");
        printf("%s scenario with %d rank(s) (%.2f s)\n", f ? "FAIL" : "ok",
               counts[i], th_now() - t);
        failed += f;
    }
    /* Sleeping waiters (oversubscribed only), in the wait hook. */
    if (argc == 2) {
        int f = th_run(tl, 8, scenario, "2", 60, "scenario, sleep polls 2");
        printf("%s scenario with 8 ranks, futex sleep on (wait() after 2 "
               "idle polls)\n",
               f ? "FAIL" : "ok");
        failed += f;
    }
    if (argc == 2) {
        int f = th_run(tl, 3, dead_peer, NULL, 60, "dead peer");
        printf("%s dead peer detected\n", f ? "FAIL" : "ok");
        failed += f;
    }
    /* No get path: switched off, malformed switch, refused by the kernel. */
    for (int i = 0; argc == 2 && i < 3; i++) {
        static char *how[] = {"off", "bad", "eperm"};
        for (int n = 1; n <= 3; n += 2) {
            int f = th_run(tl, n, no_get, how[i], 60, "no get path");
            printf("%s no get path (%s) with %d rank(s)\n", f ? "FAIL" : "ok",
                   how[i], n);
            failed += f;
        }
    }
    for (int n = 1; n <= 3; n += 2) {
        int f = th_run(tl, n, failure_paths, NULL, 60, "failure paths");
        printf("%s failure paths with %d rank(s)\n", f ? "FAIL" : "ok", n);
        failed += f;
    }
    printf("%s (%.2f s)\n", failed ? "FAILED" : "all passed", th_now() - t0);
    return failed ? 1 : 0;
}
