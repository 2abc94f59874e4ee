/* Multi-process correctness test of every braid collective.
 *
 * Run under a launcher (braidrun -n N, mpirun -np N, or alone for N = 1):
 *     test_colls [--algo CAND] [--algo-colls LIST] [--only LIST] [--quick]
 *                [--no-big] [--seed N] [--timeout S]
 *
 * Every input element is a pure function of (seed, case, rank, index), so
 * each rank regenerates the inputs of all ranks and computes the expected
 * result itself.  The data is chosen so that results are exact: dyadic
 * fractions small enough that any summation order gives the same float,
 * products of {±2, ±1, ±0.5}; only AVG of floats (one division, possibly
 * rounded twice) is compared with a tolerance, and AVG of integers truncates.
 * A few cases use full-precision floats instead ("inexact data"): those are
 * compared with an error bound, and show whether every rank combined the
 * partial results in the same order (bitwise equal results).
 *
 * Besides the values, each case checks that the guard bytes around every
 * buffer and an out-of-place send buffer are untouched, and (batched, one
 * allgather per 64 cases) that every rank holds bitwise the same result.
 *
 * A call that returns an error is fatal (the ranks may disagree on what comes
 * next); wrong values are counted and reported, and the run goes on. */
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>

#include "mp_common.h"
#include "reference.h"

#define PROG            "test_colls"
#define GUARD           64 /* guard bytes on each side of every buffer */
#define GUARD_BYTE      0xA5
#define JUNK_BYTE       0xEE /* initial content of buffers braid must fill */
#define HASH_BATCH      64
#define MAX_PRINT_CASES 25 /* failing cases printed in full, per rank */
#define MAX_PRINT_ELEMS 3  /* wrong elements printed per failing case */
#define BIG_COUNT       ((size_t)(1u << 20) + 3u)
#define MID_COUNT       ((size_t)65537)

/* ------------------------------------------------------------------ state */

/* Results that should be identical on every rank, waiting for one allgather
 * of their hashes (one collective per batch rather than one per case). */
typedef struct {
    uint64_t hash[HASH_BATCH];
    char     desc[HASH_BATCH][112];
    int      n;
} hash_batch_t;

typedef struct {
    braid_comm_t *comm;
    int           rank;
    int           size;
    const char   *label;   /* "world", "split-parity", ... for messages */
    uint64_t      tag;     /* mixed into the seeds of this communicator */
    uint64_t      case_no; /* cases started on it (same on every member) */
    hash_batch_t  hashes;
} tcomm_t;

static struct {
    uint64_t    seed;
    int         quick;
    int         big;
    const char *algo; /* forced candidate, or NULL */
    unsigned    only; /* bit per braid_coll_t: collectives to test */
    char        algo_env[512];
    long        cases;
    long        failures; /* failing cases */
    int         printed;
    int         world_rank;
    char        current[256]; /* what the watchdog prints on a hang */
    const char *current_p;
} g = {.seed = 0x5eed, .big = 1, .only = (1u << BRAID_COLL_COUNT) - 1};

static int wanted(braid_coll_t c) { return (g.only >> c) & 1u; }

/* ---------------------------------------------------------------- values */

/* A reference value: `f` for float dtypes, `i` for integer dtypes. */
typedef ref_val_t val_t;

/* ----------------------------------------------------------------- cases */

typedef struct {
    braid_coll_t  coll;
    braid_dtype_t dtype;
    braid_op_t    op;    /* reductions only */
    size_t        count; /* as in the public call */
    int           inplace;
    int           root;      /* broadcast only */
    int           null_bufs; /* count 0 passed with NULL buffers */
    int           inexact;   /* full-precision float inputs (see above) */

    uint64_t       seed;
    unsigned char *sreg, *rreg;    /* regions, guards included */
    size_t         sbytes, rbytes; /* bytes between the guards */
    unsigned char *scopy;          /* out-of-place input, to check it */
    const void    *sendbuf;
    void          *recvbuf;
    int            bad; /* this case already counted as failed */
} case_t;

static int is_reduction(braid_coll_t c)
{
    return c == BRAID_COLL_ALLREDUCE || c == BRAID_COLL_REDUCE_SCATTER;
}

static const char *coll_name(braid_coll_t c)
{
    switch (c) {
    case BRAID_COLL_ALLREDUCE: return "allreduce";
    case BRAID_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case BRAID_COLL_ALLGATHER: return "allgather";
    case BRAID_COLL_BROADCAST: return "broadcast";
    default: return "barrier";
    }
}

static void case_desc(const tcomm_t *tc, const case_t *c, char *out,
                      size_t len)
{
    char extra[32];
    /* broadcast has one buffer: a root instead of a placement */
    if (c->coll == BRAID_COLL_BROADCAST)
        snprintf(extra, sizeof(extra), "root=%d", c->root);
    else
        snprintf(extra, sizeof(extra), "inplace=%d", c->inplace);
    snprintf(out, len, "[%s] %s dtype=%s op=%s count=%zu %s%s%s", tc->label,
             coll_name(c->coll), ref_name(c->dtype),
             is_reduction(c->coll) ? ref_op_name(c->op) : "-", c->count, extra,
             c->null_bufs ? " (NULL buffers)" : "",
             c->inexact ? " (inexact data)" : "");
}

/* The candidate braid picks for this case, for failure messages. */
static void case_algo(const tcomm_t *tc, const case_t *c, char *out,
                      size_t len)
{
    char why[64];
    if (braid_comm_choice(tc->comm, c->coll, c->count * ref_size(c->dtype),
                          out, len, why, sizeof(why)) != BRAID_OK)
        snprintf(out, len, "?");
}

