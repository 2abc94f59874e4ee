/* The lowhop algorithms (oneshot, twoshot, allgather and reduce_scatter
 * "direct") driven in one process: n threads are the ranks, talking through
 * the unkind mock put-with-signal transport of mock_tl.c.
 *
 * For n = 1..8:
 *   matrix  every algorithm x dtype x op (reductions) x count {0, 1, 7,
 *           1031} x in place or not;
 *   large   a few cases of 1M+3 elements per algorithm;
 *   stress  200 back-to-back calls of random algorithm, dtype, op, size
 *           (so areas grow) and placement, ranks running at different
 *           speeds, with gaps in the call numbers as if other candidates
 *           ran in between: slot reuse, growth and the bank parity;
 *   mismatch (n >= 2) one call per algorithm in which the last rank's
 *           signature bits (task->sig32) differ from the others': every
 *           rank must fail it with BRAID_ERR_MISMATCH, none hang.
 * Each result must equal, bit for bit, a reference folded in rank order with
 * the tests' reference reducer (tests/common) -- which also makes it equal
 * across ranks --
 * the guard bytes after the receive buffer must be intact, and an
 * out-of-place send buffer unchanged.
 *
 * Usage: test_lowhop_algos [--quick] [--n N] [--seed S] [--verbose] */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/res.h"
#include "harness.h"
#include "lowhop.h"
#include "mock_tl.h"
#include "reference.h"

#define NALGOS       4
#define GUARD        64
#define GUARD_BYTE   0xA5
#define JUNK_BYTE    0xEE
#define BIG_COUNT    ((size_t)(1u << 20) + 3u)
#define CALL_LIMIT_S 30.0
#define MAX_REPORTS  20

static const braid_algo_t *const algos[NALGOS] = {
    &braid_lowhop_oneshot_algo,
    &braid_lowhop_twoshot_algo,
    &braid_lowhop_allgather_direct_algo,
    &braid_lowhop_reduce_scatter_direct_algo,
};
static const char *const algo_names[NALGOS] = {
    "oneshot", "twoshot", "allgather:direct", "reduce_scatter:direct"};
static const braid_dtype_t dtypes[]      = {BRAID_F32,  BRAID_I32, BRAID_F16,
                                            BRAID_BF16, BRAID_U8,  BRAID_F64,
                                            BRAID_I64};
static const char *const   dtype_names[] = {"f32", "f64", "f16", "bf16",
                                            "i32", "i64", "u8"};
static const char *const   op_names[] = {"sum", "prod", "min", "max", "avg"};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

static struct {
    uint64_t seed;
    int      quick;
    int      only_n;
    int      verbose;
    long     failures; /* atomic */
    long     calls;    /* atomic */
} g = {.seed = 0x10adb0b5eedull};

/* Process CPU time, for --verbose. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ values */

/* Element idx of rank r's input of the case with this seed.  Floats have
 * random mantissas and exponents, so the order of a sum shows in its bits;
 * products stay near 1 so they neither overflow nor vanish. */
static void gen_elem(void *buf, size_t pos, braid_dtype_t dt, braid_op_t op,
                     uint64_t seed, int r, size_t idx)
{
    uint64_t h  = ref_mix(seed ^ ref_mix(((uint64_t)(unsigned)r << 40) ^ idx));
    int      e  = (int)((h >> 40) % 24);
    double   f  = (double)(int64_t)(h % 16777215) - 8388607.0;
    double   nr = 1.0 + ((double)(int)((h >> 20) % 2001) - 1000.0) / 4096.0;

    switch (dt) {
    case BRAID_F32: {
        float v = op == BRAID_PROD ? (float)nr : (float)(f / (double)(1 << e));
        memcpy((char *)buf + pos * 4, &v, 4);
        break;
    }
    case BRAID_F64: {
        double v = op == BRAID_PROD
                       ? nr
                       : (double)(int64_t)(h >> 11) / 4503599627370496.0 *
                             (double)(1 << e);
        memcpy((char *)buf + pos * 8, &v, 8);
        break;
    }
    case BRAID_F16:
    case BRAID_BF16: {
        float v = op == BRAID_PROD ? (float)nr : (float)(f / 8388608.0 * 8.0);
        uint16_t b = dt == BRAID_F16 ? ref_f32_to_f16(v) : ref_f32_to_bf16(v);
        memcpy((char *)buf + pos * 2, &b, 2);
        break;
    }
    case BRAID_I32: {
        uint32_t v = (uint32_t)h;
        memcpy((char *)buf + pos * 4, &v, 4);
        break;
    }
    case BRAID_I64: memcpy((char *)buf + pos * 8, &h, 8); break;
    default: {
        unsigned char v             = (unsigned char)h;
        ((unsigned char *)buf)[pos] = v;
        break;
    }
    }
}

