/* The measurements of a calibration (calib.h): what one rank sees.
 *
 * A path is measured in three exchanges, each repeated (this machine, and
 * most, is shared):
 *   pair   two ranks exchange a small message while the others wait in the
 *          bootstrap channel (asleep, off the CPU): the latency of the link
 *          alone.  The pair is rank 0 and the first rank of another host,
 *          or rank 1 on one host;
 *   all    every rank sends a small message to the next and receives one
 *          from the previous at once, as a stage of a collective does: the
 *          latency of a stage with every rank busy.  On a host with more
 *          ranks than cores it includes the scheduler's hand-offs;
 *   big    the same with BIG_BYTES: the bandwidth of a rank while every
 *          rank moves data, which is what a collective's stages get (the
 *          ranks of a host share its memory and cores; across hosts the
 *          cost models add the network's own contention);
 *   out    the same again with messages so large that the buffers of all
 *          ranks of a host exceed its last-level cache several times
 *          (braid_calib_big_bytes): the bandwidth of a call whose data
 *          comes from and goes to memory.  Few repetitions: each moves
 *          megabytes, and the cost of a communicator's creation must stay
 *          a fraction of a second.
 * The get path (single-copy reads, where the transport has one and the
 * header declares it) is timed alike: each rank reads its left neighbour's
 * exposed buffer; nobody waits for anybody, so `all` is a read's latency
 * under contention and carries no hand-off.  It is timed twice: reading
 * malloc's memory (get) and reading braid_mem_alloc's (mget), which a
 * transport may reach another way (shm maps it and copies with loads,
 * where malloc's memory goes through the kernel), so the cost model can
 * price a call by the memory its buffers come from.
 * Small exchanges are timed in blocks of SMALL_BLOCK, summarised by the
 * median block: a rank may run an exchange or two ahead of its neighbours
 * (its left one delivered early), so one exchange alone can take nothing,
 * while a block takes that many stages.  They are far shorter than a time
 * slice, and what varies is the hand-off between ranks, which the model
 * must include.  A busy machine still deschedules a rank for a whole time
 * slice now and then, which inflates every block it falls in; the small
 * measurements therefore run SMALL_REPEATS times and keep the fastest
 * median, so that one such moment cannot flip the ranking of candidates
 * at small sizes (it lands on one path and not on the other).  Large
 * exchanges are summarised by their fastest: a
 * repetition the kernel gave to another program (a busy machine) says
 * nothing about the transport, and every candidate would suffer alike.
 * Waiting follows the core's rule (wait.c): yield after every poll when the
 * host has more ranks than cores, else spin a while first. */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/calib.h"
#include "comm/comm.h"
#include "util/env.h"
#include "util/log.h"
#include "util/stats.h"

/* The flag at offset 0 of the area, the data a cache line after it. */
#define DATA_OFF    ((size_t)64)
#define SMALL_BYTES 8
/* Large enough that per-message costs vanish against the copy (they are a
 * few microseconds), small enough that a repetition fits in a time slice
 * and the whole stays a fraction of a second on 8 ranks on 2 cores over
 * TCP.  It stays in the caches, as the pieces that pipelined algorithms
 * move do. */
#define BIG_BYTES ((size_t)512 << 10)
/* A fresh transport's first messages fault in its pages (shm: each of a
 * peer's 32 cells on first use), which no later call pays. */
#define SMALL_WARMUP 40
#define SMALL_BLOCK  16
#define SMALL_ITERS  (7 * SMALL_BLOCK)
/* The small exchanges' repeats (the fastest kept; see the top). */
#define SMALL_REPEATS 3
#define BIG_WARMUP    1
#define BIG_ITERS     7
/* The out-of-cache exchange: the buffers of a host's ranks together
 * OUT_LLC_TIMES its last-level cache, so that most of what a rank reads
 * was evicted since it was written; each rank's message at least
 * OUT_MIN_TIMES the in-cache one, so the two points differ even where the
 * cache is unknown or tiny, and at most OUT_MAX_BYTES, so that measuring
 * stays cheap on a host of few ranks with a large cache (a send/receive
 * path through bounded cells on a host with more ranks than cores is slow
 * enough that a larger exchange would cost seconds per shape).  Every buffer
 * is written before (a buffer never written maps the kernel's shared zero
 * page, which always hits the cache; a page touched first during a repetition
 * pays its fault there).  A peer's mapping of the put area, and the pages a
 * single-copy read pins, are first touched by the exchange itself, so one
 * repetition warms them up; the faster of OUT_ITERS is kept. */