/* Counts a failure of case c and prints it (up to the print limits). */
static void case_fail(const tcomm_t *tc, case_t *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void case_fail(const tcomm_t *tc, case_t *c, const char *fmt, ...)
{
    if (!c->bad) {
        c->bad = 1;
        g.failures++;
        g.printed++;
    }
    if (g.printed > MAX_PRINT_CASES)
        return;
    char    d[160], algo[64], what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    case_desc(tc, c, d, sizeof(d));
    case_algo(tc, c, algo, sizeof(algo));
    fprintf(stderr, PROG " FAIL %s rank=%d/%d algo=%s: %s\n", d, tc->rank,
            tc->size, algo, what);
}

static unsigned char *region_alloc(size_t bytes)
{
    unsigned char *p = malloc(bytes + 2 * GUARD);
    if (p == NULL) {
        fprintf(stderr, PROG ": out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, GUARD_BYTE, GUARD);
    memset(p + GUARD, JUNK_BYTE, bytes);
    memset(p + GUARD + bytes, GUARD_BYTE, GUARD);
    return p;
}

static int guard_ok(const unsigned char *p)
{
    for (size_t i = 0; i < GUARD; i++)
        if (p[i] != GUARD_BYTE)
            return 0;
    return 1;
}

static void check_region(const tcomm_t *tc, case_t *c, const unsigned char *p,
                         size_t bytes, const char *name)
{
    if (!guard_ok(p))
        case_fail(tc, c, "wrote before the start of the %s buffer", name);
    if (!guard_ok(p + GUARD + bytes))
        case_fail(tc, c, "wrote past the end of the %s buffer (%zu bytes)",
                  name, bytes);
}

/* Writes element idx of rank r's input into buf at position pos. */
static void put_input(const case_t *c, int n, int r, size_t idx, void *buf,
                      size_t pos)
{
    uint64_t b = ref_bits(c->seed, r, idx);
    if (!is_reduction(c->coll)) {
        /* Data movement: any bit pattern must arrive as is. */
        size_t dts = ref_size(c->dtype);
        memcpy((unsigned char *)buf + pos * dts, &b, dts);
        return;
    }
    val_t v = ref_input(c->dtype, c->op, c->inexact, n, b);
    if (ref_is_float(c->dtype))
        ref_store_f(c->dtype, buf, pos, v.f);
    else
        ref_store_i(c->dtype, buf, pos, v.i);
}

/* nranks: the communicator's size (it scales the input ranges). */
static void fill_input(const case_t *c, int nranks, int r, void *buf,
                       size_t first, size_t n)
{
    for (size_t k = 0; k < n; k++)
        put_input(c, nranks, r, first + k, buf, k);
}

/* Allocates and fills the buffers of case c for this rank. */
static void case_setup(tcomm_t *tc, case_t *c)
{
    size_t dts = ref_size(c->dtype), n = (size_t)tc->size;
    size_t me = (size_t)tc->rank;

    c->seed = ref_mix(g.seed ^ ref_mix(tc->case_no++ ^ tc->tag));
    c->bad  = 0;
    switch (c->coll) {
    case BRAID_COLL_ALLREDUCE:
        c->rbytes = c->count * dts;
        c->sbytes = c->inplace ? 0 : c->rbytes;
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        c->sbytes = n * c->count * dts;
        c->rbytes = c->inplace ? 0 : c->count * dts;
        break;
    case BRAID_COLL_ALLGATHER:
        c->rbytes = n * c->count * dts;
        c->sbytes = c->inplace ? 0 : c->count * dts;
        break;
    default: /* broadcast: one buffer */
        c->rbytes = c->count * dts;
        c->sbytes = 0;
        break;
    }
    c->sreg          = region_alloc(c->sbytes);
    c->rreg          = region_alloc(c->rbytes);
    c->scopy         = NULL;
    unsigned char *s = c->sreg + GUARD, *r = c->rreg + GUARD;

    switch (c->coll) {
    case BRAID_COLL_ALLREDUCE:
        fill_input(c, tc->size, tc->rank, c->inplace ? r : s, 0, c->count);
        c->sendbuf = c->inplace ? r : s;
        c->recvbuf = r;
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        fill_input(c, tc->size, tc->rank, s, 0, n * c->count);
        c->sendbuf = s;
        c->recvbuf = c->inplace ? s + me * c->count * dts : r;
        break;
    case BRAID_COLL_ALLGATHER:
        if (c->inplace) {
            fill_input(c, tc->size, tc->rank, r + me * c->count * dts, 0,
                       c->count);
            c->sendbuf = r + me * c->count * dts;
        } else {
            fill_input(c, tc->size, tc->rank, s, 0, c->count);
            c->sendbuf = s;
        }
        c->recvbuf = r;
        break;
    default:
        if (tc->rank == c->root)
            fill_input(c, tc->size, c->root, r, 0, c->count);
        c->sendbuf = r;
        c->recvbuf = r;
        break;
    }
    if (!c->inplace && c->sbytes > 0) {
        c->scopy = malloc(c->sbytes);
        if (c->scopy == NULL) {
            fprintf(stderr, PROG ": out of memory\n");
            exit(1);
        }
        memcpy(c->scopy, s, c->sbytes);
    }
    if (c->null_bufs) {
        c->sendbuf = NULL;
        c->recvbuf = NULL;
    }
    case_desc(tc, c, g.current, sizeof(g.current));
}

static braid_status_t case_call(tcomm_t *tc, case_t *c)
{
    switch (c->coll) {
    case BRAID_COLL_ALLREDUCE:
        return braid_allreduce(c->sendbuf, c->recvbuf, c->count, c->dtype,
                               c->op, tc->comm);
    case BRAID_COLL_REDUCE_SCATTER:
        return braid_reduce_scatter(c->sendbuf, c->recvbuf, c->count, c->dtype,
                                    c->op, tc->comm);
    case BRAID_COLL_ALLGATHER:
        return braid_allgather(c->sendbuf, c->recvbuf, c->count, c->dtype,
                               tc->comm);
    default:
        return braid_broadcast(c->recvbuf, c->count, c->dtype, c->root,
                               tc->comm);
    }
}

static void hash_flush(tcomm_t *tc);

/* Queues the hash of a result that every rank must hold identically. */
static void hash_record(tcomm_t *tc, const case_t *c, const void *buf,
                        size_t bytes)
{
    hash_batch_t *hb = &tc->hashes;
    hb->hash[hb->n]  = ref_hash(REF_HASH_INIT, buf, bytes);
    case_desc(tc, c, hb->desc[hb->n], sizeof(hb->desc[hb->n]));
    if (++hb->n == HASH_BATCH)
        hash_flush(tc);
}

/* One allgather of the queued hashes; each rank compares rank 0's with its
 * own, so the rank whose result differs is the one that reports. */
static void hash_flush(tcomm_t *tc)
{
    hash_batch_t *hb  = &tc->hashes;
    uint64_t     *all = calloc((size_t)tc->size, sizeof(hb->hash));
    if (all == NULL) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    for (int k = hb->n; k < HASH_BATCH; k++)
        hb->hash[k] = 0;
    snprintf(g.current, sizeof(g.current), "[%s] allgather of result hashes",
             tc->label);
    braid_status_t st =
        braid_allgather(hb->hash, all, HASH_BATCH, BRAID_I64, tc->comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "[%s] allgather of result hashes",
                 tc->label);
    for (int k = 0; k < hb->n; k++) {
        if (all[k] == hb->hash[k])
            continue;
        g.failures++;
        if (++g.printed <= MAX_PRINT_CASES)
            fprintf(stderr,
                    PROG " FAIL %s rank=%d/%d: result differs from "
                         "rank 0's (hash %016" PRIx64 " vs %016" PRIx64 ")\n",
                    hb->desc[k], tc->rank, tc->size, hb->hash[k], all[k]);
    }
    hb->n = 0;
    free(all);
}

static void check_reduction(tcomm_t *tc, case_t *c, const void *res,
                            size_t first)
{
    char   es[64], gs[64];
    size_t wrong = 0;
    for (size_t i = 0; i < c->count; i++) {
        double tol;
        val_t  exp = ref_expect(c->dtype, c->op, c->inexact, c->seed, tc->size,
                                first + i, &tol);
        if (ref_value_ok(c->dtype, res, i, exp, tol, es, gs, sizeof(es)))
            continue;
        if (wrong++ < MAX_PRINT_ELEMS)
            case_fail(tc, c, "index=%zu expected=%s got=%s", i, es, gs);
    }
    if (wrong > MAX_PRINT_ELEMS)
        case_fail(tc, c, "%zu of %zu elements wrong", wrong, c->count);
}

/* Element pos of buf must hold element idx of rank r's input, bitwise. */
static void check_moved(tcomm_t *tc, case_t *c, const unsigned char *buf,
                        int r, size_t *wrong)
{
    size_t dts = ref_size(c->dtype);
    for (size_t i = 0; i < c->count; i++) {
        uint64_t b = ref_bits(c->seed, r, i), got = 0;
        memcpy(&got, buf + i * dts, dts);
        if (memcmp(&got, &b, dts) == 0)
            continue;
        if ((*wrong)++ < MAX_PRINT_ELEMS) {
            uint64_t exp = 0;
            memcpy(&exp, &b, dts);
            case_fail(tc, c,
                      "index=%zu (rank %d's element %zu) "
                      "expected=0x%0*" PRIx64 " got=0x%0*" PRIx64,
                      (size_t)r * c->count + i, r, i, (int)(2 * dts), exp,
                      (int)(2 * dts), got);
        }
    }
}

/* Verifies case c after its call returned OK, then frees it. */
static void case_check(tcomm_t *tc, case_t *c)
{
    size_t               dts = ref_size(c->dtype), wrong = 0;
    const unsigned char *r = c->rreg + GUARD, *s = c->sreg + GUARD;

    g.cases++;
    check_region(tc, c, c->sreg, c->sbytes, "send");
    check_region(tc, c, c->rreg, c->rbytes, "receive");
    if (c->scopy != NULL && memcmp(c->scopy, s, c->sbytes) != 0)
        case_fail(tc, c, "out-of-place send buffer was modified");

    switch (c->coll) {
    case BRAID_COLL_ALLREDUCE:
        check_reduction(tc, c, r, 0);
        hash_record(tc, c, r, c->rbytes);
        break;
    case BRAID_COLL_REDUCE_SCATTER: {
        size_t first = (size_t)tc->rank * c->count;
        check_reduction(tc, c, c->inplace ? s + first * dts : r, first);
        break;
    }
    case BRAID_COLL_ALLGATHER:
        for (int q = 0; q < tc->size; q++)
            check_moved(tc, c, r + (size_t)q * c->count * dts, q, &wrong);
        hash_record(tc, c, r, c->rbytes);
        break;
    default:
        check_moved(tc, c, r, c->root, &wrong);
        hash_record(tc, c, r, c->rbytes);
        break;
    }
    if (wrong > MAX_PRINT_ELEMS)
        case_fail(tc, c, "%zu elements wrong", wrong);
    free(c->sreg);
    free(c->rreg);
    free(c->scopy);
}

static void run_case(tcomm_t *tc, case_t c)
{
    if (!wanted(c.coll))
        return; /* same decision on every rank: seeds stay in step */
    case_setup(tc, &c);
    braid_status_t st = case_call(tc, &c);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "%s rank=%d/%d", g.current, tc->rank,
                 tc->size);
    case_check(tc, &c);
}

static void barrier_or_die(tcomm_t *tc)
{
    snprintf(g.current, sizeof(g.current), "[%s] barrier", tc->label);
    braid_status_t st = braid_barrier(tc->comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "[%s] barrier", tc->label);
}

/* ---------------------------------------------------------------- matrix */

static const braid_dtype_t all_dtypes[]   = {BRAID_F32,  BRAID_F64, BRAID_F16,
                                             BRAID_BF16, BRAID_I32, BRAID_I64,
                                             BRAID_U8};
static const braid_dtype_t quick_dtypes[] = {BRAID_F32, BRAID_F16, BRAID_I32,
                                             BRAID_U8};
static const braid_op_t    all_ops[]      = {BRAID_SUM, BRAID_PROD, BRAID_MIN,
                                             BRAID_MAX, BRAID_AVG};
static const braid_op_t    quick_ops[]    = {BRAID_SUM, BRAID_PROD, BRAID_MAX,
                                             BRAID_AVG};
static const size_t        small_counts[] = {0, 1, 17, 1001};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void dtype_list(const braid_dtype_t **list, size_t *n)
{
    *list = g.quick ? quick_dtypes : all_dtypes;
    *n    = g.quick ? NELEM(quick_dtypes) : NELEM(all_dtypes);
}

/* Every dtype x op x small count x placement of one reduction. */
static void matrix_reduction(tcomm_t *tc, braid_coll_t coll)
{
    const braid_dtype_t *dts;
    size_t               ndt;
    const braid_op_t    *ops  = g.quick ? quick_ops : all_ops;
    size_t               nops = g.quick ? NELEM(quick_ops) : NELEM(all_ops);
    dtype_list(&dts, &ndt);
    for (size_t d = 0; d < ndt; d++) {
        for (size_t o = 0; o < nops; o++)
            for (size_t k = 0; k < NELEM(small_counts); k++)
                for (int ip = 0; ip < 2; ip++)
                    run_case(tc, (case_t){.coll    = coll,
                                          .dtype   = dts[d],
                                          .op      = ops[o],
                                          .count   = small_counts[k],
                                          .inplace = ip});
        hash_flush(tc);
    }
}

static void matrix_allgather(tcomm_t *tc)
{
    const braid_dtype_t *dts;
    size_t               ndt;
    dtype_list(&dts, &ndt);
    for (size_t d = 0; d < ndt; d++)
        for (size_t k = 0; k < NELEM(small_counts); k++)
            for (int ip = 0; ip < 2; ip++)
                run_case(tc, (case_t){.coll    = BRAID_COLL_ALLGATHER,
                                      .dtype   = dts[d],
                                      .count   = small_counts[k],
                                      .inplace = ip});
    hash_flush(tc);
}

/* Roots 0, the last rank and one in the middle (duplicates skipped). */
static int broadcast_roots(int size, int roots[3])
{
    int n = 0, cand[3] = {0, size - 1, size / 2};
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= roots[j] == cand[i];
        if (!dup)
            roots[n++] = cand[i];
    }
    return n;
}

static void matrix_broadcast(tcomm_t *tc)
{
    const braid_dtype_t *dts;
    size_t               ndt;
    int                  roots[3], nroots = broadcast_roots(tc->size, roots);
    dtype_list(&dts, &ndt);
    for (size_t d = 0; d < ndt; d++)
        for (size_t k = 0; k < NELEM(small_counts); k++)
            for (int q = 0; q < nroots; q++)
                run_case(tc, (case_t){.coll    = BRAID_COLL_BROADCAST,
                                      .dtype   = dts[d],
                                      .count   = small_counts[k],
                                      .root    = roots[q],
                                      .inplace = 1});
    hash_flush(tc);
}

/* Counts that cross a transport's eager/rendezvous or chunking thresholds,
 * for a few representative combinations only. */
static void matrix_sizes(tcomm_t *tc)
{
    size_t       n        = (size_t)tc->size;
    size_t       per_rank = (BIG_COUNT + n - 1) / n; /* total stays above 1M */
    const case_t mid[]    = {
           {.coll = BRAID_COLL_ALLREDUCE, .dtype = BRAID_F32, .op = BRAID_SUM},
           {.coll    = BRAID_COLL_ALLREDUCE,
            .dtype   = BRAID_I64,
            .op      = BRAID_MIN,
            .inplace = 1},
           {.coll = BRAID_COLL_ALLREDUCE, .dtype = BRAID_F16, .op = BRAID_AVG},
           {.coll = BRAID_COLL_ALLREDUCE, .dtype = BRAID_BF16, .op = BRAID_MAX},
           {.coll  = BRAID_COLL_REDUCE_SCATTER,
            .dtype = BRAID_F64,
            .op    = BRAID_SUM},
           {.coll = BRAID_COLL_ALLGATHER, .dtype = BRAID_I32},
           {.coll = BRAID_COLL_BROADCAST, .dtype = BRAID_U8},
    };
    for (size_t i = 0; i < NELEM(mid); i++) {
        case_t c = mid[i];
        c.count  = MID_COUNT;
        if (c.coll == BRAID_COLL_BROADCAST)
            c.root = tc->size - 1;
        run_case(tc, c);
    }
    hash_flush(tc);
    if (!g.big)
        return;
    const case_t big[] = {
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F32,
         .op    = BRAID_SUM,
         .count = BIG_COUNT},
        {.coll    = BRAID_COLL_ALLREDUCE,
         .dtype   = BRAID_I32,
         .op      = BRAID_MAX,
         .count   = BIG_COUNT,
         .inplace = 1},
        {.coll  = BRAID_COLL_REDUCE_SCATTER,
         .dtype = BRAID_F32,
         .op    = BRAID_SUM,
         .count = per_rank},
        {.coll    = BRAID_COLL_ALLGATHER,
         .dtype   = BRAID_I32,
         .count   = per_rank,
         .inplace = 1},
        {.coll  = BRAID_COLL_BROADCAST,
         .dtype = BRAID_F32,
         .count = BIG_COUNT,
         .root  = tc->size / 2},
    };
    for (size_t i = 0; i < NELEM(big); i++)
        run_case(tc, big[i]);
    hash_flush(tc);
}

