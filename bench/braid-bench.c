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
 * allreduce 2(n-1)/n, reduce_scatter and allgather (n-1)/n, broadcast 1. */
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
#include "numeric.h"

#define PERIOD 7 /* inputs repeat every PERIOD elements: cheap reference */
#define BATCHES 5 /* --timing batch: batches per row, the median is shown */

typedef struct {
    size_t        minbytes, maxbytes, step;
    int           iters, warmup, check;
    braid_dtype_t dtype;
    braid_op_t    op;
    braid_coll_t  coll;
    int           place;  /* -1 both groups, 0 out-of-place, 1 in-place */
    int           root;
    const char   *algo;
    int           csv;      /* rows as CSV only, on stdout (--csv) */
    const char   *csv_path; /* and/or into this file (--csv FILE) */
    FILE         *csv_out;  /* rank 0: where CSV rows go, or NULL */
    int           batch;  /* time back-to-back batches, not single calls */
    int           cuda;   /* -M cuda: the call's buffers are device memory */
} opts_t;

typedef struct {
    braid_comm_t *comm;
    int           rank, size;
    unsigned char *sbuf, *rbuf; /* allocated for the largest size */
    /* -M cuda: the device copies the calls use; sbuf/rbuf are then where
     * inputs are written and results checked, copied over before and
     * after (outside the timed loop). */
    unsigned char *dsbuf, *drbuf;
    size_t        cap;          /* bytes of each of the four */
    double       *times, *tmax; /* per iteration */
    double        bw_sum;
    int           bw_n;
    int64_t       wrong_total;
} bench_t;

/* One row's sizes. */
typedef struct {
    size_t count;    /* elements in the larger buffer ("count" column) */
    size_t per_rank; /* the count argument of the call */
    size_t bytes;    /* count * dtsize ("size" column) */
} shape_t;