#define OUT_LLC_TIMES   2
#define OUT_MIN_TIMES   8
#define OUT_MAX_BYTES   ((size_t)16 << 20)
#define OUT_DEFAULT_LLC ((size_t)32 << 20)
#define OUT_WARMUP      1
#define OUT_ITERS       2
#define SPIN_S          20e-6
/* A measurement that has not finished by then has met something wrong. */
#define DEADLINE_MAX_S 20.0
/* Tags of the calibration: a call number no call reaches before the
 * calibration has ended (every message of it is matched by then). */
#define CALIB_SEQ 0xfffffeu

typedef enum { PATH_SR, PATH_PUT, PATH_GET } path_t;

typedef struct exch {
    braid_comm_t *comm;
    braid_tl_t   *tl;
    path_t        path;
    braid_rmem_t *mem;         /* PATH_PUT: the area written into */
    const void   *keys;        /* PATH_GET: every rank's braid_rkey_t */
    int           left, right; /* -1: this rank sits out */
    double        deadline;
    unsigned      polls;
    double        wait_start;
} exch_t;

static double fastest(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m)
            m = v[i];
    return m;
}

/* The second rank of the pair: the first on another host, or rank 1. */
static int pair_peer(const braid_comm_t *comm)
{
    for (int r = 1; r < comm->size; r++)
        if (comm->node_of_rank[r] != comm->node_of_rank[0])
            return r;
    return 1;
}

static void setup(exch_t *x, braid_comm_t *comm, braid_tl_t *tl, int pair)
{
    path_t        path = x->path;
    braid_rmem_t *mem  = x->mem;
    const void   *keys = x->keys;
    memset(x, 0, sizeof(*x));
    x->comm = comm;
    x->tl   = tl;
    x->path = path;
    x->mem  = mem;
    x->keys = keys;
    double limit =
        comm->timeout_s < DEADLINE_MAX_S ? comm->timeout_s : DEADLINE_MAX_S;
    x->deadline = braid_now_s() + limit;
    int n = comm->size, r = comm->rank;
    if (!pair) {
        x->right = (r + 1) % n;
        x->left  = (r + n - 1) % n;
        return;
    }
    int peer = pair_peer(comm);
    x->left = x->right = r == 0 ? peer : r == peer ? 0 : -1;
}

/* Between polls: the core's waiting rule. */
static braid_status_t pause_poll(exch_t *x)
{
    double now = 0;
    if ((++x->polls & 63u) == 0 || x->wait_start == 0) {
        now = braid_now_s();
        if (x->wait_start == 0)
            x->wait_start = now;
        if (now > x->deadline)
            return braid_error(BRAID_ERR_TIMEOUT,
                               "calibration of transport "
                               "%s: no progress within %.0f s (set "
                               "BRAID_CALIBRATE=0 to skip it)",
                               x->tl->ops->name, x->deadline - x->wait_start);
    }
    if (x->comm->oversubscribed || (now != 0 && now - x->wait_start > SPIN_S))
        sched_yield();
    return BRAID_OK;
}

static void cancel(exch_t *x, braid_treq_t *a, braid_treq_t *b)
{
    if (a->active)
        x->tl->ops->cancel(x->tl->tcomm, a);
    if (b != NULL && b->active)
        x->tl->ops->cancel(x->tl->tcomm, b);
}