/* Full-precision float data: results within a tolerance of the reference,
 * and bitwise equal on every rank (checked through the hashes). */
static void matrix_inexact(tcomm_t *tc)
{
    size_t       n      = (size_t)tc->size;
    const case_t list[] = {
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F32,
         .op    = BRAID_SUM,
         .count = 1001},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F16,
         .op    = BRAID_SUM,
         .count = 1001},
        {.coll    = BRAID_COLL_ALLREDUCE,
         .dtype   = BRAID_BF16,
         .op      = BRAID_SUM,
         .count   = 1001,
         .inplace = 1},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F64,
         .op    = BRAID_SUM,
         .count = 17},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F32,
         .op    = BRAID_AVG,
         .count = 17},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F16,
         .op    = BRAID_PROD,
         .count = 1001},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_BF16,
         .op    = BRAID_MAX,
         .count = 1001},
        {.coll    = BRAID_COLL_ALLREDUCE,
         .dtype   = BRAID_F32,
         .op      = BRAID_SUM,
         .count   = MID_COUNT,
         .inplace = 1},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_BF16,
         .op    = BRAID_AVG,
         .count = MID_COUNT},
        {.coll  = BRAID_COLL_REDUCE_SCATTER,
         .dtype = BRAID_F32,
         .op    = BRAID_SUM,
         .count = 1001},
        {.coll    = BRAID_COLL_REDUCE_SCATTER,
         .dtype   = BRAID_F16,
         .op      = BRAID_SUM,
         .count   = 17,
         .inplace = 1},
        {.coll  = BRAID_COLL_REDUCE_SCATTER,
         .dtype = BRAID_BF16,
         .op    = BRAID_AVG,
         .count = MID_COUNT / n},
    };
    size_t nlist = g.quick ? 4 : NELEM(list);
    for (size_t i = 0; i < nlist; i++) {
        case_t c  = list[i];
        c.inexact = 1;
        run_case(tc, c);
    }
    hash_flush(tc);
}

