/* braid-bench: bandwidth and latency of one braid collective over a range of
 * sizes, in the style of nccl-tests.
 *
 *   braidrun -n 4 braid-bench -b 8 -e 128M -f 2 -C allreduce -d f32 -o sum
 *
 * Every iteration is timed on its own (ranks aligned by a barrier first);
 * the time of an iteration is that of the slowest rank, and the reported
 * time is the MEDIAN over iterations rather than the mean, because the
 * machines this runs on are shared and noisy.  The per-rank times are
 * combined with a braid allreduce (MAX) after the timed loop.
 *
 * "size" is the larger buffer of the call, as in nccl-tests: the receive
 * buffer of allgather (all ranks' data), the send buffer of reduce_scatter;
 * "count" is the number of elements in it.  algbw = size / time and busbw =
 * algbw * factor, the factor turning it into what each link carries:
 * allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, broadcast 1.
 *
 * With -c 1 (the default) one call per size and placement is checked after
 * the timed loop: random inputs (floats that use every mantissa bit, so
 * that the order of the operations shows in the result) against the tests'
 * reference reducer (tests/common/reference.c, written apart from the
 * library's kernels), the result bitwise equal on every rank, and the send
 * buffer untouched.  The ranks' findings travel through another collective
 * than the one under test. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <braid/braid.h>

#include "busbw.h"
#include "cuda_mem.h"
#include "reference.h"

#define SEED    0xbe9c4ull /* of the inputs (tests/common/reference.c) */
#define BATCHES 5 /* --timing batch: batches per row, the median is shown */

typedef struct {
    size_t        minbytes, maxbytes, step;
    int           iters, warmup, check;
    braid_dtype_t dtype;
    braid_op_t    op;
    braid_coll_t  coll;
    int           place; /* -1 both groups, 0 out-of-place, 1 in-place */
    int           root;
    const char   *algo;
    int           csv;      /* rows as CSV only, on stdout (--csv) */
    const char   *csv_path; /* and/or into this file (--csv FILE) */
    FILE         *csv_out;  /* rank 0: where CSV rows go, or NULL */
    int           batch;    /* time back-to-back batches, not single calls */
    int           cuda;     /* -M cuda: the call's buffers are device memory */
    int           shared;   /* -M braid: buffers from braid_mem_alloc */
    int           sizes;    /* --sizes: print the sweep's sizes, run nothing */
} opts_t;

typedef struct {
    braid_comm_t  *comm;
    int            rank, size;
    unsigned char *sbuf, *rbuf; /* allocated for the largest size */
    /* -M cuda: the device copies the calls use; sbuf/rbuf are then where
     * inputs are written and results checked, copied over before and
     * after (outside the timed loop). */
    unsigned char *dsbuf, *drbuf;
    size_t         cap;          /* bytes of each of the four */
    double        *times, *tmax; /* per iteration */
    double         bw_sum;
    int            bw_n;
    int64_t        wrong_total;
} bench_t;

/* One row's sizes. */
typedef struct {
    size_t count;    /* elements in the larger buffer ("count" column) */
    size_t per_rank; /* the count argument of the call */
    size_t bytes;    /* count * dtsize ("size" column) */
} shape_t;

static const char *coll_names[] = {"allreduce", "reduce_scatter", "allgather",
                                   "broadcast"};

/* ----------------------------------------------------------------- errors */

static void die(const bench_t *b, braid_status_t st, const char *what)
{
    /* Before braid_init there is no rank to name: the message of a failed
     * init names host and launcher variables itself. */
    if (b != NULL)
        fprintf(stderr, "braid-bench rank %d: %s failed: %s: %s\n", b->rank,
                what, braid_status_str(st), braid_last_error());
    else
        fprintf(stderr, "braid-bench: %s failed: %s: %s\n", what,
                braid_status_str(st), braid_last_error());
    exit(1);
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: braid-bench [options]   (run under braidrun/mpirun)\n"
        "  -b, --minbytes N     smallest size (K/M/G suffixes), default 8\n"
        "  -e, --maxbytes N     largest size, default 64M\n"
        "  -f, --stepfactor N   size multiplier between rows, default 2\n"
        "  -n, --iters N        timed iterations per row, default 20\n"
        "  -w, --warmup_iters N untimed iterations first, default 5\n"
        "  -c, --check 0/1      verify results and count wrong ones, default "
        "1:\n"
        "                       random inputs against the tests' reference,\n"
        "                       bitwise equal on every rank, send buffer\n"
        "                       untouched\n"
        "  -d, --datatype T     f32 f64 f16 bf16 i32 i64 u8, default f32\n"
        "  -o, --op OP          sum prod min max avg, default sum\n"
        "  -C, --coll C         allreduce reduce_scatter allgather broadcast\n"
        "  -i, --inplace 0/1    only out-of-place (0) or in-place (1); "
        "default both\n"
        "  -r, --root N         broadcast root, default 0\n"
        "      --algo CAND      force a candidate (sets "
        "BRAID_ALGO=coll:CAND)\n"
        "  -t, --timing MODE    percall (default): each call timed alone,\n"
        "                       ranks aligned by a barrier first; batch:\n"
        "                       %d batches of -n calls back to back, time\n"
        "                       per call of each batch\n"
        "  -M, --memory MEM     host (default): buffers from malloc;\n"
        "                       braid: from braid_mem_alloc (peers on the\n"
        "                       host map them); cuda: CUDA device memory\n"
        "                       (the device of the local rank)\n"
        "      --csv [FILE]     CSV rows: on stdout instead of the table, or\n"
        "                       into FILE (rank 0) next to the table\n"
        "      --sizes          print the sizes -b, -e and -f sweep, one a\n"
        "                       line in bytes, and exit (no launcher)\n"
        "  -h, --help           this text\n"
        "size is the larger buffer; time is the median over iterations (or\n"
        "batches) of the slowest rank; the CSV's last column, iqm_us, is\n"
        "the mean of their middle half.  A size that a forced --algo\n"
        "cannot run shows '-'.\n",
        BATCHES);
}