/* One send/receive exchange: receive len from left, send len to right. */
static braid_status_t sr_once(exch_t *x, unsigned step, const void *sbuf,
                              void *rbuf, size_t len)
{
    const braid_transport_t *ops = x->tl->ops;
    braid_treq_t             rr = {0}, sr = {0};
    uint64_t                 tag = BRAID_TAG(CALIB_SEQ, step);
    braid_status_t st = ops->irecv(x->tl->tcomm, x->left, tag, rbuf, len, &rr);
    if (st == BRAID_OK)
        st = ops->isend(x->tl->tcomm, x->right, tag, sbuf, len, &sr);
    x->wait_start = 0;
    while (st == BRAID_OK && (rr.active || sr.active)) {
        braid_status_t a = ops->test(x->tl->tcomm, &rr);
        braid_status_t b = ops->test(x->tl->tcomm, &sr);
        if (a != BRAID_OK && a != BRAID_INPROGRESS)
            st = a;
        else if (b != BRAID_OK && b != BRAID_INPROGRESS)
            st = b;
        else if (rr.active || sr.active)
            st = pause_poll(x);
    }
    if (st != BRAID_OK)
        cancel(x, &rr, &sr);
    return st;
}

/* One put exchange: put len (and the flag value) to right, wait for
 * left's flag to reach value. */
static braid_status_t put_once(exch_t *x, braid_rmem_t *mem, uint64_t value,
                               const void *sbuf, size_t len)
{
    const braid_transport_t *ops  = x->tl->ops;
    braid_treq_t             req  = {0};
    uint64_t                *flag = (uint64_t *)mem->local;
    braid_status_t st = ops->put_signal(x->tl->tcomm, mem, x->right, DATA_OFF,
                                        sbuf, len, 0, value, &req);
    x->wait_start     = 0;
    while (st == BRAID_OK) {
        if (req.active) {
            braid_status_t t = ops->test(x->tl->tcomm, &req);
            if (t != BRAID_OK && t != BRAID_INPROGRESS) {
                st = t;
                break;
            }
        } else if ((st = ops->progress(x->tl->tcomm)) != BRAID_OK) {
            break;
        }
        if (!req.active && __atomic_load_n(flag, __ATOMIC_ACQUIRE) >= value)
            break;
        st = pause_poll(x);
    }
    if (st != BRAID_OK)
        cancel(x, &req, NULL);
    return st;
}

#ifdef BRAID_CAP_GET
/* One read of len bytes of the left rank's exposed buffer. */
static braid_status_t get_once(exch_t *x, void *rbuf, size_t len)
{
    const braid_transport_t *ops = x->tl->ops;
    const braid_rkey_t      *key = (const braid_rkey_t *)x->keys + x->left;
    braid_treq_t             req = {0};
    braid_status_t           st =
        ops->get(x->tl->tcomm, x->left, key, 0, rbuf, len, &req);
    x->wait_start = 0;
    while (st == BRAID_OK && req.active) {
        braid_status_t t = ops->test(x->tl->tcomm, &req);
        if (t != BRAID_OK && t != BRAID_INPROGRESS)
            st = t;
        else if (req.active)
            st = pause_poll(x);
    }
    if (st != BRAID_OK)
        cancel(x, &req, NULL);
    return st;
}
#endif

static braid_status_t once(exch_t *x, uint64_t value, unsigned step,
                           const void *sbuf, void *rbuf, size_t len)
{
    switch (x->path) {
    case PATH_PUT: return put_once(x, x->mem, value, sbuf, len);
#ifdef BRAID_CAP_GET
    case PATH_GET: return get_once(x, rbuf, len);
#endif
    default: return sr_once(x, step & 0xffffu, sbuf, rbuf, len);
    }
}

/* Microseconds per exchange on this rank over iters exchanges (after
 * warmup) in blocks of block: the median block, or with block 1 the
 * fastest exchange; 0 when it sits out.  put: mem != NULL, flags counted
 * from *flag_base. */