/* count 0 with NULL buffers is a valid no-op for every collective. */
static void null_zero_cases(tcomm_t *tc)
{
    for (int c = BRAID_COLL_ALLREDUCE; c <= BRAID_COLL_BROADCAST; c++)
        run_case(tc, (case_t){.coll      = (braid_coll_t)c,
                              .dtype     = BRAID_F32,
                              .count     = 0,
                              .null_bufs = 1,
                              .inplace   = c == BRAID_COLL_BROADCAST});
}

/* ---------------------------------------------------------------- barrier */

/* Ranks enter the barrier at staggered times; nobody may leave before the
 * last one entered.  Needs one shared clock, so only when every rank runs on
 * this host (CLOCK_MONOTONIC is per host). */
static void test_barrier(tcomm_t *tc)
{
    char   host[64] = "", *hosts;
    size_t n        = (size_t)tc->size;
    gethostname(host, sizeof(host) - 1);
    hosts = malloc(n * sizeof(host));
    double t[2], *all = malloc(n * sizeof(t));
    if (hosts == NULL || all == NULL)
        exit(1);
    if (!wanted(BRAID_COLL_BARRIER)) {
        free(hosts);
        free(all);
        return;
    }
    snprintf(g.current, sizeof(g.current), "[%s] barrier test", tc->label);
    braid_status_t st =
        braid_allgather(host, hosts, sizeof(host), BRAID_U8, tc->comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "%s", g.current);
    int one_host = 1;
    for (size_t r = 0; r < n; r++)
        one_host &= strcmp(hosts + r * sizeof(host), host) == 0;

    for (int round = 0; round < 3; round++) {
        /* A different rank is late in each round. */
        if (tc->rank == (round * 5 + 1) % tc->size)
            usleep(30000);
        t[0] = mp_now();
        barrier_or_die(tc);
        t[1] = mp_now();
        st   = braid_allgather(t, all, 2, BRAID_F64, tc->comm);
        if (st != BRAID_OK)
            mp_fatal(PROG, g.world_rank, st, "%s", g.current);
        double last_in = 0.0;
        for (size_t r = 0; r < n; r++)
            last_in = fmax(last_in, all[2 * r]);
        if (one_host && t[1] < last_in) {
            g.failures++;
            fprintf(stderr,
                    PROG " FAIL [%s] barrier rank=%d/%d: left the "
                         "barrier %.6f s before the last rank entered it\n",
                    tc->label, tc->rank, tc->size, last_in - t[1]);
        }
        g.cases++;
    }
    free(hosts);
    free(all);
}