static void gen_block(void *buf, braid_dtype_t dt, braid_op_t op,
                      uint64_t seed, int r, size_t first, size_t count)
{
    for (size_t i = 0; i < count; i++)
        gen_elem(buf, i, dt, op, seed, r, first + i);
}

/* Reference of elements [first, first+count) of a reduction over n ranks:
 * left fold in rank order with the reference, then AVG's division. */
static void ref_reduce(void *out, void *tmp, braid_dtype_t dt, braid_op_t op,
                       uint64_t seed, int n, size_t first, size_t count)
{
    gen_block(out, dt, op, seed, 0, first, count);
    for (int r = 1; r < n; r++) {
        gen_block(tmp, dt, op, seed, r, first, count);
        ref_reduce2(out, out, tmp, count, dt, op);
    }
    ref_finish_avg(out, count, dt, op, n);
}

/* -------------------------------------------------------------------- ranks
 */

typedef struct world {
    int           n;
    mock_world_t *mw;
    /* large cases: inputs and reference built together (barriers) */
    void *big_in[MOCK_MAX_RANKS];
    void *big_ref;
    long  mm_ended[NALGOS]; /* mismatch phase: ranks done (atomic) */
} world_t;

typedef struct rank {
    world_t     *w;
    int          rank;
    mock_tl_t   *tcomm;
    braid_tl_t   tl;
    void        *state[NALGOS];
    braid_res_t *res[NALGOS]; /* the core's, per algorithm */
    uint64_t     seq;
    uint64_t     rng; /* this rank's own: speed jitter only */
    long         failures;
} rank_t;

typedef struct call_case {
    int           algo;
    braid_dtype_t dtype;
    braid_op_t    op;
    size_t        count; /* as in the public call */
    int           inplace;
    uint64_t      seed;
    uint64_t      seq_gap; /* calls of other candidates before this one */
    int           jitter;  /* ranks sleep at random before the call */
    int           big;     /* inputs and reference from world_t */
    uint32_t      sig32;   /* the call's signature bits (task->sig32) */
} call_case_t;

static uint64_t rank_rnd(rank_t *r)
{
    r->rng = ref_mix(r->rng);
    return r->rng;
}

static void describe(const call_case_t *c, const rank_t *r, char *out,
                     size_t len)
{
    snprintf(out, len, "n=%d rank=%d %s %s %s count=%zu %s seq=%" PRIu64,
             r->w->n, r->rank, algo_names[c->algo], dtype_names[c->dtype],
             c->algo == 2 ? "-" : op_names[c->op], c->count,
             c->inplace ? "in-place" : "out-of-place", r->seq);
}