static braid_status_t run(double *us, exch_t *x, uint64_t *flag_base,
                          const void *sbuf, void *rbuf, size_t len, int warmup,
                          int iters, int block, unsigned *step)
{
    int            nblocks = iters / block;
    double        *t       = malloc(sizeof(double) * (size_t)nblocks);
    braid_status_t st      = t ? braid_bootstrap_barrier(x->comm->bs)
                               : braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    double         t0      = 0;
    *us                    = 0;
    for (int i = 0; st == BRAID_OK && i < warmup + iters; i++) {
        uint64_t value = ++*flag_base;
        (*step)++;
        if (x->left < 0)
            continue;
        if (i >= warmup && (i - warmup) % block == 0)
            t0 = braid_now_s();
        st = once(x, value, *step, sbuf, rbuf, len);
        if (i >= warmup && (i - warmup) % block == block - 1)
            t[(i - warmup) / block] = (braid_now_s() - t0) * 1e6 / block;
    }
    if (st == BRAID_OK && x->left >= 0)
        *us = block == 1 ? fastest(t, nblocks) : braid_median(t, nblocks);
    free(t);
    return st;
}

/* One path being measured: its exchange, its counters, its figures. */
typedef struct path_run {
    exch_t              x; /* path, mem or keys set */
    uint64_t            flag;
    unsigned            step;
    braid_calib_path_t *out;
} path_run_t;

/* pair and all of one path, once (repeat k): the fastest so far kept.  The
 * same ranks sit out of the pair every time (0 then). */
static braid_status_t measure_small(path_run_t *p, braid_comm_t *comm,
                                    braid_tl_t *tl, const void *sbuf,
                                    void *rbuf, int k)
{
    double pair_us = 0, all_us = 0;
    int    warm = k == 0 ? SMALL_WARMUP : SMALL_BLOCK;
    setup(&p->x, comm, tl, 1);
    braid_status_t st = run(&pair_us, &p->x, &p->flag, sbuf, rbuf, SMALL_BYTES,
                            warm, SMALL_ITERS, SMALL_BLOCK, &p->step);
    setup(&p->x, comm, tl, 0);
    if (st == BRAID_OK)
        st = run(&all_us, &p->x, &p->flag, sbuf, rbuf, SMALL_BYTES, warm,
                 SMALL_ITERS, SMALL_BLOCK, &p->step);
    if (k == 0 || pair_us < p->out->pair_us)
        p->out->pair_us = pair_us;
    if (k == 0 || all_us < p->out->all_us)
        p->out->all_us = all_us;
    return st;
}

/* A large exchange of one path (len bytes), after its small ones: the
 * bandwidth in *gbps. */
static braid_status_t measure_big(double *gbps, path_run_t *p,
                                  braid_comm_t *comm, braid_tl_t *tl,
                                  const void *sbuf, void *rbuf, size_t len,
                                  int warmup, int iters)
{
    double big_us = 0;
    setup(&p->x, comm, tl, 0);
    braid_status_t st = run(&big_us, &p->x, &p->flag, sbuf, rbuf, len, warmup,
                            iters, 1, &p->step);
    /* The slope between the small and the large exchange; a large one no
     * slower than a small one (noise) leaves the bandwidth of the large
     * one alone. */
    double extra = big_us - p->out->all_us;
    double bytes = (double)(len - SMALL_BYTES);
    if (extra <= 0.0)
        extra = big_us > 0.0 ? big_us : 1.0;
    *gbps = bytes / extra / 1e3;
    return st;
}

size_t braid_calib_big_bytes(size_t llc, int ppn)
{
    if (llc == 0)
        llc = OUT_DEFAULT_LLC;
    if (ppn < 1)
        ppn = 1;
    /* Each rank holds a send and a receive buffer of the message. */
    size_t b = OUT_LLC_TIMES * llc / 2 / (size_t)ppn;
    if (b < OUT_MIN_TIMES * BIG_BYTES)
        b = OUT_MIN_TIMES * BIG_BYTES;
    if (b > OUT_MAX_BYTES)
        b = OUT_MAX_BYTES;
    return b & ~(size_t)4095;
}