static void bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "braid-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    exit(2);
}

/* ---------------------------------------------------------------- options */

/* "64", "8K", "128M", "1G" (powers of 1024). */
static int parse_size(const char *s, size_t *out)
{
    char              *end;
    unsigned long long v;
    if (*s < '0' || *s > '9')
        return -1;
    v              = strtoull(s, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default: break;
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long  v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},
        {"datatype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},
        {"coll", required_argument, NULL, 'C'},
        {"inplace", required_argument, NULL, 'i'},
        {"root", required_argument, NULL, 'r'},
        {"algo", required_argument, NULL, 'A'},
        {"csv", optional_argument, NULL, 'S'},
        {"timing", required_argument, NULL, 't'},
        {"memory", required_argument, NULL, 'M'},
        {"sizes", no_argument, NULL, 'Z'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int step = 2, c;
    *o       = (opts_t){.minbytes = 8,
                        .maxbytes = (size_t)64 << 20,
                        .iters    = 20,
                        .warmup   = 5,
                        .check    = 1,
                        .dtype    = BRAID_F32,
                        .op       = BRAID_SUM,
                        .coll     = BRAID_COLL_ALLREDUCE,
                        .place    = -1};
    opterr   = 0;
    while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:d:o:C:i:r:t:M:h", longs,
                            NULL)) != -1) {
        switch (c) {
        case 'b':
            if (parse_size(optarg, &o->minbytes))
                bad_usage("bad -b size '%s'", optarg);
            break;
        case 'e':
            if (parse_size(optarg, &o->maxbytes))
                bad_usage("bad -e size '%s'", optarg);
            break;
        case 'f':
            if (parse_int(optarg, 2, 1 << 20, &step))
                bad_usage("bad -f factor '%s' (an integer >= 2)", optarg);
            break;
        case 'n':
            if (parse_int(optarg, 1, 1 << 24, &o->iters))
                bad_usage("bad -n iterations '%s'", optarg);
            break;
        case 'w':
            if (parse_int(optarg, 0, 1 << 24, &o->warmup))
                bad_usage("bad -w iterations '%s'", optarg);
            break;
        case 'c':
            if (parse_int(optarg, 0, 1, &o->check))
                bad_usage("bad -c '%s' (0 or 1)", optarg);
            break;
        case 'd':
            if (ref_parse_dtype(optarg, &o->dtype))
                bad_usage("unknown dtype '%s'", optarg);
            break;
        case 'o':
            if (ref_parse_op(optarg, &o->op))
                bad_usage("unknown op '%s'", optarg);
            break;
        case 'C': {
            int found = -1;
            for (int k = 0; k < 4; k++)
                if (strcmp(optarg, coll_names[k]) == 0)
                    found = k;
            if (found < 0)
                bad_usage("unknown collective '%s'", optarg);
            o->coll = (braid_coll_t)found;
            break;
        }
        case 'i':
            if (parse_int(optarg, 0, 1, &o->place))
                bad_usage("bad -i '%s' (0 or 1)", optarg);
            break;
        case 'r':
            if (parse_int(optarg, 0, 1 << 30, &o->root))
                bad_usage("bad -r root '%s'", optarg);
            break;
        case 'A':
            if (*optarg == '\0' || strchr(optarg, ';') || strchr(optarg, ':'))
                bad_usage("bad --algo '%s' (one candidate, e.g. ring@ucx)",
                          optarg);
            o->algo = optarg;
            break;
        case 'S':
            /* "--csv FILE" as well as "--csv=FILE": braid-bench takes no
             * other operands, so a word after --csv is its file. */
            if (optarg == NULL && optind < argc && argv[optind][0] != '-')
                optarg = argv[optind++];
            if (optarg == NULL)
                o->csv = 1;
            else if (*optarg == '\0')
                bad_usage("bad --csv file '%s'", optarg);
            else
                o->csv_path = optarg;
            break;
        case 't':
            if (strcmp(optarg, "percall") == 0)
                o->batch = 0;
            else if (strcmp(optarg, "batch") == 0)
                o->batch = 1;
            else
                bad_usage("bad --timing '%s' (percall or batch)", optarg);
            break;
        case 'M':
            o->cuda = o->shared = 0;
            if (strcmp(optarg, "cuda") == 0)
                o->cuda = 1;
            else if (strcmp(optarg, "braid") == 0)
                o->shared = 1;
            else if (strcmp(optarg, "host") != 0)
                bad_usage("bad -M memory '%s' (host, braid or cuda)", optarg);
            break;
        case 'Z': o->sizes = 1; break;
        case 'h': usage(stdout); exit(0);
        default: bad_usage("bad option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bad_usage("unexpected argument '%s'", argv[optind]);
    if (o->minbytes > o->maxbytes)
        bad_usage("-b is larger than -e%s", "");
    o->step = (size_t)step;
}

/* The size after bytes (below -e) in the sweep: multiplied by -f, landing
 * exactly on -e and never wrapping.  compare.sh takes the sweep from
 * --sizes, so that a script's sizes are the benchmark's. */
static size_t next_size(const opts_t *o, size_t bytes)
{
    if (bytes == 0)
        return 1;
    return bytes > o->maxbytes / o->step ? o->maxbytes : bytes * o->step;
}

/* ------------------------------------------------------------------- data */

static int is_reduction(braid_coll_t c)
{
    return c == BRAID_COLL_ALLREDUCE || c == BRAID_COLL_REDUCE_SCATTER;
}

/* Element j of rank r's input: random, from the reference's generator
 * (tests/common/reference.c).  For reductions, floats use every mantissa
 * bit, so that another order of the operations gives another rounding:
 * each rank's result is checked against the reference within its
 * tolerance, and bit for bit against rank 0's.  Data movement moves random
 * bit patterns, which must arrive exactly. */
static void put_input(const opts_t *o, int n, int r, size_t j, void *buf,
                      size_t pos)
{
    uint64_t bits = ref_bits(SEED, r, j);
    if (!is_reduction(o->coll)) {
        size_t dts = ref_size(o->dtype);
        memcpy((unsigned char *)buf + pos * dts, &bits, dts);
        return;
    }
    ref_val_t v = ref_input(o->dtype, o->op, 1, n, bits);
    if (ref_is_float(o->dtype))
        ref_store_f(o->dtype, buf, pos, v.f);
    else
        ref_store_i(o->dtype, buf, pos, v.i);
}

static void fill(const opts_t *o, int n, int r, void *buf, size_t first,
                 size_t count)
{
    for (size_t i = 0; i < count; i++)
        put_input(o, n, r, first + i, buf, i);
}

/* ------------------------------------------------------------- the calls */

typedef struct {
    const void *send;
    void       *recv;
} bufs_t;

static bufs_t place_buffers(const opts_t *o, const bench_t *b,
                            const shape_t *sh, int inplace)
{
    size_t slot = (size_t)b->rank * sh->per_rank * ref_size(o->dtype);
    bufs_t r    = {b->sbuf, b->rbuf};
    if (!inplace || o->coll == BRAID_COLL_BROADCAST)
        return r;
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE: r.send = b->rbuf; break;
    case BRAID_COLL_REDUCE_SCATTER: r.recv = b->sbuf + slot; break;
    default: /* allgather */ r.send = b->rbuf + slot; break;
    }
    return r;
}

/* -M cuda: the device address of a place in sbuf or rbuf. */
static void *dev_of(const bench_t *b, const void *p)
{
    const unsigned char *q = p;
    if (q >= b->sbuf && q < b->sbuf + b->cap)
        return b->dsbuf + (q - b->sbuf);
    return b->drbuf + (q - b->rbuf);
}

static braid_status_t call(const opts_t *o, bench_t *b, const shape_t *sh,
                           bufs_t bf)
{
    if (o->cuda) {
        bf.send = dev_of(b, bf.send);
        bf.recv = dev_of(b, bf.recv);
    }
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE:
        return braid_allreduce(bf.send, bf.recv, sh->per_rank, o->dtype, o->op,
                               b->comm);
    case BRAID_COLL_REDUCE_SCATTER:
        return braid_reduce_scatter(bf.send, bf.recv, sh->per_rank, o->dtype,
                                    o->op, b->comm);
    case BRAID_COLL_ALLGATHER:
        return braid_allgather(bf.send, bf.recv, sh->per_rank, o->dtype,
                               b->comm);
    default: /* place_buffers: recv is rbuf */
        return braid_broadcast(bf.recv, sh->per_rank, o->dtype, o->root,
                               b->comm);
    }
}