/* ------------------------------------------------------------ non-blocking */

static braid_request_t *issue_nb(tcomm_t *tc, case_t *c)
{
    braid_request_t *req = NULL;
    case_setup(tc, c);
    braid_status_t st = braid_iallreduce(c->sendbuf, c->recvbuf, c->count,
                                         c->dtype, c->op, tc->comm, &req);
    if (st != BRAID_OK && st != BRAID_INPROGRESS)
        mp_fatal(PROG, g.world_rank, st, "iallreduce %s", g.current);
    if (req == NULL)
        mp_fatal(PROG, g.world_rank, st, "iallreduce %s gave no request",
                 g.current);
    return req;
}

static void wait_or_die(braid_request_t *req, const char *what)
{
    braid_status_t st = braid_wait(req);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "braid_wait of %s", what);
}

/* Polls every request with braid_test until all are done. */
static void poll_all(braid_request_t **reqs, int n)
{
    int left = n;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (reqs[i] == NULL)
                continue;
            int            done = 0;
            braid_status_t st   = braid_test(reqs[i], &done);
            if (done) {
                if (st != BRAID_OK)
                    mp_fatal(PROG, g.world_rank, st,
                             "braid_test of "
                             "request %d completed with an error",
                             i);
                reqs[i] = NULL; /* freed by braid_test */
                left--;
            } else if (st != BRAID_OK && st != BRAID_INPROGRESS) {
                mp_fatal(PROG, g.world_rank, st, "braid_test of request %d",
                         i);
            }
        }
        sched_yield(); /* ranks may share cores */
    }
}

#define NB_MAX 6

static int nb_cases(tcomm_t *tc, case_t *cs)
{
    const case_t list[NB_MAX] = {
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F32,
         .op    = BRAID_SUM,
         .count = 1001},
        {.coll    = BRAID_COLL_ALLREDUCE,
         .dtype   = BRAID_I32,
         .op      = BRAID_MAX,
         .count   = 17,
         .inplace = 1},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F64,
         .op    = BRAID_AVG,
         .count = 1},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_U8,
         .op    = BRAID_PROD,
         .count = 4099},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_BF16,
         .op    = BRAID_MIN,
         .count = 0},
        {.coll    = BRAID_COLL_ALLREDUCE,
         .dtype   = BRAID_F32,
         .op      = BRAID_SUM,
         .count   = g.big && tc->tag == 1 ? BIG_COUNT : MID_COUNT,
         .inplace = 1},
    };
    memcpy(cs, list, sizeof(list));
    return NB_MAX;
}

static void test_nonblocking(tcomm_t *tc)
{
    case_t           cs[NB_MAX];
    braid_request_t *reqs[NB_MAX];
    int              n = nb_cases(tc, cs);

    if (!wanted(BRAID_COLL_ALLREDUCE))
        return;
    /* Several outstanding, waited for newest first: waiting on a later
     * request must drive the earlier ones to completion too. */
    for (int i = 0; i < n; i++)
        reqs[i] = issue_nb(tc, &cs[i]);
    for (int i = n - 1; i >= 0; i--)
        wait_or_die(reqs[i], "iallreduce (reverse-order wait)");
    for (int i = 0; i < n; i++)
        case_check(tc, &cs[i]);

    /* Several outstanding, completed by polling only. */
    n = nb_cases(tc, cs);
    for (int i = 0; i < n; i++)
        reqs[i] = issue_nb(tc, &cs[i]);
    poll_all(reqs, n);
    for (int i = 0; i < n; i++)
        case_check(tc, &cs[i]);

    /* A blocking collective while two are pending completes them first. */
    n       = nb_cases(tc, cs);
    reqs[0] = issue_nb(tc, &cs[0]);
    reqs[1] = issue_nb(tc, &cs[1]);
    case_setup(tc, &cs[2]);
    braid_status_t st = case_call(tc, &cs[2]);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "blocking %s behind iallreduce",
                 g.current);
    wait_or_die(reqs[1], "iallreduce after a blocking call");
    wait_or_die(reqs[0], "iallreduce after a blocking call");
    for (int i = 0; i < 3; i++)
        case_check(tc, &cs[i]);
    hash_flush(tc);
}

