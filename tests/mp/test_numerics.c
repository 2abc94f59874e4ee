/* Numerics every candidate must get right, bit for bit, under braidrun:
 *
 *   test_numerics --cands "allreduce:oneshot@shm reduce_scatter:ring@ucx ..."
 *
 * For each candidate (a communicator of its own, split off with BRAID_ALGO
 * forcing it):
 *   - NaN payloads: f32/f64/f16/bf16 inputs with NaNs of different payloads
 *     and signs on different ranks, signalling NaNs, +inf and -inf on
 *     different ranks, for sum, prod, avg, min and max, in and out of
 *     place, at counts that take the kernels' inline and vector paths.
 *     Every result element must equal the expected bits: the canonical
 *     quiet NaN wherever sum/prod/avg give a NaN, the largest NaN bit
 *     pattern for min/max (braid.h), the exact value elsewhere; and every
 *     rank's result must hash the same.
 *   - Integer avg at the extremes (4 ranks of INT32_MAX, u8 200 and 255,
 *     INT64_MIN/MAX, mixed signs): the exact sum divided with truncation
 *     toward zero, no wraparound.
 *   - Allgather and broadcast: the same NaN-laden inputs arrive bit for bit.
 *   - Full-precision random floats (every mantissa bit, so sums and
 *     products round) with NaN payloads, signed zeros and infinities:
 *     the result is bitwise the left fold in rank order, ((x0 op x1) op
 *     x2) ..., for every candidate on two ranks (x0 op x1, whatever order
 *     it combines in) and for those that say they fold in rank order
 *     (--rank-order) on any number.
 * The candidates come from `braid-info -n N` (tests/mp/run_numerics.sh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

#include "mp_common.h"
#include "reference.h"

static int rank, size, failures, reports;

#define FAIL(...)                                                             \
    do {                                                                      \
        failures++;                                                           \
        if (reports++ < 20) {                                                 \
            fprintf(stderr, "test_numerics rank %d: FAIL: ", rank);           \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
        }                                                                     \
    } while (0)

static const braid_dtype_t fdts[] = {BRAID_F32, BRAID_F64, BRAID_F16,
                                     BRAID_BF16};
static const braid_op_t ops[] = {BRAID_SUM, BRAID_PROD, BRAID_AVG, BRAID_MIN,
                                 BRAID_MAX};
static const size_t     counts[] = {1, 7, 1000};

/* ------------------------------------------------------------ raw bits */

static uint64_t get_bits(braid_dtype_t dt, const void *buf, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)buf + i * ref_size(dt), ref_size(dt));
    return v;
}

static void put_bits(braid_dtype_t dt, void *buf, size_t i, uint64_t v)
{
    memcpy((char *)buf + i * ref_size(dt), &v, ref_size(dt));
}

static uint64_t qnan(braid_dtype_t dt, int neg, unsigned payload)
{
    switch (dt) {
    case BRAID_F32:
        return (neg ? 0xffc00000u : 0x7fc00000u) | (payload & 0x3fffff);
    case BRAID_F64:
        return (neg ? 0xfff8000000000000u : 0x7ff8000000000000u) | payload;
    case BRAID_F16: return (neg ? 0xfe00u : 0x7e00u) | (payload & 0x1ff);
    default: return (neg ? 0xffc0u : 0x7fc0u) | (payload & 0x3f);
    }
}

static uint64_t snan(braid_dtype_t dt)
{
    switch (dt) {
    case BRAID_F32: return 0x7f800001u;
    case BRAID_F64: return 0x7ff0000000000001u;
    case BRAID_F16: return 0x7c01u;
    default: return 0x7f81u;
    }
}

static uint64_t inf_bits(braid_dtype_t dt, int neg)
{
    switch (dt) {
    case BRAID_F32: return neg ? 0xff800000u : 0x7f800000u;
    case BRAID_F64: return neg ? 0xfff0000000000000u : 0x7ff0000000000000u;
    case BRAID_F16: return neg ? 0xfc00u : 0x7c00u;
    default: return neg ? 0xff80u : 0x7f80u;
    }
}

static int is_nan(braid_dtype_t dt, uint64_t v)
{
    switch (dt) {
    case BRAID_F32: return (v & 0x7fffffffu) > 0x7f800000u;
    case BRAID_F64: return (v & 0x7fffffffffffffffu) > 0x7ff0000000000000u;
    case BRAID_F16: return (v & 0x7fffu) > 0x7c00u;
    default: return (v & 0x7fffu) > 0x7f80u;
    }
}