/* "32768K" and the like, as sysfs writes a cache's size. */
static size_t parse_size(const char *s)
{
    char         *end;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s)
        return 0;
    return (size_t)v * (*end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1);
}

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return ok ? 0 : -1;
}

/* sysfs first: it describes the cache a CPU sees (sysconf may sum a
 * virtual machine host's); the highest level that holds data. */
size_t braid_calib_llc_bytes(void)
{
    size_t best       = 0;
    int    best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], buf[64];
        int  level;
        snprintf(path, sizeof(path),
                 "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_line(path, buf, sizeof(buf)) != 0)
            break;
        level = atoi(buf);
        snprintf(path, sizeof(path),
                 "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (read_line(path, buf, sizeof(buf)) != 0 ||
            strcmp(buf, "Instruction") == 0)
            continue;
        snprintf(path, sizeof(path),
                 "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (read_line(path, buf, sizeof(buf)) != 0)
            continue;
        size_t size = parse_size(buf);
        if (size > 0 && level > best_level) {
            best_level = level;
            best       = size;
        }
    }
    if (best > 0)
        return best;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0)
        return (size_t)l3;
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 > 0)
        return (size_t)l2;
#endif
    return 0;
}

#ifdef BRAID_CAP_GET
/* Every rank exposes its send buffer for its right neighbour to read:
 * *keys gets every rank's key, *handle this rank's exposure (NULL when
 * it failed; the caller unexposes it after a barrier). */
static braid_status_t expose_get(braid_rkey_t **keys, void **handle,
                                 braid_comm_t *comm, braid_tl_t *tl,
                                 const void *sbuf, size_t len)
{
    const braid_transport_t *ops = tl->ops;
    braid_rkey_t             mine;
    memset(&mine, 0, sizeof(mine));
    *handle = NULL;
    *keys   = calloc((size_t)comm->size, sizeof(**keys));
    if (*keys == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "calibration: out of memory");
    /* No buffer: its allocation failed (the error says why). */
    braid_status_t st =
        sbuf == NULL ? BRAID_ERR_NO_MEMORY
                     : ops->mem_expose(tl->tcomm, sbuf, len, &mine, handle);
    if (st != BRAID_OK)
        *handle = NULL;
    /* Every rank takes part in the allgather, exposed or not: a rank
     * that failed says so in the agreement that follows (every rank
     * then fails), and the others read nothing from it meanwhile. */
    braid_status_t ast =
        braid_bootstrap_allgather(comm->bs, &mine, *keys, sizeof(mine));
    if (st != BRAID_OK)
        return st;
    if (ast != BRAID_OK)
        return ast;
    for (int r = 0; r < comm->size; r++)
        if ((*keys)[r].len != len)
            return braid_error(BRAID_ERR_TRANSPORT,
                               "calibration of %s: "
                               "rank %d could not expose its buffer",
                               ops->name, r);
    return BRAID_OK;
}
#endif

/* One transport being measured: its area (put), its exposed buffer (get)
 * and its paths. */
typedef struct tl_run {
    braid_tl_t       *tl;
    braid_calib_tl_t *out;
    braid_rmem_t      mem;
    int               have_mem;
    path_run_t        pr[4];
    int               np;
#ifdef BRAID_CAP_GET
    braid_rkey_t *keys;
    void         *handle;
    void         *mbuf; /* from braid_mem_alloc: the mget path's buffer */
    braid_rkey_t *mkeys;
    void         *mhandle;
#endif
} tl_run_t;