static void failf(rank_t *r, const call_case_t *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void failf(rank_t *r, const call_case_t *c, const char *fmt, ...)
{
    r->failures++;
    if (__atomic_add_fetch(&g.failures, 1, __ATOMIC_RELAXED) > MAX_REPORTS)
        return;
    char    d[200], what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    describe(c, r, d, sizeof(d));
    fprintf(stderr, "FAIL %s: %s\n", d, what);
}

/* The task of case c on rank r, as the core would fill it in. */
static void task_init(braid_task_t *t, rank_t *r, const call_case_t *c,
                      const void *sendbuf, void *recvbuf)
{
    const braid_algo_t *a = algos[c->algo];
    memset(t, 0, sizeof(*t));
    t->struct_size = sizeof(*t);
    t->algo        = a;
    t->coll        = a->coll;
    t->sendbuf     = sendbuf;
    t->recvbuf     = recvbuf;
    t->count       = c->count;
    t->dtype       = c->dtype;
    t->op          = c->op;
    t->dtsize      = ref_size(c->dtype);
    t->rank        = r->rank;
    t->size        = r->w->n;
    t->seq         = r->seq;
    t->sig32       = c->sig32;
    t->tl          = &r->tl;
    t->svc         = tu_svc();
    t->comm_state  = &r->state[c->algo];
    t->res         = r->res[c->algo];
}

/* Runs one call to completion as the core would: start, progress until
 * done (yielding: more threads than cores), finish. */
static braid_status_t run_call(rank_t *r, const call_case_t *c,
                               const void *sendbuf, void *recvbuf)
{
    const braid_algo_t *a = algos[c->algo];
    braid_task_t        t;
    task_init(&t, r, c, sendbuf, recvbuf);
    if (a->coll == BRAID_COLL_ALLGATHER)
        t.op = BRAID_SUM;

    braid_status_t st = tu_drive(a, &t, CALL_LIMIT_S);
    if (st == BRAID_ERR_TIMEOUT) {
        char d[200];
        describe(c, r, d, sizeof(d));
        fprintf(stderr, "HANG %s: %s\n", d, tu_last_error());
        abort();
    }
    __atomic_add_fetch(&g.calls, 1, __ATOMIC_RELAXED);
    return st;
}

/* Sizes (bytes) of the send and receive spans of a case. */
static void spans(const call_case_t *c, int n, size_t *sb, size_t *rb)
{
    size_t block = c->count * ref_size(c->dtype);
    switch (algos[c->algo]->coll) {
    case BRAID_COLL_ALLGATHER:
        *sb = block;
        *rb = block * (size_t)n;
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        *sb = block * (size_t)n;
        *rb = block;
        break;
    default: *sb = *rb = block; break;
    }
}

/* This rank's input (whole send span) into buf. */
static void make_input(const rank_t *r, const call_case_t *c, void *buf,
                       size_t elems)
{
    if (c->big) {
        memcpy(buf, r->w->big_in[r->rank], elems * ref_size(c->dtype));
        return;
    }
    gen_block(buf, c->dtype, c->op, c->seed, r->rank, 0, elems);
}

/* What this rank's receive span must hold. */
static void make_expected(const rank_t *r, const call_case_t *c, void *exp,
                          void *tmp)
{
    int    n  = r->w->n;
    size_t ds = ref_size(c->dtype);
    if (c->big) {
        size_t off = algos[c->algo]->coll == BRAID_COLL_REDUCE_SCATTER
                         ? (size_t)r->rank * c->count * ds
                         : 0;
        size_t rb, sb;
        spans(c, n, &sb, &rb);
        memcpy(exp, (char *)r->w->big_ref + off, rb);
        return;
    }
    switch (algos[c->algo]->coll) {
    case BRAID_COLL_ALLGATHER:
        for (int p = 0; p < n; p++)
            gen_block((char *)exp + (size_t)p * c->count * ds, c->dtype, c->op,
                      c->seed, p, 0, c->count);
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        ref_reduce(exp, tmp, c->dtype, c->op, c->seed, n,
                   (size_t)r->rank * c->count, c->count);
        break;
    default:
        ref_reduce(exp, tmp, c->dtype, c->op, c->seed, n, 0, c->count);
        break;
    }
}

static void report_diff(rank_t *r, const call_case_t *c, const void *got,
                        const void *exp, size_t bytes)
{
    size_t ds = ref_size(c->dtype);
    for (size_t i = 0; i < bytes; i += ds) {
        if (memcmp((const char *)got + i, (const char *)exp + i, ds) != 0) {
            uint64_t gv = 0, ev = 0;
            memcpy(&gv, (const char *)got + i, ds);
            memcpy(&ev, (const char *)exp + i, ds);
            failf(r, c,
                  "element %zu: got bits 0x%" PRIx64 ", expected 0x%" PRIx64,
                  i / ds, gv, ev);
            return;
        }
    }
}

/* One case on this rank: buffers, call, checks. */
static void run_case(rank_t *r, const call_case_t *c)
{
    int    n  = r->w->n;
    size_t ds = ref_size(c->dtype);
    size_t sb, rb;
    spans(c, n, &sb, &rb);
    braid_coll_t coll = algos[c->algo]->coll;

    if (c->jitter && rank_rnd(r) % 3 == 0) {
        /* some ranks late: up to 300 us, and the slow one of the round */
        long ns = (long)(rank_rnd(r) % 300000);
        if ((uint64_t)r->rank == (r->seq % (uint64_t)n))
            ns += 200000;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
    }
    r->seq += c->seq_gap;

    /* Regions: [send span][guard] and [recv span][guard]. */
    unsigned char *sreg  = malloc(sb + GUARD);
    unsigned char *rreg  = malloc(rb + GUARD);
    unsigned char *exp   = malloc(rb + 1);
    unsigned char *tmp   = malloc(c->count * ds + 1);
    unsigned char *scopy = malloc(sb + 1);
    if (sreg == NULL || rreg == NULL || exp == NULL || tmp == NULL ||
        scopy == NULL) {
        fprintf(stderr, "out of memory\n");
        abort();
    }
    memset(rreg, JUNK_BYTE, rb);
    memset(rreg + rb, GUARD_BYTE, GUARD);
    memset(sreg + sb, GUARD_BYTE, GUARD);

    const void *sendbuf;
    void       *recvbuf;
    size_t      me_off = (size_t)r->rank * c->count * ds;
    if (!c->inplace) {
        make_input(r, c, sreg, sb / (ds ? ds : 1));
        memcpy(scopy, sreg, sb);
        sendbuf = sreg;
        recvbuf = rreg;
    } else if (coll == BRAID_COLL_ALLGATHER) {
        make_input(r, c, rreg + me_off, c->count);
        sendbuf = rreg + me_off;
        recvbuf = rreg;
    } else if (coll == BRAID_COLL_REDUCE_SCATTER) {
        /* the send span is the buffer, the result lands in block `rank` */
        make_input(r, c, sreg, sb / ds);
        sendbuf = sreg;
        recvbuf = sreg + me_off;
    } else {
        make_input(r, c, rreg, c->count);
        sendbuf = rreg;
        recvbuf = rreg;
    }
    if (c->count == 0) { /* what a caller may pass with no data */
        sendbuf = NULL;
        recvbuf = NULL;
    }

    braid_status_t st = run_call(r, c, sendbuf, recvbuf);
    r->seq++;
    if (st != BRAID_OK) {
        failf(r, c, "status %d: %s", (int)st, tu_last_error());
        fprintf(stderr, "a failed call leaves the ranks out of step: "
                        "stopping\n");
        exit(1);
    }

    if (rb > 0) {
        make_expected(r, c, exp, tmp);
        const unsigned char *got =
            coll == BRAID_COLL_REDUCE_SCATTER && c->inplace ? sreg + me_off
                                                            : rreg;
        if (memcmp(got, exp, rb) != 0)
            report_diff(r, c, got, exp, rb);
    }
    for (size_t i = 0; i < GUARD; i++) {
        if (rreg[rb + i] != GUARD_BYTE || sreg[sb + i] != GUARD_BYTE) {
            failf(r, c, "wrote past the end of a buffer");
            break;
        }
    }
    if (!c->inplace && sb > 0 && memcmp(sreg, scopy, sb) != 0)
        failf(r, c, "out-of-place call changed the send buffer");
    free(sreg);
    free(rreg);
    free(exp);
    free(tmp);
    free(scopy);
}

/* ------------------------------------------------------------------ phases */

static int is_reduction(int algo) { return algo != 2; }

static void phase_matrix(rank_t *r)
{
    static const size_t counts[] = {0, 1, 7, 1031};
    uint64_t            k        = 0;
    for (int a = 0; a < NALGOS; a++)
        for (size_t d = 0; d < NDTYPES; d++)
            for (int op = 0; op < (is_reduction(a) ? BRAID_OP_COUNT : 1); op++)
                for (size_t ci = 0; ci < 4; ci++)
                    for (int ip = 0; ip < 2; ip++) {
                        if (g.quick && (k % 3) != 0 && counts[ci] > 7) {
                            k++;
                            continue;
                        }
                        call_case_t c = {
                            .algo    = a,
                            .dtype   = dtypes[d],
                            .op      = (braid_op_t)op,
                            .count   = counts[ci],
                            .inplace = ip,
                            .seed    = ref_mix(g.seed ^ ++k),
                        };
                        run_case(r, &c);
                    }
}

/* Large case: every rank writes its input to the world, the ranks build the
 * reference together, then run; barriers keep the shared buffers steady. */
static void run_big(rank_t *r, call_case_t *c)
{
    world_t *w  = r->w;
    int      n  = w->n;
    size_t   ds = ref_size(c->dtype);
    size_t   sb, rb;
    spans(c, n, &sb, &rb);
    braid_coll_t coll = algos[c->algo]->coll;
    size_t       ref_elems =
        coll == BRAID_COLL_ALLREDUCE ? c->count : c->count * (size_t)n;

    w->big_in[r->rank] = malloc(sb);
    if (r->rank == 0)
        w->big_ref = malloc(ref_elems * ds);
    gen_block(w->big_in[r->rank], c->dtype, c->op, c->seed, r->rank, 0,
              sb / ds);
    mock_world_barrier(w->mw);
    /* reference slice of this rank */
    size_t per   = (ref_elems + (size_t)n - 1) / (size_t)n;
    size_t first = per * (size_t)r->rank;
    size_t cnt   = first >= ref_elems        ? 0
                   : ref_elems - first < per ? ref_elems - first
                                             : per;
    char  *out   = (char *)w->big_ref + first * ds;
    if (coll == BRAID_COLL_ALLGATHER) {
        for (size_t i = 0; i < cnt; i++) {
            size_t e = first + i;
            memcpy(out + i * ds,
                   (char *)w->big_in[e / c->count] + (e % c->count) * ds, ds);
        }
    } else if (cnt > 0) {
        memcpy(out, (char *)w->big_in[0] + first * ds, cnt * ds);
        for (int p = 1; p < n; p++)
            ref_reduce2(out, out, (char *)w->big_in[p] + first * ds, cnt,
                        c->dtype, c->op);
        ref_finish_avg(out, cnt, c->dtype, c->op, n);
    }
    mock_world_barrier(w->mw);
    c->big = 1;
    run_case(r, c);
    mock_world_barrier(w->mw);
    free(w->big_in[r->rank]);
    w->big_in[r->rank] = NULL;
    if (r->rank == 0) {
        free(w->big_ref);
        w->big_ref = NULL;
    }
    mock_world_barrier(w->mw);
}

static void phase_large(rank_t *r)
{
    /* oneshot, allgather and reduce_scatter hold a whole block per peer, up
     * to 4 MiB: 1M+3 elements of 1 and 2 bytes; twoshot takes 32 MiB. */
    static const struct {
        int           algo;
        braid_dtype_t dt;
        braid_op_t    op;
        int           ip;
    } cases[] = {
        {0, BRAID_F16, BRAID_SUM, 0}, {0, BRAID_BF16, BRAID_AVG, 1},
        {1, BRAID_F32, BRAID_SUM, 1}, {1, BRAID_I32, BRAID_AVG, 0},
        {2, BRAID_U8, BRAID_SUM, 1},  {3, BRAID_BF16, BRAID_SUM, 1},
    };
    int ncases = (int)(sizeof(cases) / sizeof(cases[0]));
    for (int i = 0; i < ncases; i++) {
        if (g.quick && i % 3 != 0)
            continue;
        call_case_t c = {.algo    = cases[i].algo,
                         .dtype   = cases[i].dt,
                         .op      = cases[i].op,
                         .count   = BIG_COUNT,
                         .inplace = cases[i].ip,
                         .seed    = ref_mix(g.seed ^ 0xb16ull ^ (uint64_t)i)};
        run_big(r, &c);
    }
}

/* Same sequence on every rank (it depends on the seed only). */
static void phase_stress(rank_t *r, int iters)
{
    uint64_t s    = ref_mix(g.seed ^ 0x57e55ull ^ (uint64_t)r->w->n);
    int      algo = 0;
    for (int it = 0; it < iters; it++) {
        s = ref_mix(s);
        call_case_t c;
        memset(&c, 0, sizeof(c));
        /* Runs of one algorithm: back-to-back calls on one area are what
         * the banks must keep apart (a call of another lowhop algorithm in
         * between makes the ranks wait for each other). */
        if (s % 4 == 0)
            algo = (int)((s >> 4) % NALGOS);
        c.algo    = algo;
        c.dtype   = dtypes[(s >> 8) % NDTYPES];
        c.op      = (braid_op_t)((s >> 16) % BRAID_OP_COUNT);
        c.inplace = (int)((s >> 24) & 1);
        /* as if calls of other candidates ran in between: seq parity and
         * bank parity part ways */
        c.seq_gap     = (s >> 25) % 2 == 0 ? 1 + (s >> 27) % 2 : 0;
        unsigned band = (unsigned)((s >> 32) % 10);
        uint64_t v    = s >> 36;
        c.count       = band < 7   ? 1 + v % 300
                        : band < 9 ? 300 + v % 5000
                                   : 5000 + v % 40000;
        c.seed        = ref_mix(s ^ 0xabcdefull);
        c.jitter      = 1;
        run_case(r, &c);
    }
}

/* One mismatched call as the core would run it, but for the core's
 * failure inquiry, which tells the ranks that have not seen the mismatch
 * yet: here a rank that has an answer keeps delivering its puts until
 * every rank has one, so that each must see the mismatch for itself. */
static braid_status_t run_mismatched(rank_t *r, const call_case_t *c,
                                     const void *sendbuf, void *recvbuf)
{
    const braid_algo_t *a = algos[c->algo];
    braid_task_t        t;
    task_init(&t, r, c, sendbuf, recvbuf);

    braid_wait_t   wait = BRAID_WAIT_LOCAL;
    braid_status_t st   = a->start(&t, &wait);
    double         t0   = tu_now();
    while (st == BRAID_OK || st == BRAID_INPROGRESS) {
        if ((st = a->progress(&t, &wait)) != BRAID_INPROGRESS)
            break;
        sched_yield();
        if (tu_now() - t0 > CALL_LIMIT_S)
            break; /* reported as a wrong status */
    }
    char err[512];
    snprintf(err, sizeof(err), "%s", tu_last_error());
    __atomic_add_fetch(&r->w->mm_ended[c->algo], 1, __ATOMIC_RELAXED);
    while (__atomic_load_n(&r->w->mm_ended[c->algo], __ATOMIC_RELAXED) <
               r->w->n &&
           tu_now() - t0 < CALL_LIMIT_S) {
        (void)r->tl.ops->progress(r->tl.tcomm);
        sched_yield();
    }
    a->finish(&t);
    (void)tu_svc()->error(st, "%s", err); /* what the call said, not finish */
    return st;
}

/* Last: a mismatched call leaves its flags in the areas (a communicator
 * whose call failed is not used again). */
static void phase_mismatch(rank_t *r)
{
    int n = r->w->n;
    if (n < 2)
        return;
    for (int a = 0; a < NALGOS; a++) {
        call_case_t c;
        memset(&c, 0, sizeof(c));
        c.algo  = a;
        c.dtype = BRAID_F32;
        c.op    = BRAID_SUM;
        c.count = 3 * (size_t)n + 1; /* every twoshot chunk non-empty */
        c.sig32 = r->rank == n - 1 ? 0x5eed0001u : 0x5eed0002u;
        size_t sb, rb;
        spans(&c, n, &sb, &rb);
        unsigned char *sbuf = calloc(1, sb + 1), *rbuf = calloc(1, rb + 1);
        if (sbuf == NULL || rbuf == NULL) {
            fprintf(stderr, "out of memory\n");
            abort();
        }
        tu_clear_error();
        braid_status_t st = run_mismatched(r, &c, sbuf, rbuf);
        if (st != BRAID_ERR_MISMATCH ||
            strstr(tu_last_error(), "another signature") == NULL)
            failf(r, &c,
                  "a call whose signature differs on rank %d gave "
                  "%d: %s",
                  n - 1, (int)st, tu_last_error());
        r->seq++;
        free(sbuf);
        free(rbuf);
    }
}

static void *rank_main(void *arg)
{
    rank_t *r  = arg;
    double  t0 = cpu_now();
    phase_matrix(r);
    double t1 = cpu_now();
    phase_large(r);
    double t2 = cpu_now();
    phase_stress(r, g.quick ? 50 : 200);
    phase_mismatch(r);
    /* Every rank has finished (cancelled its puts) before any frees the
     * areas those puts were still landing in. */
    mock_world_barrier(r->w->mw);
    if (g.verbose && r->rank == 0)
        printf("n=%d: process cpu time: matrix %.2f s, large %.2f s, stress "
               "%.2f s\n",
               r->w->n, t1 - t0, t2 - t1, cpu_now() - t2);
    for (int a = 0; a < NALGOS; a++) {
        if (r->state[a] != NULL)
            algos[a]->comm_state_free(r->state[a], &r->tl);
        r->state[a] = NULL;
        braid_res_destroy(r->res[a], &r->tl); /* the area: mem_free */
        r->res[a] = NULL;
    }
    return NULL;
}

static long run_world(int n)
{
    world_t w;
    memset(&w, 0, sizeof(w));
    w.n  = n;
    w.mw = mock_world_new(n, ref_mix(g.seed ^ (uint64_t)n), 1);
    rank_t    ranks[MOCK_MAX_RANKS];
    pthread_t th[MOCK_MAX_RANKS];
    memset(ranks, 0, sizeof(ranks));
    for (int i = 0; i < n; i++) {
        rank_t *r              = &ranks[i];
        r->w                   = &w;
        r->rank                = i;
        r->tcomm               = mock_tl_new(w.mw, i);
        r->tl.struct_size      = sizeof(r->tl);
        r->tl.link.struct_size = sizeof(r->tl.link);
        r->tl.ops              = &mock_transport;
        r->tl.tcomm            = r->tcomm;
        mock_transport.link(r->tcomm, &r->tl.link);
        r->rng = ref_mix(g.seed ^ (uint64_t)(i + 77));
        for (int a = 0; a < NALGOS; a++)
            if ((r->res[a] = braid_res_create()) == NULL)
                abort();
    }
    double t0 = tu_now();
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, rank_main, &ranks[i]);
    long fails = 0, allocs = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        fails += ranks[i].failures;
        allocs += mock_tl_allocs(ranks[i].tcomm);
        mock_tl_free(ranks[i].tcomm);
    }
    long errs = mock_world_errors(w.mw);
    mock_world_free(w.mw);
    printf("n=%d: %s, %ld area allocations on rank 0..n-1 in all, "
           "%.2f s\n",
           n, fails + errs ? "FAILED" : "ok", allocs, tu_now() - t0);
    fflush(stdout);
    if (errs > 0)
        fprintf(stderr, "n=%d: the mock transport saw %ld errors\n", n, errs);
    return fails + errs;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            g.quick = 1;
        else if (strcmp(argv[i], "--verbose") == 0)
            g.verbose = 1;
        else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            g.only_n = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            g.seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr,
                    "usage: %s [--quick] [--n N] [--seed S] "
                    "[--verbose]\n",
                    argv[0]);
            return 2;
        }
    }
    long bad = 0;
    for (int n = 1; n <= 8; n++)
        if (g.only_n == 0 || g.only_n == n)
            bad += run_world(n);
    printf("%ld calls, %ld failures (seed 0x%" PRIx64 ")\n", g.calls, bad,
           g.seed);
    return bad == 0 ? 0 : 1;
}