static double to_double(braid_dtype_t dt, uint64_t v)
{
    char buf[8];
    put_bits(dt, buf, 0, v);
    return ref_load_f(dt, buf, 0);
}

static uint64_t from_double(braid_dtype_t dt, double d)
{
    char buf[8] = {0};
    ref_store_f(dt, buf, 0, d);
    return get_bits(dt, buf, 0);
}

/* Rank r's element i: NaNs of every kind on some positions, exact small
 * values (sums exact, products powers of two) elsewhere. */
static uint64_t input(braid_dtype_t dt, int r, size_t i)
{
    static const double vals[] = {1, 2, 0.5, -1, 4};
    switch (i % 8) {
    case 0: /* a NaN on every rank, each with its own payload and sign */
        return qnan(dt, r & 1, (unsigned)(r + 1) << 2 | (unsigned)(i & 3));
    case 3: /* a NaN on one rank */
        if ((int)((i / 8) % (size_t)size) == r)
            return qnan(dt, 0, (unsigned)i & 0xf);
        break;
    case 5: /* a signalling NaN on rank 0 */
        if (r == 0)
            return snan(dt);
        break;
    case 6: /* +inf and -inf on two ranks */
        if (r < 2 && size >= 2)
            return inf_bits(dt, r);
        break;
    default: break;
    }
    return from_double(dt, vals[(r * 3 + (int)i) % 5]);
}

/* What every rank must get for element i. */
static uint64_t expected(braid_dtype_t dt, braid_op_t op, size_t i)
{
    uint64_t nan     = 0;
    int      any_nan = 0;
    for (int r = 0; r < size; r++) {
        uint64_t x = input(dt, r, i);
        if (is_nan(dt, x)) {
            any_nan = 1;
            if (x > nan)
                nan = x;
        }
    }
    if (any_nan)
        return op == BRAID_MIN || op == BRAID_MAX ? nan : qnan(dt, 0, 0);
    double acc = to_double(dt, input(dt, 0, i));
    for (int r = 1; r < size; r++) {
        double x = to_double(dt, input(dt, r, i));
        switch (op) {
        case BRAID_PROD: acc *= x; break;
        case BRAID_MIN: acc = x < acc ? x : acc; break;
        case BRAID_MAX: acc = x > acc ? x : acc; break;
        default: acc += x; break;
        }
    }
    if (acc != acc) /* inf - inf */
        return qnan(dt, 0, 0);
    if (op == BRAID_AVG) {
        /* As the kernels divide: in the element type, halves in f32. */
        if (dt == BRAID_F64)
            acc = acc / size;
        else
            acc = (double)((float)acc / (float)size);
    }
    return from_double(dt, acc);
}

/* One reduction of coll: an all-reduce of n elements or a reduce_scatter
 * of n per rank. */
static braid_status_t reduce_call(braid_comm_t *comm, braid_coll_t coll,
                                  const void *send, void *out, size_t n,
                                  braid_dtype_t dt, braid_op_t op)
{
    return coll == BRAID_COLL_ALLREDUCE
               ? braid_allreduce(send, out, n, dt, op, comm)
               : braid_reduce_scatter(send, out, n, dt, op, comm);
}

/* Every rank hashes its result; all hashes must be equal. */
static void same_everywhere(braid_comm_t *world, const void *buf, size_t len,
                            const char *what)
{
    uint64_t  h   = ref_hash(REF_HASH_INIT, buf, len);
    uint64_t *all = calloc((size_t)size, sizeof(*all));
    if (braid_allgather(&h, all, 1, BRAID_I64, world) != BRAID_OK)
        mp_fatal("test_numerics", rank, BRAID_ERR_INTERNAL, "allgather: %s",
                 braid_last_error());
    for (int r = 1; r < size; r++) {
        if (all[r] != all[0]) {
            FAIL("%s: rank %d's result differs from rank 0's", what, r);
            break;
        }
    }
    free(all);
}