static void die_cuda(const bench_t *b, const char *why)
{
    fprintf(stderr, "braid-bench rank %d: %s\n", b->rank, why);
    exit(1);
}

/* -M cuda: sbuf and rbuf (what a call reads and writes) to the device,
 * and back. */
static void upload(const opts_t *o, const bench_t *b, const shape_t *sh)
{
    char why[256];
    if (o->cuda &&
        (cm_to_device(b->dsbuf, b->sbuf, sh->bytes, why, sizeof(why)) ||
         cm_to_device(b->drbuf, b->rbuf, sh->bytes, why, sizeof(why))))
        die_cuda(b, why);
}

static void download(const opts_t *o, const bench_t *b, const shape_t *sh)
{
    char why[256];
    if (o->cuda &&
        (cm_to_host(b->sbuf, b->dsbuf, sh->bytes, why, sizeof(why)) ||
         cm_to_host(b->rbuf, b->drbuf, sh->bytes, why, sizeof(why))))
        die_cuda(b, why);
}

/* Writes this rank's input where the call reads it. */
static void fill_inputs(const opts_t *o, bench_t *b, const shape_t *sh,
                        bufs_t bf)
{
    memset(b->rbuf, 0xEE, sh->bytes); /* results must overwrite this */
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE:
    case BRAID_COLL_ALLGATHER:
        fill(o, b->size, b->rank, (void *)bf.send, 0, sh->per_rank);
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        fill(o, b->size, b->rank, b->sbuf, 0, sh->count);
        break;
    default:
        if (b->rank == o->root)
            fill(o, b->size, o->root, b->rbuf, 0, sh->count);
        break;
    }
    upload(o, b, sh);
}