/* ------------------------------------------------------------------ split */

typedef struct {
    const char *label;
    int (*color)(int rank, int size);
    int (*key)(int rank, int size);
} split_spec_t;

static int color_parity(int r, int n)
{
    (void)n;
    return r % 2;
}
static int key_rank(int r, int n)
{
    (void)n;
    return r;
}
static int color_zero(int r, int n)
{
    (void)r;
    (void)n;
    return 0;
}
static int key_reverse(int r, int n)
{
    (void)n;
    return -r;
}
static int color_mod3(int r, int n)
{
    (void)n;
    return r % 3 == 1 ? BRAID_UNDEFINED : r % 3;
}
static int key_zero(int r, int n)
{
    (void)r;
    (void)n;
    return 0;
}
static int color_halves(int r, int n) { return r < n / 2 ? 5 : 9; }
static int key_desc_mod2(int r, int n) { return (n - r) % 2; }

/* Members of rank's group in sub-rank order; returns the group size (0 for
 * BRAID_UNDEFINED). */
static int split_members(const split_spec_t *sp, int size, int rank,
                         int *members)
{
    int color = sp->color(rank, size), m = 0;
    if (color == BRAID_UNDEFINED)
        return 0;
    for (int r = 0; r < size; r++)
        if (sp->color(r, size) == color)
            members[m++] = r;
    /* Insertion sort by (key, old rank): the documented order. */
    for (int i = 1; i < m; i++) {
        int v = members[i], j = i;
        while (j > 0 && (sp->key(members[j - 1], size) > sp->key(v, size) ||
                         (sp->key(members[j - 1], size) == sp->key(v, size) &&
                          members[j - 1] > v))) {
            members[j] = members[j - 1];
            j--;
        }
        members[j] = v;
    }
    return m;
}

/* A few collectives on a sub-communicator (interleaved with the parent). */
static void small_matrix(tcomm_t *tc, tcomm_t *parent)
{
    const case_t list[] = {
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F32,
         .op    = BRAID_SUM,
         .count = 1001},
        {.coll    = BRAID_COLL_ALLREDUCE,
         .dtype   = BRAID_F32,
         .op      = BRAID_SUM,
         .count   = 1001,
         .inplace = 1},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_I32,
         .op    = BRAID_MAX,
         .count = 17},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_F64,
         .op    = BRAID_AVG,
         .count = 1},
        {.coll  = BRAID_COLL_ALLREDUCE,
         .dtype = BRAID_BF16,
         .op    = BRAID_PROD,
         .count = 5},
        {.coll  = BRAID_COLL_REDUCE_SCATTER,
         .dtype = BRAID_F32,
         .op    = BRAID_SUM,
         .count = 5},
        {.coll    = BRAID_COLL_REDUCE_SCATTER,
         .dtype   = BRAID_I64,
         .op      = BRAID_MIN,
         .count   = 1,
         .inplace = 1},
        {.coll = BRAID_COLL_ALLGATHER, .dtype = BRAID_U8, .count = 33},
        {.coll    = BRAID_COLL_ALLGATHER,
         .dtype   = BRAID_F64,
         .count   = 3,
         .inplace = 1},
        {.coll  = BRAID_COLL_BROADCAST,
         .dtype = BRAID_I32,
         .count = 17,
         .root  = -1 /* last rank */},
        {.coll = BRAID_COLL_BROADCAST, .dtype = BRAID_F16, .count = 1001},
        {.coll    = BRAID_COLL_ALLREDUCE,
         .dtype   = BRAID_F16,
         .op      = BRAID_SUM,
         .count   = 1001,
         .inexact = 1},
        {.coll    = BRAID_COLL_REDUCE_SCATTER,
         .dtype   = BRAID_BF16,
         .op      = BRAID_SUM,
         .count   = 33,
         .inexact = 1},
    };
    for (size_t i = 0; i < NELEM(list); i++) {
        case_t c = list[i];
        if (c.root < 0)
            c.root = tc->size - 1;
        run_case(tc, c);
        /* The parent's calls must not be confused with the child's. */
        if (parent != NULL && i % 4 == 0)
            run_case(parent, (case_t){.coll  = BRAID_COLL_ALLREDUCE,
                                      .dtype = BRAID_I32,
                                      .op    = BRAID_SUM,
                                      .count = 3});
    }
    barrier_or_die(tc);
    hash_flush(tc);
}

/* Splits parent by spec; checks rank, size and member order; returns the
 * new communicator's state in sub (sub->comm NULL if this rank has none). */
static void do_split(tcomm_t *parent, const split_spec_t *sp, tcomm_t *sub)
{
    int *members = malloc(sizeof(int) * (size_t)parent->size);
    int  m       = split_members(sp, parent->size, parent->rank, members);
    memset(sub, 0, sizeof(*sub));
    sub->label = sp->label;
    snprintf(g.current, sizeof(g.current), "[%s] braid_comm_split of [%s]",
             sp->label, parent->label);
    braid_status_t st =
        braid_comm_split(parent->comm, sp->color(parent->rank, parent->size),
                         sp->key(parent->rank, parent->size), &sub->comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "%s", g.current);
    g.cases++;
    if (m == 0) {
        if (sub->comm != NULL) {
            g.failures++;
            fprintf(stderr,
                    PROG " FAIL [%s] rank=%d: color BRAID_UNDEFINED "
                         "gave a communicator\n",
                    sp->label, parent->rank);
        }
        sub->comm = NULL;
        free(members);
        return;
    }
    if (sub->comm == NULL)
        mp_fatal(PROG, g.world_rank, BRAID_ERR_INTERNAL,
                 "[%s] split returned no communicator", sp->label);
    sub->rank    = braid_comm_rank(sub->comm);
    sub->size    = braid_comm_size(sub->comm);
    sub->tag     = ref_hash(parent->tag, sp->label, strlen(sp->label));
    int exp_rank = 0;
    while (members[exp_rank] != parent->rank)
        exp_rank++;
    if (sub->size != m || sub->rank != exp_rank) {
        g.failures++;
        fprintf(stderr,
                PROG " FAIL [%s] parent rank %d: got rank %d of %d, "
                     "expected rank %d of %d\n",
                sp->label, parent->rank, sub->rank, sub->size, exp_rank, m);
        mp_fatal(PROG, g.world_rank, BRAID_ERR_INTERNAL, "split layout");
    }
    /* Everyone's parent rank, gathered in sub-rank order. */
    int32_t mine = parent->rank, *got = malloc(sizeof(int32_t) * (size_t)m);
    st = braid_allgather(&mine, got, 1, BRAID_I32, sub->comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "[%s] allgather of ranks", sp->label);
    for (int i = 0; i < m; i++) {
        if (got[i] == members[i])
            continue;
        g.failures++;
        fprintf(stderr,
                PROG " FAIL [%s] rank=%d/%d: sub-rank %d is parent "
                     "rank %d, expected %d\n",
                sp->label, sub->rank, sub->size, i, (int)got[i], members[i]);
    }
    free(got);
    free(members);
}