static void check_float(braid_comm_t *comm, braid_comm_t *world,
                        braid_coll_t coll, const char *cand)
{
    for (size_t d = 0; d < sizeof(fdts) / sizeof(fdts[0]); d++) {
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                for (int inplace = 0; inplace < 2; inplace++) {
                    braid_dtype_t dt = fdts[d];
                    braid_op_t    op = ops[o];
                    size_t        n = counts[c], es = ref_size(dt);
                    size_t        nin   = coll == BRAID_COLL_REDUCE_SCATTER
                                              ? n * (size_t)size
                                              : n;
                    size_t        first = coll == BRAID_COLL_REDUCE_SCATTER
                                              ? (size_t)rank * n
                                              : 0;
                    char *send = malloc(nin * es), *recv = malloc(nin * es);
                    for (size_t i = 0; i < nin; i++)
                        put_bits(dt, send, i, input(dt, rank, i));
                    void *out = inplace ? (void *)(send + first * es) : recv;
                    braid_status_t st =
                        reduce_call(comm, coll, send, out, n, dt, op);
                    char what[160];
                    snprintf(what, sizeof(what), "%s %s %s %s n=%zu%s", cand,
                             braid_coll_name(coll), ref_name(dt),
                             ref_op_name(op), n, inplace ? " in place" : "");
                    if (st != BRAID_OK)
                        mp_fatal("test_numerics", rank, st, "%s: %s", what,
                                 braid_last_error());
                    for (size_t j = 0; j < n; j++) {
                        uint64_t got  = get_bits(dt, out, j);
                        uint64_t want = expected(dt, op, first + j);
                        if (got != want) {
                            FAIL("%s: element %zu is 0x%llx, want 0x%llx",
                                 what, first + j, (unsigned long long)got,
                                 (unsigned long long)want);
                            break;
                        }
                    }
                    if (coll == BRAID_COLL_ALLREDUCE)
                        same_everywhere(world, out, n * es, what);
                    free(send);
                    free(recv);
                }
            }
        }
    }
}

/* Allgather and broadcast only move bits: every NaN payload, signalling
 * NaNs included, must arrive as it was sent. */
static void check_copy(braid_comm_t *comm, braid_coll_t coll, const char *cand)
{
    for (size_t d = 0; d < sizeof(fdts) / sizeof(fdts[0]); d++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            braid_dtype_t dt = fdts[d];
            size_t        n = counts[c], es = ref_size(dt);
            int           root = (int)(c % (size_t)size);
            char *send = malloc(n * es), *recv = malloc(n * es * (size_t)size);
            for (size_t i = 0; i < n; i++)
                put_bits(dt, send, i, input(dt, rank, i));
            braid_status_t st = coll == BRAID_COLL_ALLGATHER
                                    ? braid_allgather(send, recv, n, dt, comm)
                                    : braid_broadcast(send, n, dt, root, comm);
            if (st != BRAID_OK)
                mp_fatal("test_numerics", rank, st, "%s %s n=%zu: %s", cand,
                         ref_name(dt), n, braid_last_error());
            int blocks = coll == BRAID_COLL_ALLGATHER ? size : 1;
            for (int b = 0; b < blocks; b++) {
                const char *got  = coll == BRAID_COLL_ALLGATHER
                                       ? recv + (size_t)b * n * es
                                       : send;
                int         from = coll == BRAID_COLL_ALLGATHER ? b : root;
                for (size_t i = 0; i < n; i++) {
                    if (get_bits(dt, got, i) != input(dt, from, i)) {
                        FAIL("%s %s n=%zu: rank %d's element %zu is 0x%llx, "
                             "sent 0x%llx",
                             cand, ref_name(dt), n, from, i,
                             (unsigned long long)get_bits(dt, got, i),
                             (unsigned long long)input(dt, from, i));
                        b = blocks;
                        break;
                    }
                }
            }
            free(send);
            free(recv);
        }
    }
}

/* ------------------------------------------------------ the left fold */

/* Rank r's element i of the rank-order check: every mantissa bit random,
 * so that sums and products round, with a NaN of each rank's own payload,
 * a NaN against numbers, -0 against +0, -0 against -0 (an identity element
 * folded in would make it +0) and inf against -inf among them. */
static uint64_t pair_input(braid_dtype_t dt, int r, size_t i)
{
    uint64_t b = ref_mix(((uint64_t)i << 8) + (uint64_t)r + 0x5eed);
    switch (i % 16) {
    case 1: return qnan(dt, r & 1, (unsigned)(r + 1) << 1 | (unsigned)(b & 1));
    case 2: return r == 0 ? qnan(dt, 1, 5) : from_double(dt, 1.5);
    case 3: return from_double(dt, r == 0 ? -0.0 : 0.0);
    case 4: return from_double(dt, r == 0 ? 0.0 : -0.0);
    case 5: return inf_bits(dt, r & 1);
    case 6: return from_double(dt, -0.0);
    default: break;
    }
    /* [1, 2) times 2^-3 .. 2^3, either sign: products stay finite. */
    double m = 1.0 + (double)(b >> 11) * 0x1p-53;
    int    e = (int)((b >> 3) % 7) - 3;
    return from_double(dt, (b & 1 ? -1.0 : 1.0) * ldexp(m, e));
}