/* Its area and exposed buffer; collective, as the algorithms allocate. */
static braid_status_t tl_open(tl_run_t *r, braid_comm_t *comm, void *sbuf,
                              size_t big)
{
    const braid_transport_t *ops = r->tl->ops;
    braid_calib_tl_t        *out = r->out;
    braid_status_t           st;
    out->has_sr  = (ops->caps & BRAID_CAP_SENDRECV) != 0;
    out->has_put = (ops->caps & BRAID_CAP_PUT_SIGNAL) != 0 &&
                   ops->mem_alloc != NULL && ops->put_signal != NULL;
    if (out->has_sr)
        r->pr[r->np++] = (path_run_t){.x = {.path = PATH_SR}, .out = &out->sr};
    if (out->has_put) {
        if ((st = ops->mem_alloc(r->tl->tcomm, DATA_OFF + big, &r->mem)) !=
            BRAID_OK)
            return st;
        r->have_mem = 1;
        memset(r->mem.local, 0, DATA_OFF + big); /* its pages, before timing */
        r->pr[r->np++] = (path_run_t){.x = {.path = PATH_PUT, .mem = &r->mem},
                                      .out = &out->put};
    }
#ifdef BRAID_CAP_GET
    /* The get path, where this communicator has one (the transport said
     * so to every rank alike, transports.c). */
    out->has_get = BRAID_HAS(r->tl, braid_tl_t, caps) &&
                   (r->tl->caps & BRAID_CAP_GET) != 0;
    if (out->has_get) {
        if ((st = expose_get(&r->keys, &r->handle, comm, r->tl, sbuf, big)) !=
            BRAID_OK)
            return st;
        r->pr[r->np++] = (path_run_t){.x = {.path = PATH_GET, .keys = r->keys},
                                      .out = &out->get};
        /* Every rank allocates alike (the sizes agree), and a rank that
         * could not fails in expose_get's agreement with the others. */
        if ((st = braid_mem_alloc(big, &r->mbuf)) != BRAID_OK)
            r->mbuf = NULL;
        else
            memset(r->mbuf, 0x5a, big); /* its pages, before timing */
        if ((st = expose_get(&r->mkeys, &r->mhandle, comm, r->tl, r->mbuf,
                             big)) != BRAID_OK)
            return st;
        out->has_mget  = 1;
        r->pr[r->np++] = (path_run_t){
            .x = {.path = PATH_GET, .keys = r->mkeys}, .out = &out->mget};
    }
#else
    (void)comm;
    (void)sbuf;
#endif
    return BRAID_OK;
}

/* Whether peers may write into r's area or read its buffer. */
static int tl_shared(const tl_run_t *r)
{
#ifdef BRAID_CAP_GET
    return r->have_mem || r->keys != NULL || r->mkeys != NULL;
#else
    return r->have_mem;
#endif
}

static void tl_close(tl_run_t *r)
{
    if (r->have_mem)
        r->tl->ops->mem_free(r->tl->tcomm, &r->mem);
#ifdef BRAID_CAP_GET
    if (r->handle != NULL)
        r->tl->ops->mem_unexpose(r->tl->tcomm, r->handle);
    free(r->keys);
    if (r->mhandle != NULL)
        r->tl->ops->mem_unexpose(r->tl->tcomm, r->mhandle);
    free(r->mkeys);
    if (r->mbuf != NULL)
        braid_mem_free(r->mbuf);
#endif
}

/* Every path of every transport: the small exchanges of all of them in
 * turn, repeated, so that a busy stretch of the machine falls on one
 * repeat of every path rather than on every repeat of one (measured one
 * transport after the other, a stretch of a fraction of a second on a host
 * with more ranks than cores covered every repeat of one transport and
 * none of the next, and made it look slower than the other at small
 * sizes); then the large ones. */