static void finalize_sub(tcomm_t *sub)
{
    if (sub->comm == NULL)
        return;
    snprintf(g.current, sizeof(g.current), "[%s] braid_finalize", sub->label);
    braid_status_t st = braid_finalize(sub->comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.world_rank, st, "%s", g.current);
    sub->comm = NULL;
}

/* Requests pending on two communicators at once (the second one may not
 * include this rank), completed newest first. */
static void nb_two_comms(tcomm_t *a, tcomm_t *b)
{
    case_t ca = {.coll  = BRAID_COLL_ALLREDUCE,
                 .dtype = BRAID_F32,
                 .op    = BRAID_SUM,
                 .count = 1001};
    case_t cb = {.coll    = BRAID_COLL_ALLREDUCE,
                 .dtype   = BRAID_I64,
                 .op      = BRAID_MAX,
                 .count   = 4097,
                 .inplace = 1};
    if (!wanted(BRAID_COLL_ALLREDUCE))
        return;
    braid_request_t *ra = issue_nb(a, &ca);
    braid_request_t *rb = b->comm != NULL ? issue_nb(b, &cb) : NULL;
    if (rb != NULL)
        wait_or_die(rb, "iallreduce on a sub-communicator");
    wait_or_die(ra, "iallreduce on the parent while a child's was pending");
    case_check(a, &ca);
    if (rb != NULL)
        case_check(b, &cb);
}

static void test_split(tcomm_t *world)
{
    static const split_spec_t specs[] = {
        {"split-parity", color_parity, key_rank},
        {"split-reversed", color_zero, key_reverse},
        {"split-mod3-undef", color_mod3, key_zero},
        {"split-halves", color_halves, key_desc_mod2},
    };
    static const split_spec_t nested = {"split-parity/reversed", color_zero,
                                        key_reverse};
    tcomm_t                   subs[NELEM(specs)], inner;

    /* All communicators alive at once, used in turn. */
    for (size_t i = 0; i < NELEM(specs); i++)
        do_split(world, &specs[i], &subs[i]);
    nb_two_comms(world, &subs[2]);
    nb_two_comms(world, &subs[3]);
    for (size_t i = 0; i < NELEM(specs); i++) {
        if (subs[i].comm != NULL)
            small_matrix(&subs[i], NULL);
        /* Every world rank takes part, member of subs[i] or not. */
        run_case(world, (case_t){.coll  = BRAID_COLL_ALLGATHER,
                                 .dtype = BRAID_I64,
                                 .count = 2});
    }
    do_split(&subs[0], &nested, &inner);
    small_matrix(&inner, &subs[0]);
    test_nonblocking(&inner);
    finalize_sub(&inner);
    for (size_t i = 0; i < NELEM(specs); i++)
        finalize_sub(&subs[i]);
    hash_flush(world);
}

/* ---------------------------------------------------------------- driver */

/* Collectives each known algorithm implements, for --algo. */
static const struct {
    const char *algo;
    const char *colls;
} algo_colls[] = {
    {"ring", "allreduce,reduce_scatter,allgather,broadcast,barrier"},
    {"recdbl", "allreduce,reduce_scatter,allgather,broadcast,barrier"},
    {"oneshot", "allreduce"},
    {"twoshot", "allreduce"},
    {"direct", "allgather,reduce_scatter,barrier"},
    {"linear", "broadcast"},
    {"pull", "allreduce,reduce_scatter,allgather"},
    {"pipe", "allreduce,reduce_scatter,allgather"},
    {"rabenseifner", "allreduce"},
    {"halving", "allreduce"},
    {"hier", "allreduce,reduce_scatter,allgather,broadcast"},
};

static const char *colls_of(const char *cand)
{
    size_t len = strcspn(cand, "@,");
    for (size_t i = 0; i < NELEM(algo_colls); i++)
        if (strlen(algo_colls[i].algo) == len &&
            strncmp(algo_colls[i].algo, cand, len) == 0)
            return algo_colls[i].colls;
    return "allreduce";
}

/* With --algo, every collective it covers must report the override. */
static void check_choices(tcomm_t *tc, const char *colls)
{
    char  list[256], cand[64], why[64];
    char *save = NULL;
    snprintf(list, sizeof(list), "%s", colls);
    for (char *c = strtok_r(list, ",", &save); c != NULL;
         c       = strtok_r(NULL, ",", &save)) {
        int coll = mp_parse_coll(c);
        /* Data-less calls complete locally; barrier is the exception. */
        size_t first = coll == BRAID_COLL_BARRIER ? 0 : 4;
        size_t last  = coll == BRAID_COLL_BARRIER ? 0 : (4u << 20);
        for (size_t bytes = first; bytes <= last;
             bytes        = bytes * 32 + !bytes) {
            braid_status_t st =
                braid_comm_choice(tc->comm, (braid_coll_t)coll, bytes, cand,
                                  sizeof(cand), why, sizeof(why));
            g.cases++;
            if (st != BRAID_OK)
                mp_fatal(PROG, g.world_rank, st, "braid_comm_choice(%s, %zu)",
                         c, bytes);
            /* The world communicator runs the first of the list. */
            size_t first_len = strcspn(g.algo, ",");
            if (strlen(cand) != first_len ||
                strncmp(cand, g.algo, first_len) != 0) {
                g.failures++;
                fprintf(stderr,
                        PROG " FAIL rank %d: BRAID_ALGO=%s but "
                             "braid_comm_choice(%s, %zu bytes) = %s (%s)\n",
                        tc->rank, g.algo_env, c, bytes, cand, why);
            }
        }
    }
}