static const char *coll_names[] = {"allreduce", "reduce_scatter",
                                   "allgather", "broadcast"};

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
    fprintf(f,
        "usage: braid-bench [options]   (run under braidrun/mpirun)\n"
        "  -b, --minbytes N     smallest size (K/M/G suffixes), default 8\n"
        "  -e, --maxbytes N     largest size, default 64M\n"
        "  -f, --stepfactor N   size multiplier between rows, default 2\n"
        "  -n, --iters N        timed iterations per row, default 20\n"
        "  -w, --warmup_iters N untimed iterations first, default 5\n"
        "  -c, --check 0/1      verify results and count wrong ones, default 1\n"
        "  -d, --datatype T     f32 f64 f16 bf16 i32 i64 u8, default f32\n"
        "  -o, --op OP          sum prod min max avg, default sum\n"
        "  -C, --coll C         allreduce reduce_scatter allgather broadcast\n"
        "  -i, --inplace 0/1    only out-of-place (0) or in-place (1); "
        "default both\n"
        "  -r, --root N         broadcast root, default 0\n"
        "      --algo CAND      force a candidate (sets BRAID_ALGO=coll:CAND)\n"
        "  -t, --timing MODE    percall (default): each call timed alone,\n"
        "                       ranks aligned by a barrier first; batch:\n"
        "                       %d batches of -n calls back to back, time\n"
        "                       per call of each batch\n"
        "  -M, --memory MEM     host (default) or cuda: buffers in CUDA device\n"
        "                       memory (the device of the local rank)\n"
        "      --csv [FILE]     CSV rows: on stdout instead of the table, or\n"
        "                       into FILE (rank 0) next to the table\n"
        "  -h, --help           this text\n"
        "size is the larger buffer; time is the median over iterations (or\n"
        "batches) of the slowest rank.  A size that a forced --algo cannot\n"
        "run shows '-'.\n", BATCHES);
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
    v = strtoull(s, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int step = 2, c;
    *o = (opts_t){.minbytes = 8, .maxbytes = (size_t)64 << 20, .iters = 20,
                  .warmup = 5, .check = 1, .dtype = BRAID_F32,
                  .op = BRAID_SUM, .coll = BRAID_COLL_ALLREDUCE,
                  .place = -1};
    opterr = 0;
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
            if (nm_parse_dtype(optarg, &o->dtype))
                bad_usage("unknown dtype '%s'", optarg);
            break;
        case 'o':
            if (nm_parse_op(optarg, &o->op))
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
            if (strcmp(optarg, "host") == 0)
                o->cuda = 0;
            else if (strcmp(optarg, "cuda") == 0)
                o->cuda = 1;
            else
                bad_usage("bad -M memory '%s' (host or cuda)", optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            bad_usage("bad option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bad_usage("unexpected argument '%s'", argv[optind]);
    if (o->minbytes > o->maxbytes)
        bad_usage("-b is larger than -e%s", "");
    o->step = (size_t)step;
}

/* ------------------------------------------------------------------- data */

static int is_reduction(braid_coll_t c)
{
    return c == BRAID_COLL_ALLREDUCE || c == BRAID_COLL_REDUCE_SCATTER;
}

/* Input element j of rank r: a small integer, so that every summation order
 * gives the same exact float.  PROD uses ±1 (and {1,2} for u8, which wraps
 * modulo 256 like the dtype) so that nothing overflows. */
static double input_value(const opts_t *o, int r, size_t j)
{
    int k = (int)((j + 3u * (unsigned)r) % PERIOD);
    if (o->op == BRAID_PROD && is_reduction(o->coll))
        return o->dtype == BRAID_U8 ? (k == 0 ? 2 : 1) : (k % 2 ? -1 : 1);
    return o->dtype == BRAID_U8 ? k : k - 3;
}

static void store(braid_dtype_t dt, void *buf, size_t i, double v)
{
    if (nm_is_float(dt))
        nm_store_f(dt, buf, i, v);
    else
        nm_store_i(dt, buf, i, (int64_t)v);
}

static void fill(const opts_t *o, int r, void *buf, size_t first, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store(o->dtype, buf, i, input_value(o, r, first + i));
}

/* Expected reduction of element j over n ranks; depends on j % PERIOD. */
static double reduce_expected(const opts_t *o, int n, size_t j)
{
    double acc = input_value(o, 0, j);
    for (int r = 1; r < n; r++) {
        double v = input_value(o, r, j);
        switch (o->op) {
        case BRAID_PROD: acc *= v; break;
        case BRAID_MIN:  acc = fmin(acc, v); break;
        case BRAID_MAX:  acc = fmax(acc, v); break;
        default:         acc += v; break;
        }
    }
    if (nm_is_float(o->dtype)) {
        if (o->op == BRAID_AVG)
            acc /= n;
        return nm_round_f(o->dtype, acc);
    }
    int64_t i = (int64_t)acc;
    if (o->op == BRAID_AVG)
        i /= n; /* integer AVG truncates */
    return (double)nm_wrap_i(o->dtype, i);
}

static int matches(const opts_t *o, const void *buf, size_t i, double exp)
{
    if (!nm_is_float(o->dtype))
        return (double)nm_load_i(o->dtype, buf, i) == exp;
    double got = nm_load_f(o->dtype, buf, i);
    if (o->op == BRAID_AVG && is_reduction(o->coll))
        return fabs(got - exp) <= 0x1p-6 * fabs(exp); /* bf16: 2 ulp */
    return got == exp;
}

/* ------------------------------------------------------------- the calls */

typedef struct {
    const void *send;
    void       *recv;
} bufs_t;

static bufs_t place_buffers(const opts_t *o, const bench_t *b,
                            const shape_t *sh, int inplace)
{
    size_t slot = (size_t)b->rank * sh->per_rank * nm_size(o->dtype);
    bufs_t r = {b->sbuf, b->rbuf};
    if (!inplace || o->coll == BRAID_COLL_BROADCAST)
        return r;
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE:
        r.send = b->rbuf;
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        r.recv = b->sbuf + slot;
        break;
    default: /* allgather */
        r.send = b->rbuf + slot;
        break;
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
        return braid_allreduce(bf.send, bf.recv, sh->per_rank, o->dtype,
                               o->op, b->comm);
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
    if (o->cuda && (cm_to_device(b->dsbuf, b->sbuf, sh->bytes, why, sizeof(why)) ||
                    cm_to_device(b->drbuf, b->rbuf, sh->bytes, why, sizeof(why))))
        die_cuda(b, why);
}

static void download(const opts_t *o, const bench_t *b, const shape_t *sh)
{
    char why[256];
    if (o->cuda && (cm_to_host(b->sbuf, b->dsbuf, sh->bytes, why, sizeof(why)) ||
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
        fill(o, b->rank, (void *)bf.send, 0, sh->per_rank);
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        fill(o, b->rank, b->sbuf, 0, sh->count);
        break;
    default:
        if (b->rank == o->root)
            fill(o, o->root, b->rbuf, 0, sh->count);
        break;
    }
    upload(o, b, sh);
}

/* Wrong elements of this rank's result. */
static int64_t count_wrong(const opts_t *o, const bench_t *b,
                           const shape_t *sh, bufs_t bf)
{
    int64_t wrong = 0;
    size_t  pr = sh->per_rank;
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE:
    case BRAID_COLL_REDUCE_SCATTER: {
        size_t first = o->coll == BRAID_COLL_ALLREDUCE
                           ? 0 : (size_t)b->rank * pr;
        double exp[PERIOD] = {0};
        for (size_t k = 0; k < PERIOD && k < pr; k++)
            exp[(first + k) % PERIOD] = reduce_expected(o, b->size, first + k);
        for (size_t i = 0; i < pr; i++)
            wrong += !matches(o, bf.recv, i, exp[(first + i) % PERIOD]);
        break;
    }
    case BRAID_COLL_ALLGATHER:
        for (int r = 0; r < b->size; r++)
            for (size_t i = 0; i < pr; i++)
                wrong += !matches(o, b->rbuf, (size_t)r * pr + i,
                                  input_value(o, r, i));
        break;
    default:
        for (size_t i = 0; i < pr; i++)
            wrong += !matches(o, b->rbuf, i, input_value(o, o->root, i));
        break;
    }
    return wrong;
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

/* Median of the slowest rank's times, in microseconds: of single calls, or
 * of the per-call time of back-to-back batches.  A batch is what a decode
 * loop does (one all-reduce after another, the next issued as soon as the
 * last returns), where a rank that finishes early starts the next call
 * while slower ones finish this one; single calls measure one all-reduce
 * from an aligned start. */
static double time_call(const opts_t *o, bench_t *b, const shape_t *sh,
                        bufs_t bf)
{
    braid_status_t st;
    int            nt = o->batch ? BATCHES : o->iters;
    for (int i = 0; i < o->warmup; i++)
        if ((st = call(o, b, sh, bf)) != BRAID_OK)
            die(b, st, "warmup call");
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
    double med = n % 2 ? b->tmax[n / 2]
                       : 0.5 * (b->tmax[n / 2 - 1] + b->tmax[n / 2]);
    return med * 1e6;
}

/* One verified call after the timed loop; wrong elements summed over
 * ranks (-1 when checking is off). */
static int64_t check_call(const opts_t *o, bench_t *b, const shape_t *sh,
                          bufs_t bf)
{
    if (!o->check)
        return -1;
    fill_inputs(o, b, sh, bf);
    braid_status_t st = call(o, b, sh, bf);
    if (st != BRAID_OK)
        die(b, st, "checked call");
    download(o, b, sh);
    int64_t mine = count_wrong(o, b, sh, bf), all = 0;
    st = braid_allreduce(&mine, &all, 1, BRAID_I64, BRAID_SUM, b->comm);
    if (st != BRAID_OK)
        die(b, st, "allreduce of the wrong counts");
    return all;
}

/* ---------------------------------------------------------------- output */

static void print_header(const opts_t *o, const bench_t *b)
{
    if (o->csv_out != NULL)
        fprintf(o->csv_out, "coll,nranks,size,count,type,redop,algo,"
                "placement,time_us,algbw_gbps,busbw_gbps,wrong\n");
    if (o->csv)
        return;
    const char *env = getenv("BRAID_ALGO"), *pl = getenv("BRAID_PLUGINS");
    printf("# braid-bench %d.%d.%d: %s, %d ranks\n", BRAID_VERSION_MAJOR,
           BRAID_VERSION_MINOR, BRAID_VERSION_PATCH, coll_names[o->coll],
           b->size);
    printf("#  minbytes %zu maxbytes %zu step %zux, iters %d, warmup %d, "
           "check %d, dtype %s, op %s\n", o->minbytes, o->maxbytes,
           o->step, o->iters, o->warmup, o->check, nm_name(o->dtype),
           nm_op_name(o->op));
    if (o->coll == BRAID_COLL_BROADCAST)
        printf("#  root %d (broadcast has one buffer: in-place only)\n",
               o->root);
    printf("#  BRAID_ALGO=%s BRAID_PLUGINS=%s\n", env ? env : "(auto)",
           pl ? pl : "(all found)");
    if (o->cuda)
        printf("#  buffers in CUDA device memory (rank 0: device %d)\n",
               cm_device());
    char topo[512];
    if (braid_comm_topology(b->comm, topo, sizeof(topo)) == BRAID_OK)
        printf("#  topology: %s\n", topo);
    if (o->batch)
        printf("#  time = per call in batches of %d back-to-back calls, "
               "median over %d batches of the slowest rank\n", o->iters,
               BATCHES);
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
    braid_status_t st = braid_allgather(&me, all, sizeof(me), BRAID_U8,
                                        b->comm);
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
    int64_t wrong;
    int     ran;
} result_t;

static void print_row(const opts_t *o, const bench_t *b, const shape_t *sh,
                      const char *algo, const result_t res[2])
{
    const char *redop = is_reduction(o->coll) ? nm_op_name(o->op) : "none";
    for (int k = 0; k < 2 && o->csv_out != NULL; k++) {
        if (!res[k].ran)
            continue;
        fprintf(o->csv_out, "%s,%d,%zu,%zu,%s,%s,%s,%s,%.3f,%.4f,%.4f,%" PRId64
                "\n", coll_names[o->coll], b->size, sh->bytes, sh->count,
                nm_name(o->dtype), redop, algo, k ? "in-place" : "out-of-place",
                res[k].us, res[k].algbw, res[k].busbw, res[k].wrong);
    }
    if (o->csv)
        return;
    printf("  %10zu %12zu %6s %6s %16s", sh->bytes, sh->count,
           nm_name(o->dtype), redop, algo);
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
    size_t  dts = nm_size(o->dtype);
    sh.count = bytes / dts;
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
    char     algo[64], why[64];
    braid_status_t st = braid_comm_choice(b->comm, o->coll,
                                          sh.per_rank * nm_size(o->dtype),
                                          algo, sizeof(algo), why,
                                          sizeof(why));
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
        res[k].ran   = 1;
        res[k].us    = time_call(o, b, &sh, bf);
        res[k].algbw = res[k].us > 0 ? (double)sh.bytes / res[k].us / 1e3
                                     : 0.0;
        res[k].busbw =
            res[k].algbw * braid_bench_bus_factor(o->coll, b->size);
        res[k].wrong = check_call(o, b, &sh, bf);
        b->bw_sum += res[k].busbw;
        b->bw_n++;
        if (res[k].wrong > 0)
            b->wrong_total += res[k].wrong;
    }
    if (b->rank == 0)
        print_row(o, b, &sh, algo, res);
}

int main(int argc, char **argv)
{
    opts_t  o;
    bench_t b = {0};
    parse_opts(argc, argv, &o);
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
            fprintf(stderr, "braid-bench: root %d is not below the %d "
                    "ranks\n", o.root, b.size);
        braid_finalize(b.comm);
        return 2;
    }
    size_t cap = shape_of(&o, &b, o.maxbytes).bytes + 64;
    b.cap   = cap;
    b.sbuf  = malloc(cap);
    b.rbuf  = malloc(cap);
    if (o.cuda && (cm_alloc((void **)&b.dsbuf, cap, why, sizeof(why)) ||
                   cm_alloc((void **)&b.drbuf, cap, why, sizeof(why))))
        die_cuda(&b, why);
    size_t ntimes = o.iters > BATCHES ? (size_t)o.iters : BATCHES;
    b.times = calloc(ntimes, sizeof(double));
    b.tmax  = calloc(ntimes, sizeof(double));
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
    for (size_t bytes = o.minbytes;;) {
        run_size(&o, &b, bytes);
        if (bytes >= o.maxbytes)
            break;
        /* Multiply, but land exactly on maxbytes and never wrap. */
        bytes = bytes == 0 ? 1
                : bytes > o.maxbytes / o.step ? o.maxbytes
                                              : bytes * o.step;
        if (bytes > o.maxbytes)
            bytes = o.maxbytes;
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
    free(b.sbuf);
    free(b.rbuf);
    cm_free(b.dsbuf);
    cm_free(b.drbuf);
    free(b.times);
    free(b.tmax);
    st = braid_finalize(b.comm);
    if (st != BRAID_OK)
        die(&b, st, "braid_finalize");
    return b.wrong_total > 0 ? 1 : 0;
}