/* Element pos of buf must hold element j of rank r's input, bitwise. */
static int moved_ok(const opts_t *o, const unsigned char *buf, size_t pos,
                    int r, size_t j)
{
    size_t   dts  = ref_size(o->dtype);
    uint64_t bits = ref_bits(SEED, r, j);
    return memcmp(buf + pos * dts, &bits, dts) == 0;
}

/* Wrong elements of this rank's result. */
static int64_t count_wrong(const opts_t *o, const bench_t *b,
                           const shape_t *sh, bufs_t bf)
{
    int64_t wrong = 0;
    size_t  pr    = sh->per_rank;
    char    es[64], gs[64];
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE:
    case BRAID_COLL_REDUCE_SCATTER: {
        size_t first =
            o->coll == BRAID_COLL_ALLREDUCE ? 0 : (size_t)b->rank * pr;
        for (size_t i = 0; i < pr; i++) {
            double    tol;
            ref_val_t exp =
                ref_expect(o->dtype, o->op, 1, SEED, b->size, first + i, &tol);
            wrong += !ref_value_ok(o->dtype, bf.recv, i, exp, tol, es, gs,
                                   sizeof(es));
        }
        break;
    }
    case BRAID_COLL_ALLGATHER:
        for (int r = 0; r < b->size; r++)
            for (size_t i = 0; i < pr; i++)
                wrong += !moved_ok(o, b->rbuf, (size_t)r * pr + i, r, i);
        break;
    default:
        for (size_t i = 0; i < pr; i++)
            wrong += !moved_ok(o, b->rbuf, i, o->root, i);
        break;
    }
    return wrong;
}

/* The bytes of the call's send buffer when it is not also the receive
 * buffer (0 otherwise): the call must leave them as they were. */
static size_t send_bytes(const opts_t *o, const shape_t *sh, int inplace)
{
    if (inplace || o->coll == BRAID_COLL_BROADCAST)
        return 0;
    return (o->coll == BRAID_COLL_REDUCE_SCATTER ? sh->count : sh->per_rank) *
           ref_size(o->dtype);
}

/* Hash of the result every rank holds alike (0 for reduce_scatter, whose
 * ranks hold different blocks). */
static uint64_t result_hash(const opts_t *o, const shape_t *sh, bufs_t bf)
{
    size_t dts = ref_size(o->dtype);
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE:
        return ref_hash(REF_HASH_INIT, bf.recv, sh->per_rank * dts);
    case BRAID_COLL_REDUCE_SCATTER: return 0;
    default: return ref_hash(REF_HASH_INIT, bf.recv, sh->count * dts);
    }
}