static void print_choices(tcomm_t *tc)
{
    if (tc->rank != 0)
        return;
    for (int c = BRAID_COLL_ALLREDUCE; c <= BRAID_COLL_BROADCAST; c++) {
        printf("# %s:", coll_name((braid_coll_t)c));
        for (size_t bytes = 8; bytes <= (8u << 20); bytes *= 32) {
            char cand[64], why[64];
            if (braid_comm_choice(tc->comm, (braid_coll_t)c, bytes, cand,
                                  sizeof(cand), why, sizeof(why)) != BRAID_OK)
                snprintf(cand, sizeof(cand), "error");
            printf(" %zuB=%s", bytes, cand);
        }
        printf("\n");
    }
    fflush(stdout);
}

/* "allreduce,broadcast" -> g.only. */
static int parse_only(const char *list)
{
    char buf[256], *save = NULL;
    if (strlen(list) >= sizeof(buf))
        return -1;
    strcpy(buf, list);
    g.only = 0;
    for (char *c = strtok_r(buf, ",", &save); c != NULL;
         c       = strtok_r(NULL, ",", &save)) {
        int coll = mp_parse_coll(c);
        if (coll < 0)
            return -1;
        g.only |= 1u << coll;
    }
    return g.only ? 0 : -1;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: " PROG " [options]   (run under braidrun/mpirun)\n"
        "  --algo CAND        force candidate CAND (\"ring@ucx\") on the\n"
        "                     collectives it implements (sets BRAID_ALGO);\n"
        "                     CAND,NEXT,...: communicators without CAND\n"
        "                     (splits) run the next; the world runs CAND\n"
        "  --algo-colls LIST  collectives to force it on (comma list)\n"
        "  --only LIST        test only these collectives (comma list;\n"
        "                     with --algo, default: the forced ones)\n"
        "  --quick            reduced matrix (fewer dtypes/ops, no big)\n"
        "  --no-big           skip the counts above 1M\n"
        "  --seed N           input seed (default 0x5eed)\n"
        "  --timeout S        watchdog in seconds (default 280, 0 off)\n");
}

int main(int argc, char **argv)
{
    const char *colls      = NULL;
    unsigned    timeout    = 280;
    int         only_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            g.quick = 1;
        } else if (strcmp(a, "--no-big") == 0) {
            g.big = 0;
        } else if (strcmp(a, "--algo") == 0 && v) {
            g.algo = v;
            i++;
        } else if (strcmp(a, "--algo-colls") == 0 && v) {
            colls = v;
            i++;
        } else if (strcmp(a, "--only") == 0 && v) {
            only_given = 1;
            if (parse_only(v) != 0) {
                fprintf(stderr, PROG ": bad --only '%s'\n", v);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            g.seed = strtoull(v, NULL, 0);
            i++;
        } else if (strcmp(a, "--timeout") == 0 && v) {
            timeout = (unsigned)strtoul(v, NULL, 0);
            i++;
        } else {
            usage(strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ? stdout
                                                                   : stderr);
            return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ? 0 : 2;
        }
    }
    if (g.quick)
        g.big = 0;
    if (g.algo != NULL) {
        if (colls == NULL)
            colls = colls_of(g.algo);
        if (!only_given && parse_only(colls) != 0) {
            fprintf(stderr, PROG ": bad --algo-colls '%s'\n", colls);
            return 2;
        }
        if (mp_algo_string(g.algo, colls, g.algo_env, sizeof(g.algo_env))) {
            fprintf(stderr, PROG ": bad --algo-colls '%s'\n", colls);
            return 2;
        }
        setenv("BRAID_ALGO", g.algo_env, 1);
    } else if (getenv("BRAID_ALGO") != NULL) {
        snprintf(g.algo_env, sizeof(g.algo_env), "%s", getenv("BRAID_ALGO"));
    }

    double        t0   = mp_now();
    braid_comm_t *comm = NULL;
    g.current_p        = g.current;
    snprintf(g.current, sizeof(g.current), "braid_init");
    mp_watchdog(PROG, timeout, &g.current_p);
    braid_status_t st = braid_init(&comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, -1, st, "braid_init");
    tcomm_t world = {.comm  = comm,
                     .rank  = braid_comm_rank(comm),
                     .size  = braid_comm_size(comm),
                     .label = "world",
                     .tag   = 1};
    g.world_rank  = world.rank;
    static char wd_name[64];
    snprintf(wd_name, sizeof(wd_name), PROG " rank %d", world.rank);
    mp_watchdog_name(wd_name);
    if (world.rank == 0) {
        printf("# " PROG ": %d ranks, BRAID_ALGO=%s%s%s\n", world.size,
               g.algo_env[0] ? g.algo_env : "(auto)", g.quick ? ", quick" : "",
               g.only != (1u << BRAID_COLL_COUNT) - 1
                   ? ", some collectives only"
                   : "");
        fflush(stdout);
    }
    if (g.algo != NULL)
        check_choices(&world, colls);
    print_choices(&world);

    matrix_reduction(&world, BRAID_COLL_ALLREDUCE);
    barrier_or_die(&world);
    matrix_reduction(&world, BRAID_COLL_REDUCE_SCATTER);
    matrix_allgather(&world);
    matrix_broadcast(&world);
    null_zero_cases(&world);
    matrix_sizes(&world);
    matrix_inexact(&world);
    test_barrier(&world);
    test_nonblocking(&world);
    test_split(&world);
    hash_flush(&world);

    /* Every rank fails the run if any rank saw a failure. */
    int64_t fails = g.failures, total = 0;
    snprintf(g.current, sizeof(g.current), "final allreduce of failures");
    st = braid_allreduce(&fails, &total, 1, BRAID_I64, BRAID_SUM, comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, world.rank, st, "final allreduce");
    printf(PROG " rank %d/%d: %s: %ld cases, %ld failed here, %" PRId64
                " on all ranks; BRAID_ALGO=%s; %.1f s\n",
           world.rank, world.size, total || g.failures ? "FAIL" : "PASS",
           g.cases, g.failures, total, g.algo_env[0] ? g.algo_env : "(auto)",
           mp_now() - t0);
    fflush(stdout);
    snprintf(g.current, sizeof(g.current), "braid_finalize");
    st = braid_finalize(comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, world.rank, st, "braid_finalize");
    return total || g.failures ? 1 : 0;
}