braid_status_t braid_calib_measure_tls(struct braid_comm *comm,
                                       braid_tl_t *const *tls, int ntl,
                                       size_t                   big,
                                       braid_calib_tl_t *const *out)
{
    braid_status_t st    = BRAID_OK;
    int            nopen = 0;
    if (big < BIG_BYTES)
        big = BIG_BYTES;
    unsigned char *sbuf = malloc(big), *rbuf = malloc(big);
    tl_run_t      *runs = calloc(ntl > 0 ? (size_t)ntl : 1, sizeof(*runs));
    if (sbuf == NULL || rbuf == NULL || runs == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "calibration: out of memory");
        goto out;
    }
    /* Not zero: the compiler turns malloc and a zero memset into calloc,
     * which leaves fresh pages unmapped, and the first timed receive paid a
     * page fault per page (the out-of-cache exchange's first repetition,
     * and now and then its fastest). */
    memset(sbuf, 0x5a, big);
    memset(rbuf, 0xa5, big);
    for (; nopen < ntl && st == BRAID_OK; nopen++) {
        runs[nopen].tl  = tls[nopen];
        runs[nopen].out = out[nopen];
        st              = tl_open(&runs[nopen], comm, sbuf, big);
    }
    for (int k = 0; k < SMALL_REPEATS && st == BRAID_OK; k++)
        for (int t = 0; t < ntl && st == BRAID_OK; t++)
            for (int i = 0; i < runs[t].np && st == BRAID_OK; i++)
                st = measure_small(&runs[t].pr[i], comm, runs[t].tl, sbuf,
                                   rbuf, k);
    for (int t = 0; t < ntl && st == BRAID_OK; t++)
        for (int i = 0; i < runs[t].np && st == BRAID_OK; i++) {
            path_run_t *p = &runs[t].pr[i];
            st = measure_big(&p->out->beta_gbps, p, comm, runs[t].tl, sbuf,
                             rbuf, BIG_BYTES, BIG_WARMUP, BIG_ITERS);
            p->out->bytes = (double)BIG_BYTES;
        }
    for (int t = 0; t < ntl && st == BRAID_OK && big > BIG_BYTES; t++)
        for (int i = 0; i < runs[t].np && st == BRAID_OK; i++) {
            path_run_t *p = &runs[t].pr[i];
            st = measure_big(&p->out->big_beta_gbps, p, comm, runs[t].tl, sbuf,
                             rbuf, big, OUT_WARMUP, OUT_ITERS);
            p->out->big_bytes = (double)big;
        }
out:;
    /* Nobody may still write into an area or read a buffer when they go:
     * one barrier for all (every rank opened the same transports). */
    int shared = 0;
    for (int t = 0; t < nopen; t++)
        shared |= tl_shared(&runs[t]);
    if (shared) {
        braid_status_t bst = braid_bootstrap_barrier(comm->bs);
        if (st == BRAID_OK)
            st = bst;
    }
    for (int t = 0; t < nopen; t++)
        tl_close(&runs[t]);
    free(runs);
    free(sbuf);
    free(rbuf);
    return st;
}

braid_status_t braid_calib_measure_reduce(braid_comm_t *comm, double *gbps)
{
    const braid_services_t *svc   = braid_core_services();
    size_t                  count = BIG_BYTES / sizeof(float);
    float *a = calloc(count, sizeof(float)), *b = calloc(count, sizeof(float));
    double t[BIG_ITERS];
    braid_status_t st = BRAID_OK;
    if (a == NULL || b == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "calibration: out of memory");
        goto out;
    }
    for (size_t i = 0; i < count; i++)
        b[i] = (float)(i & 7);
    if ((st = braid_bootstrap_barrier(comm->bs)) != BRAID_OK)
        goto out;
    svc->reduce(a, b, count, BRAID_F32, BRAID_SUM); /* warm */
    for (int i = 0; i < BIG_ITERS; i++) {
        double t0 = braid_now_s();
        svc->reduce(a, b, count, BRAID_F32, BRAID_SUM);
        t[i] = (braid_now_s() - t0) * 1e6;
    }
    /* A rank reduces alone in this loop (a millisecond is shorter than a
     * time slice), but during a collective the ranks pinned to one CPU
     * take turns on it: each gets its share. */
    long   ncpu  = sysconf(_SC_NPROCESSORS_ONLN);
    double share = ncpu > 0 && comm->machine_ppn > ncpu
                       ? (double)ncpu / (double)comm->machine_ppn
                       : 1.0;
    double us    = fastest(t, BIG_ITERS);
    *gbps        = (double)BIG_BYTES / (us > 0 ? us : 1e-3) / 1e3 * share;
out:
    free(a);
    free(b);
    return st;
}