/* The result is bitwise the left fold in rank order, ((x0 op x1) op x2)
 * ... (then / n for avg).  For a candidate that folds in rank order
 * (BRAID_ALGO_RANK_ORDER) on any number of ranks: what lets the core swap
 * such candidates for one another.  And for every candidate on two ranks,
 * where the fold is x0 op x1 and the core's operations commute bit for
 * bit, so combining in either order gives it: what lets online tuning put
 * the candidates that combine through the core's kernels on trial there
 * (BRAID_ALGO_CORE_REDUCE). */
static void check_fold(braid_comm_t *comm, braid_coll_t coll, const char *cand)
{
    const size_t n = 1000;
    for (size_t d = 0; d < sizeof(fdts) / sizeof(fdts[0]); d++) {
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            braid_dtype_t dt = fdts[d];
            braid_op_t    op = ops[o];
            size_t        es = ref_size(dt);
            size_t        nin =
                coll == BRAID_COLL_REDUCE_SCATTER ? (size_t)size * n : n;
            size_t first =
                coll == BRAID_COLL_REDUCE_SCATTER ? (size_t)rank * n : 0;
            char *send = malloc(nin * es), *recv = malloc(nin * es);
            char *xr = malloc(n * es), *want = malloc(n * es);
            for (size_t i = 0; i < nin; i++)
                put_bits(dt, send, i, pair_input(dt, rank, i));
            for (int r = 0; r < size; r++) {
                for (size_t j = 0; j < n; j++)
                    put_bits(dt, r == 0 ? want : xr, j,
                             pair_input(dt, r, first + j));
                if (r > 0)
                    ref_reduce2(want, want, xr, n, dt, op);
            }
            ref_finish_avg(want, n, dt, op, size);
            braid_status_t st = reduce_call(comm, coll, send, recv, n, dt, op);
            if (st != BRAID_OK)
                mp_fatal("test_numerics", rank, st, "%s rank-order %s %s: %s",
                         cand, ref_name(dt), ref_op_name(op),
                         braid_last_error());
            for (size_t j = 0; j < n; j++) {
                uint64_t got = get_bits(dt, recv, j);
                uint64_t exp = get_bits(dt, want, j);
                if (got != exp) {
                    FAIL("%s %s %s %s, %d ranks, full-precision data: "
                         "element %zu is 0x%llx, rank order gives 0x%llx",
                         cand, braid_coll_name(coll), ref_name(dt),
                         ref_op_name(op), size, first + j,
                         (unsigned long long)got, (unsigned long long)exp);
                    break;
                }
            }
            free(send);
            free(recv);
            free(xr);
            free(want);
        }
    }
}

/* ----------------------------------------------------------- integer avg */

static int64_t int_input(braid_dtype_t dt, int r, size_t i)
{
    switch (dt) {
    case BRAID_I32: {
        static const int64_t v[] = {INT32_MAX, INT32_MIN, -7, 7, 1};
        return i < 4 ? v[i] : (r % 2 ? INT32_MIN + r : INT32_MAX - r);
    }
    case BRAID_I64: {
        static const int64_t v[] = {INT64_MAX, INT64_MIN, -9, 9, 1};
        return i < 4 ? v[i] : (r % 2 ? INT64_MIN + r : INT64_MAX - r);
    }
    default: {
        static const int64_t v[] = {200, 255, 0, 1, 3};
        return i < 4 ? v[i] : (r * 97 + (int)i) % 256;
    }
    }
}