/* ---------------------------------------------------------------- timing */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Whether the dispatcher is still timing candidates for this call's size
 * (braid_comm_choice's reason then starts with "on trial"). */
static int on_trial(const opts_t *o, bench_t *b, const shape_t *sh)
{
    char algo[64], why[256];
    return braid_comm_choice(b->comm, o->coll,
                             sh->per_rank * ref_size(o->dtype), algo,
                             sizeof(algo), why, sizeof(why)) == BRAID_OK &&
           strncmp(why, "on trial", 8) == 0;
}

/* Median of the slowest rank's times, in microseconds (and in *iqm_us the
 * mean of their middle half): of single calls, or
 * of the per-call time of back-to-back batches.  A batch is what a decode
 * loop does (one all-reduce after another, the next issued as soon as the
 * last returns), where a rank that finishes early starts the next call
 * while slower ones finish this one; single calls measure one all-reduce
 * from an aligned start. */
static double time_call(double *iqm_us, const opts_t *o, bench_t *b,
                        const shape_t *sh, bufs_t bf)
{
    braid_status_t st;
    int            nt = o->batch ? BATCHES : o->iters;
    /* Warm-up calls come as the timed ones do (single calls each after a
     * barrier, or back to back), and go on while the dispatcher still has
     * candidates on trial for this size (online tuning, docs/tuning.md):
     * the timed calls are the steady state.  Every rank sees the same
     * trial state, so every rank makes as many calls. */
    for (int i = 0;
         i < o->warmup || (i < o->warmup + 256 && on_trial(o, b, sh)); i++) {
        if (!o->batch && (st = braid_barrier(b->comm)) != BRAID_OK)
            die(b, st, "barrier");
        if ((st = call(o, b, sh, bf)) != BRAID_OK)
            die(b, st, "warmup call");
    }
    /* nt timings of `calls` back-to-back calls each (one call per call
     * timing), every one from an aligned start: a rank's time is then the
     * calls', not the time it waited for a peer still busy before. */
    int calls = o->batch ? o->iters : 1;
    for (int i = 0; i < nt; i++) {
        if ((st = braid_barrier(b->comm)) != BRAID_OK)
            die(b, st, "barrier");
        double t0 = now_s();
        for (int k = 0; k < calls; k++)
            if ((st = call(o, b, sh, bf)) != BRAID_OK)
                die(b, st, "timed call");
        b->times[i] = (now_s() - t0) / calls;
    }
    st = braid_allreduce(b->times, b->tmax, (size_t)nt, BRAID_F64, BRAID_MAX,
                         b->comm);
    if (st != BRAID_OK)
        die(b, st, "allreduce of the times");
    qsort(b->tmax, (size_t)nt, sizeof(double), cmp_double);
    size_t n = (size_t)nt;
    double med =
        n % 2 ? b->tmax[n / 2] : 0.5 * (b->tmax[n / 2 - 1] + b->tmax[n / 2]);
    /* The clock may tick in steps as long as a small call (tens of ns on
     * some VMs), so a median of single calls moves by whole steps; the mean
     * of the middle half resolves below a step and still ignores the tails
     * (preemptions, the first call after a barrier on a busy host). */
    size_t lo = n / 4, hi = n - n / 4;
    double sum = 0;
    for (size_t i = lo; i < hi; i++)
        sum += b->tmax[i];
    *iqm_us = hi > lo ? sum / (double)(hi - lo) * 1e6 : med * 1e6;
    return med * 1e6;
}

/* What the ranks found in one checked call, summed over them. */
typedef struct {
    int64_t wrong;   /* elements wrong */
    int64_t differ;  /* ranks whose result differs from rank 0's bitwise */
    int64_t touched; /* ranks whose send buffer the call changed */
} verdict_t;

/* Every rank's findings (wrong, touched, hash), through another collective
 * than the one under test -- allgather, or allreduce when allgather is
 * tested -- so that a broken candidate cannot vouch for itself. */
static verdict_t gather_verdict(const opts_t *o, bench_t *b,
                                const int64_t mine[3])
{
    verdict_t      v = {0, 0, 0};
    braid_status_t st;
    if (o->coll != BRAID_COLL_ALLGATHER) {
        int64_t *all = malloc((size_t)b->size * 3 * sizeof(int64_t));
        if (all == NULL)
            die(b, BRAID_ERR_NO_MEMORY, "the check's allgather");
        if ((st = braid_allgather(mine, all, 3, BRAID_I64, b->comm)) !=
            BRAID_OK)
            die(b, st, "allgather of the check's findings");
        for (int r = 0; r < b->size; r++) {
            v.wrong += all[3 * r];
            v.touched += all[3 * r + 1];
            v.differ += all[3 * r + 2] != all[2];
        }
        free(all);
        return v;
    }
    int64_t sums[2], hmin = 0, hmax = 0;
    if ((st = braid_allreduce(mine, sums, 2, BRAID_I64, BRAID_SUM, b->comm)) !=
            BRAID_OK ||
        (st = braid_allreduce(&mine[2], &hmin, 1, BRAID_I64, BRAID_MIN,
                              b->comm)) != BRAID_OK ||
        (st = braid_allreduce(&mine[2], &hmax, 1, BRAID_I64, BRAID_MAX,
                              b->comm)) != BRAID_OK)
        die(b, st, "allreduce of the check's findings");
    v.wrong   = sums[0];
    v.touched = sums[1];
    v.differ  = hmin != hmax; /* at least one rank: how many is not known */
    return v;
}

/* One verified call after the timed loop: its results against the
 * reference, bitwise across ranks, and its send buffer untouched.  Returns
 * the wrong elements plus the ranks that differ or changed their send
 * buffer, summed over ranks (rank 0 says which; -1 when checking is off). */
static int64_t check_call(const opts_t *o, bench_t *b, const shape_t *sh,
                          bufs_t bf, int inplace)
{
    if (!o->check)
        return -1;
    fill_inputs(o, b, sh, bf);
    size_t         sb     = send_bytes(o, sh, inplace);
    uint64_t       before = ref_hash(REF_HASH_INIT, bf.send, sb);
    braid_status_t st     = call(o, b, sh, bf);
    if (st != BRAID_OK)
        die(b, st, "checked call");
    download(o, b, sh);
    int64_t   mine[3] = {count_wrong(o, b, sh, bf),
                         ref_hash(REF_HASH_INIT, bf.send, sb) != before,
                         (int64_t)result_hash(o, sh, bf)};
    verdict_t v       = gather_verdict(o, b, mine);
    if (b->rank == 0 && (v.differ || v.touched))
        fprintf(o->csv ? stderr : stdout, "# %zu B %s: %s%s%s\n", sh->bytes,
                inplace ? "in-place" : "out-of-place",
                v.differ ? "results differ between ranks bitwise" : "",
                v.differ && v.touched ? "; " : "",
                v.touched ? "the call changed its send buffer" : "");
    return v.wrong + v.differ + v.touched;
}

/* ---------------------------------------------------------------- output */

static void print_header(const opts_t *o, const bench_t *b)
{
    if (o->csv_out != NULL)
        fprintf(o->csv_out, "coll,nranks,size,count,type,redop,algo,"
                            "placement,time_us,algbw_gbps,busbw_gbps,wrong,"
                            "iqm_us\n");
    if (o->csv)
        return;
    const char *env = getenv("BRAID_ALGO"), *pl = getenv("BRAID_PLUGINS");
    printf("# braid-bench %d.%d.%d: %s, %d ranks\n", BRAID_VERSION_MAJOR,
           BRAID_VERSION_MINOR, BRAID_VERSION_PATCH, coll_names[o->coll],
           b->size);
    printf("#  minbytes %zu maxbytes %zu step %zux, iters %d, warmup %d, "
           "check %d, dtype %s, op %s\n",
           o->minbytes, o->maxbytes, o->step, o->iters, o->warmup, o->check,
           ref_name(o->dtype), ref_op_name(o->op));
    if (o->coll == BRAID_COLL_BROADCAST)
        printf("#  root %d (broadcast has one buffer: in-place only)\n",
               o->root);
    printf("#  BRAID_ALGO=%s BRAID_PLUGINS=%s\n", env ? env : "(auto)",
           pl ? pl : "(all found)");
    if (o->cuda)
        printf("#  buffers in CUDA device memory (rank 0: device %d)\n",
               cm_device());
    if (o->shared)
        printf("#  buffers from braid_mem_alloc (peers on the host map "
               "them)\n");
    char topo[512];
    if (braid_comm_topology(b->comm, topo, sizeof(topo)) == BRAID_OK)
        printf("#  topology: %s\n", topo);
    if (o->batch)
        printf("#  time = per call in batches of %d back-to-back calls, "
               "median over %d batches of the slowest rank\n",
               o->iters, BATCHES);
    else
        printf("#  time = median over iterations of the slowest rank\n");
}

static void print_columns(const opts_t *o)
{
    if (o->csv)
        return;
    /* Each group is 40 columns wide; its title is centred over it. */
    printf("#\n# %10s %12s %6s %6s %16s %40s %40s\n", "", "", "", "", "",
           "out-of-place              ", "in-place                ");
    printf("# %10s %12s %6s %6s %16s", "size", "count", "type", "redop",
           "algo");
    for (int k = 0; k < 2; k++)
        printf("   %11s %8s %8s %7s", "time(us)", "algbw", "busbw", "#wrong");
    printf("\n# %10s %12s %6s %6s %16s", "(B)", "(elements)", "", "", "");
    for (int k = 0; k < 2; k++)
        printf("   %11s %8s %8s %7s", "", "(GB/s)", "(GB/s)", "");
    printf("\n");
}

/* Rank and host of every rank, so that a log shows where it ran. */
static void print_ranks(const opts_t *o, bench_t *b)
{
    struct {
        char    host[56];
        int64_t pid;
    } me = {{0}, 0}, *all = calloc((size_t)b->size, sizeof(me));
    if (all == NULL)
        exit(1);
    gethostname(me.host, sizeof(me.host) - 1);
    me.pid = (int64_t)getpid();
    braid_status_t st =
        braid_allgather(&me, all, sizeof(me), BRAID_U8, b->comm);
    if (st != BRAID_OK)
        die(b, st, "allgather of host names");
    if (b->rank == 0 && !o->csv)
        for (int r = 0; r < b->size; r++)
            printf("#  rank %2d: host %s pid %" PRId64 "\n", r, all[r].host,
                   all[r].pid);
    free(all);
}

typedef struct {
    double  us, algbw, busbw;
    double  iqm_us; /* mean of the middle half of the times */
    int64_t wrong;
    int     ran;
} result_t;

static void print_row(const opts_t *o, const bench_t *b, const shape_t *sh,
                      const char *algo, const result_t res[2])
{
    const char *redop = is_reduction(o->coll) ? ref_op_name(o->op) : "none";
    for (int k = 0; k < 2 && o->csv_out != NULL; k++) {
        if (!res[k].ran)
            continue;
        fprintf(o->csv_out,
                "%s,%d,%zu,%zu,%s,%s,%s,%s,%.3f,%.4f,%.4f,%" PRId64 ",%.4f\n",
                coll_names[o->coll], b->size, sh->bytes, sh->count,
                ref_name(o->dtype), redop, algo,
                k ? "in-place" : "out-of-place", res[k].us, res[k].algbw,
                res[k].busbw, res[k].wrong, res[k].iqm_us);
    }
    if (o->csv)
        return;
    printf("  %10zu %12zu %6s %6s %16s", sh->bytes, sh->count,
           ref_name(o->dtype), redop, algo);
    for (int k = 0; k < 2; k++) {
        if (!res[k].ran) {
            printf("   %11s %8s %8s %7s", "-", "-", "-", "-");
            continue;
        }
        char wrong[24];
        if (res[k].wrong < 0)
            snprintf(wrong, sizeof(wrong), "N/A");
        else
            snprintf(wrong, sizeof(wrong), "%" PRId64, res[k].wrong);
        printf("   %11.2f %8.3f %8.3f %7s", res[k].us, res[k].algbw,
               res[k].busbw, wrong);
    }
    printf("\n");
    fflush(stdout);
}

/* --------------------------------------------------------------- driver */

static shape_t shape_of(const opts_t *o, const bench_t *b, size_t bytes)
{
    shape_t sh;
    size_t  dts = ref_size(o->dtype);
    sh.count    = bytes / dts;
    if (o->coll == BRAID_COLL_REDUCE_SCATTER ||
        o->coll == BRAID_COLL_ALLGATHER) {
        sh.per_rank = sh.count / (size_t)b->size;
        sh.count    = sh.per_rank * (size_t)b->size;
    } else {
        sh.per_rank = sh.count;
    }
    sh.bytes = sh.count * dts;
    return sh;
}

static void run_size(const opts_t *o, bench_t *b, size_t bytes)
{
    shape_t  sh = shape_of(o, b, bytes);
    result_t res[2];
    memset(res, 0, sizeof(res));
    char           algo[64], why[64];
    braid_status_t st =
        braid_comm_choice(b->comm, o->coll, sh.per_rank * ref_size(o->dtype),
                          algo, sizeof(algo), why, sizeof(why));
    if (st == BRAID_ERR_NOT_SUPPORTED && o->algo != NULL) {
        /* The forced candidate cannot run this size (a lowhop algorithm
         * above its cap): every rank sees the same, so every rank skips. */
        if (b->rank == 0)
            print_row(o, b, &sh, "-", res);
        return;
    }
    if (st != BRAID_OK)
        die(b, st, "braid_comm_choice");
    for (int k = 0; k < 2; k++) {
        if (o->place >= 0 && o->place != k)
            continue;
        if (k == 0 && o->coll == BRAID_COLL_BROADCAST)
            continue; /* one buffer: there is no out-of-place form */
        bufs_t bf = place_buffers(o, b, &sh, k);
        fill_inputs(o, b, &sh, bf);
        res[k].ran = 1;
        res[k].us  = time_call(&res[k].iqm_us, o, b, &sh, bf);
        res[k].algbw =
            res[k].us > 0 ? (double)sh.bytes / res[k].us / 1e3 : 0.0;
        res[k].busbw = res[k].algbw * braid_bench_bus_factor(o->coll, b->size);
        res[k].wrong = check_call(o, b, &sh, bf, k);
        b->bw_sum += res[k].busbw;
        b->bw_n++;
        if (res[k].wrong > 0)
            b->wrong_total += res[k].wrong;
    }
    /* What ran in the timed calls: the online trial has settled by now. */
    if (b->rank == 0 &&
        braid_comm_choice(b->comm, o->coll, sh.per_rank * ref_size(o->dtype),
                          algo, sizeof(algo), why, sizeof(why)) == BRAID_OK)
        print_row(o, b, &sh, algo, res);
}

int main(int argc, char **argv)
{
    opts_t  o;
    bench_t b = {0};
    parse_opts(argc, argv, &o);
    if (o.sizes) {
        for (size_t bytes = o.minbytes;; bytes = next_size(&o, bytes)) {
            printf("%zu\n", bytes);
            if (bytes >= o.maxbytes)
                return 0;
        }
    }
    if (o.algo != NULL) {
        char env[256];
        snprintf(env, sizeof(env), "%s:%s", coll_names[o.coll], o.algo);
        setenv("BRAID_ALGO", env, 1);
    }
    char why[256];
    if (o.cuda && cm_open(why, sizeof(why)) != 0) {
        fprintf(stderr, "braid-bench: -M cuda: %s\n", why);
        return 1;
    }
    braid_status_t st = braid_init(&b.comm);
    if (st != BRAID_OK)
        die(NULL, st, "braid_init");
    b.rank = braid_comm_rank(b.comm);
    b.size = braid_comm_size(b.comm);
    if (o.coll == BRAID_COLL_BROADCAST && o.root >= b.size) {
        if (b.rank == 0)
            fprintf(stderr,
                    "braid-bench: root %d is not below the %d "
                    "ranks\n",
                    o.root, b.size);
        braid_finalize(b.comm);
        return 2;
    }
    size_t cap = shape_of(&o, &b, o.maxbytes).bytes + 64;
    b.cap      = cap;
    if (o.shared) {
        if ((st = braid_mem_alloc(cap, (void **)&b.sbuf)) != BRAID_OK ||
            (st = braid_mem_alloc(cap, (void **)&b.rbuf)) != BRAID_OK)
            die(&b, st, "braid_mem_alloc");
    } else {
        b.sbuf = malloc(cap);
        b.rbuf = malloc(cap);
    }
    if (o.cuda && (cm_alloc((void **)&b.dsbuf, cap, why, sizeof(why)) ||
                   cm_alloc((void **)&b.drbuf, cap, why, sizeof(why))))
        die_cuda(&b, why);
    size_t ntimes = o.iters > BATCHES ? (size_t)o.iters : BATCHES;
    b.times       = calloc(ntimes, sizeof(double));
    b.tmax        = calloc(ntimes, sizeof(double));
    if (!b.sbuf || !b.rbuf || !b.times || !b.tmax) {
        fprintf(stderr, "braid-bench: cannot allocate %zu bytes\n", cap);
        return 1;
    }
    /* Rank 0 writes the CSV; every rank learns whether it could. */
    int32_t csv_ok = 1;
    if (b.rank == 0 && o.csv)
        o.csv_out = stdout;
    if (b.rank == 0 && o.csv_path != NULL &&
        (o.csv_out = fopen(o.csv_path, "w")) == NULL) {
        fprintf(stderr, "braid-bench: --csv '%s': %s\n", o.csv_path,
                strerror(errno));
        csv_ok = 0;
    }
    if (o.csv_path != NULL &&
        (st = braid_broadcast(&csv_ok, 1, BRAID_I32, 0, b.comm)) != BRAID_OK)
        die(&b, st, "broadcast of the CSV file's state");
    if (!csv_ok)
        return 2;
    if (b.rank == 0)
        print_header(&o, &b);
    print_ranks(&o, &b);
    if (b.rank == 0)
        print_columns(&o);
    for (size_t bytes = o.minbytes;; bytes = next_size(&o, bytes)) {
        run_size(&o, &b, bytes);
        if (bytes >= o.maxbytes)
            break;
    }
    if (b.rank == 0 && !o.csv) {
        printf("# Wrong values: %" PRId64 "%s\n", b.wrong_total,
               o.check ? "" : " (checking off)");
        printf("# Avg bus bandwidth    : %g GB/s\n#\n",
               b.bw_n ? b.bw_sum / b.bw_n : 0.0);
    }
    fflush(stdout);
    if (o.csv_out != NULL && o.csv_out != stdout && fclose(o.csv_out) != 0) {
        fprintf(stderr, "braid-bench: --csv '%s': %s\n", o.csv_path,
                strerror(errno));
        return 2;
    }
    if (o.shared) {
        braid_mem_free(b.sbuf);
        braid_mem_free(b.rbuf);
    } else {
        free(b.sbuf);
        free(b.rbuf);
    }
    cm_free(b.dsbuf);
    cm_free(b.drbuf);
    free(b.times);
    free(b.tmax);
    st = braid_finalize(b.comm);
    if (st != BRAID_OK)
        die(&b, st, "braid_finalize");
    return b.wrong_total > 0 ? 1 : 0;
}