static void check_int_avg(braid_comm_t *comm, braid_coll_t coll,
                          const char *cand)
{
    static const braid_dtype_t idts[] = {BRAID_I32, BRAID_I64, BRAID_U8};
    const size_t               n      = 11;
    for (size_t d = 0; d < 3; d++) {
        braid_dtype_t dt = idts[d];
        size_t nin = coll == BRAID_COLL_REDUCE_SCATTER ? n * (size_t)size : n;
        size_t first =
            coll == BRAID_COLL_REDUCE_SCATTER ? (size_t)rank * n : 0;
        char *send = calloc(nin, 8), *recv = calloc(nin, 8);
        /* Rank-dependent except the first 4 elements of each block. */
        for (size_t i = 0; i < nin; i++)
            ref_store_i(dt, send, i, int_input(dt, rank, i % n));
        braid_status_t st =
            reduce_call(comm, coll, send, recv, n, dt, BRAID_AVG);
        if (st != BRAID_OK)
            mp_fatal("test_numerics", rank, st, "%s %s avg: %s", cand,
                     ref_name(dt), braid_last_error());
        for (size_t j = 0; j < n; j++) {
            __int128 sum = 0;
            for (int r = 0; r < size; r++)
                sum += int_input(dt, r, (first + j) % n);
            int64_t want = (int64_t)(sum / size); /* toward zero */
            int64_t got  = ref_load_i(dt, recv, j);
            if (got != want) {
                FAIL("%s %s %s avg element %zu: %lld, want %lld", cand,
                     braid_coll_name(coll), ref_name(dt), j, (long long)got,
                     (long long)want);
                break;
            }
        }
        free(send);
        free(recv);
    }
}

/* Whether candidate "coll:algo@tl" is one of list's "coll:algo" words. */
static int listed(const char *list, const char *cand)
{
    size_t len = strcspn(cand, "@");
    for (const char *w = list; w != NULL && *w != '\0';) {
        w += strspn(w, " ,\n");
        size_t wl = strcspn(w, " ,\n");
        if (wl > 0 && wl == len && strncmp(w, cand, len) == 0)
            return 1;
        w += wl;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char   *cands = NULL, *ordered = NULL;
    braid_comm_t *world;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--cands") == 0)
            cands = argv[++i];
        else if (strcmp(argv[i], "--rank-order") == 0)
            ordered = argv[++i];
    }
    if (cands == NULL) {
        fprintf(stderr, "usage: test_numerics --cands \"COLL:ALGO@TL ...\" "
                        "[--rank-order \"COLL:ALGO ...\"]\n");
        return 2;
    }
    unsetenv("BRAID_ALGO");
    if (braid_init(&world) != BRAID_OK) {
        fprintf(stderr, "test_numerics: braid_init: %s\n", braid_last_error());
        return 1;
    }
    rank       = braid_comm_rank(world);
    size       = braid_comm_size(world);
    char *list = strdup(cands), *save = NULL;
    int   tested = 0, folds = 0;
    for (char *item = strtok_r(list, " ,\n", &save); item != NULL;
         item       = strtok_r(NULL, " ,\n", &save)) {
        char  name[32] = "";
        char *colon    = strchr(item, ':');
        if (colon != NULL && (size_t)(colon - item) < sizeof(name))
            memcpy(name, item, (size_t)(colon - item));
        int coll = mp_parse_coll(name);
        if (coll == BRAID_COLL_BARRIER || coll < 0)
            continue;
        /* BRAID_ALGO is read when a communicator is set up. */
        setenv("BRAID_ALGO", item, 1);
        braid_comm_t  *comm = NULL;
        braid_status_t st   = braid_comm_split(world, 0, rank, &comm);
        unsetenv("BRAID_ALGO");
        if (st != BRAID_OK)
            mp_fatal("test_numerics", rank, st, "split for %s: %s", item,
                     braid_last_error());
        if (coll == BRAID_COLL_ALLGATHER || coll == BRAID_COLL_BROADCAST) {
            check_copy(comm, (braid_coll_t)coll, item);
        } else {
            check_float(comm, world, (braid_coll_t)coll, item);
            check_int_avg(comm, (braid_coll_t)coll, item);
            if (size == 2 || listed(ordered, item)) {
                check_fold(comm, (braid_coll_t)coll, item);
                folds++;
            }
        }
        if ((st = braid_finalize(comm)) != BRAID_OK)
            mp_fatal("test_numerics", rank, st, "finalize %s: %s", item,
                     braid_last_error());
        tested++;
    }
    free(list);
    /* Else a --rank-order list that matched nothing would check nothing. */
    if (ordered != NULL && folds == 0)
        FAIL("--rank-order \"%s\" names none of the candidates", ordered);
    braid_finalize(world);
    printf("test_numerics rank %d: %d candidates, %d failures\n", rank, tested,
           failures);
    return failures != 0 || tested == 0;
}
