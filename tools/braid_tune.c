/* braid-tune: times every candidate of every collective on the live
 * communicator over a size sweep, next to the automatic choice, and writes
 * the winners as a tuning table for BRAID_TUNE_FILE.
 *
 *   braidrun -n 4 braid-tune -o braid.tune
 *   braidrun -n 4 braid-tune -C allreduce -b 8 -e 256M --csv all.csv
 *
 * Each candidate runs on a communicator split off the world with BRAID_ALGO
 * naming it, the automatic choice on one without BRAID_ALGO and tuning file,
 * the cost model's own choice ("model") on one with BRAID_ONLINE=off too
 * (and, with --tune-file, on one with that file), so every series runs
 * exactly as an application's calls would.  The link figures are measured
 * again first (BRAID_CALIBRATE=force, unless set), so that the cost model's
 * choice is judged on this machine's current figures. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "util/env.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: braid-tune [options]   (run under braidrun or another "
        "launcher)\n"
        "  -o, --out FILE       write the tuning table (BRAID_TUNE_FILE) to "
        "FILE\n"
        "      --merge          keep FILE's rows for other rank counts, hosts "
        "or\n"
        "                       topologies (and for collectives not tuned "
        "now)\n"
        "  -C, --colls LIST     collectives, comma-separated (default\n"
        "                       "
        "allreduce,reduce_scatter,allgather,broadcast,barrier)\n"
        "  -b, --minbytes N     smallest size (K/M/G), default 8\n"
        "  -e, --maxbytes N     largest size, default 64M\n"
        "  -f, --stepfactor N   size multiplier, default 4 (the last size is "
        "-e)\n"
        "  -n, --iters N        timed calls per round up to 256 KiB (fewer "
        "above,\n"
        "                       at least 3), default 20\n"
        "  -w, --warmup N       untimed calls per round, default 3\n"
        "  -r, --rounds N       rounds (series alternate within each), "
        "default 3\n"
        "      --small-rounds N rounds up to --small-max, where they take "
        "little\n"
        "                       time, if more than -r (default: -r)\n"
        "      --small-max N    largest size of --small-rounds (K/M/G), "
        "default\n"
        "                       256K (a round of every series takes "
        "milliseconds)\n"
        "      --cands LIST     only these candidates (comma-separated)\n"
        "      --tune-file FILE also time the automatic choice with FILE "
        "(series\n"
        "                       'tuned')\n"
        "      --csv FILE       every measurement, with the cost model's "
        "estimate\n"
        "      --race N         time the series within 1.25x of the fastest\n"
        "                       of a round's first calls, and auto and\n"
        "                       tuned, in more turns, to N calls each\n"
        "                       (default 16; 0: no more than -n gives)\n"
        "      --prune F        from 64 KiB on, skip a candidate that was "
        "more\n"
        "                       than F times slower than the best at the "
        "size\n"
        "                       before (default 0: never)\n"
        "  -c, --check 0/1      verify each series' first call at each size\n"
        "                       (default 1)\n"
        "      --memory MEM     host (default): buffers from malloc; braid:\n"
        "                       from braid_mem_alloc (peers on the host map\n"
        "                       them)\n"
        "  -q, --quiet          no progress lines and no table\n"
        "size is the larger buffer, as in braid-bench (allgather: the "
        "received\n"
        "one); the table's ranges are bytes per rank, as the dispatcher sees\n"
        "them.  docs/tuning.md explains the file.\n");
}

static void bad_usage(const char *what, const char *arg)
{
    fprintf(stderr, "braid-tune: %s '%s'\n", what, arg);
    usage(stderr);
    exit(2);
}

/* A size in the grammar of BRAID_ALGO and the tuning file (K/M/G/T, "KiB",
 * "B"): the same parser, so the same sizes read the same everywhere. */
static size_t parse_size(const char *opt, const char *s)
{
    size_t v;
    if (braid_parse_size(opt, s, 0, SIZE_MAX, &v) != BRAID_OK) {
        fprintf(stderr, "braid-tune: %s\n", braid_last_error());
        usage(stderr);
        exit(2);
    }
    return v;
}

static int parse_int(const char *s, int lo, int hi, const char *what)
{
    char *end;
    long  v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        bad_usage(what, s);
    return (int)v;
}

static unsigned parse_colls(const char *list)
{
    char     buf[256];
    unsigned bits = 0;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *c = strtok_r(buf, ",", &save); c != NULL;
         c = strtok_r(NULL, ",", &save)) {
        braid_coll_t coll;
        if (!braid_coll_from_name(&coll, c, strlen(c)))
            bad_usage("unknown collective", c);
        bits |= 1u << coll;
    }
    if (bits == 0)
        bad_usage("no collective in", list);
    return bits;
}

static void parse_opts(opts_t *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->colls     = (1u << BRAID_COLL_COUNT) - 1;
    o->minbytes  = 8;
    o->maxbytes  = 64u << 20;
    o->factor    = 4;
    o->iters     = 20;
    o->warmup    = 3;
    o->rounds    = 3;
    o->small_max = TUNE_SMALL;
    o->check     = 1;
    o->race      = 16;
    size_t off   = 0;
    for (int i = 0; i < argc && off < sizeof(o->command) - 1; i++)
        off += (size_t)snprintf(o->command + off, sizeof(o->command) - off,
                                "%s%s", i ? " " : "", argv[i]);
    static const struct option longs[] = {
        {"out", required_argument, NULL, 'o'},
        {"merge", no_argument, NULL, 'M'},
        {"colls", required_argument, NULL, 'C'},
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'},
        {"rounds", required_argument, NULL, 'r'},
        {"small-rounds", required_argument, NULL, 'R'},
        {"small-max", required_argument, NULL, 'X'},
        {"cands", required_argument, NULL, 'A'},
        {"tune-file", required_argument, NULL, 'T'},
        {"csv", required_argument, NULL, 'S'},
        {"prune", required_argument, NULL, 'P'},
        {"race", required_argument, NULL, 'Z'},
        {"check", required_argument, NULL, 'c'},
        {"quiet", no_argument, NULL, 'q'},
        {"memory", required_argument, NULL, 'Y'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "o:C:b:e:f:n:w:r:c:qh", longs,
                            NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 'M': o->merge = 1; break;
        case 'C': o->colls = parse_colls(optarg); break;
        case 'b': o->minbytes = parse_size("-b", optarg); break;
        case 'e': o->maxbytes = parse_size("-e", optarg); break;
        case 'f': o->factor = parse_int(optarg, 2, 1024, "bad -f"); break;
        case 'n': o->iters = parse_int(optarg, 1, 1000000, "bad -n"); break;
        case 'w': o->warmup = parse_int(optarg, 0, 1000000, "bad -w"); break;
        case 'r':
            o->rounds = parse_int(optarg, 1, TUNE_MAX_ROUNDS, "bad -r");
            break;
        case 'R':
            o->small_rounds =
                parse_int(optarg, 1, TUNE_MAX_ROUNDS, "bad --small-rounds");
            break;
        case 'X': o->small_max = parse_size("--small-max", optarg); break;
        case 'A': o->cands = optarg; break;
        case 'T': o->tune_file = optarg; break;
        case 'S': o->csv = optarg; break;
        case 'P': {
            char *end;
            o->prune = strtod(optarg, &end);
            if (end == optarg || *end || !(o->prune == 0 || o->prune >= 1))
                bad_usage("bad --prune (0, or a factor >= 1)", optarg);
            break;
        }
        case 'Z': o->race = parse_int(optarg, 0, 1000000, "bad --race"); break;
        case 'c': o->check = parse_int(optarg, 0, 1, "bad -c"); break;
        case 'q': o->quiet = 1; break;
        case 'Y':
            if (strcmp(optarg, "braid") != 0 && strcmp(optarg, "host") != 0)
                bad_usage("bad --memory (host or braid)", optarg);
            o->shared = strcmp(optarg, "braid") == 0;
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc)
        bad_usage("unexpected argument", argv[optind]);
    if (o->minbytes < 4 || o->maxbytes < o->minbytes)
        bad_usage("bad size range: -b must be >= 4 and <= -e, got -b",
                  argv[0]);
    if (o->merge && o->out == NULL)
        bad_usage("--merge needs -o FILE; got", "--merge");
}

static int wanted(const opts_t *o, const char *name)
{
    if (o->cands == NULL)
        return 1;
    size_t n = strlen(name);
    for (const char *p = o->cands; *p;) {
        const char *e   = strchr(p, ',');
        size_t      len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

/* Sets (value) or clears (NULL) an environment variable; all ranks do the
 * same, so the split communicators agree on their choices. */
static void set_env(const char *name, const char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void die(braid_status_t st, const char *what)
{
    fprintf(stderr, "braid-tune: %s: %s: %s\n", what, braid_status_str(st),
            braid_last_error());
    exit(1);
}

static series_t *add_series(tune_t *t, const char *name, series_kind_t kind)
{
    if (t->nseries == TUNE_MAX_SERIES) {
        fprintf(stderr, "braid-tune: more than %d series\n", TUNE_MAX_SERIES);
        exit(1);
    }
    series_t *s = &t->series[t->nseries++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->kind = kind;
    return s;
}

static braid_comm_t *split_with(tune_t *t, const char *algo, const char *tune)
{
    braid_comm_t *c;
    set_env("BRAID_ALGO", algo);
    set_env("BRAID_TUNE_FILE", tune);
    braid_status_t st = braid_comm_split(t->world, 0, t->rank, &c);
    if (st != BRAID_OK)
        die(st, algo ? algo : "communicator for the automatic choice");
    return c;
}

/* One series per candidate name (over every tuned collective that has it),
 * then the automatic choice, the cost model's alone, and the tuned one. */
static void make_series(tune_t *t)
{
    const braid_selector_t *sel = &t->world->sel;
    char                   *algo_env =
        getenv("BRAID_ALGO") ? strdup(getenv("BRAID_ALGO")) : NULL;
    char *tune_env =
        getenv("BRAID_TUNE_FILE") ? strdup(getenv("BRAID_TUNE_FILE")) : NULL;
    for (int i = 0; i < sel->ncands; i++) {
        const braid_candidate_t *c = &sel->cands[i];
        if (!(t->o.colls >> c->algo->coll & 1) || !wanted(&t->o, c->name) ||
            !(c->mem_types & BRAID_MEM_BIT(BRAID_MEM_HOST)))
            continue;
        series_t *s = NULL;
        for (int k = 0; k < t->nseries; k++)
            if (strcmp(t->series[k].name, c->name) == 0)
                s = &t->series[k];
        if (s == NULL)
            s = add_series(t, c->name, SERIES_CAND);
        s->colls |= 1u << c->algo->coll;
    }
    for (int k = 0; k < t->nseries; k++) {
        char algo[1024] = "";
        for (int coll = 0; coll < BRAID_COLL_COUNT; coll++)
            if (t->series[k].colls >> coll & 1)
                snprintf(algo + strlen(algo), sizeof(algo) - strlen(algo),
                         "%s%s:%s", algo[0] ? ";" : "",
                         braid_coll_name((braid_coll_t)coll),
                         t->series[k].name);
        t->series[k].comm = split_with(t, algo, NULL);
    }
    add_series(t, "auto", SERIES_AUTO)->comm = split_with(t, NULL, NULL);
    /* The cost model's own picks next to auto's: what online tuning
     * changed, measured in the same rounds. */
    char *online_env =
        getenv("BRAID_ONLINE") ? strdup(getenv("BRAID_ONLINE")) : NULL;
    set_env("BRAID_ONLINE", "off");
    add_series(t, "model", SERIES_MODEL)->comm = split_with(t, NULL, NULL);
    set_env("BRAID_ONLINE", online_env);
    free(online_env);
    if (t->o.tune_file != NULL)
        add_series(t, "tuned", SERIES_TUNED)->comm =
            split_with(t, NULL, t->o.tune_file);
    set_env("BRAID_ALGO", algo_env);
    set_env("BRAID_TUNE_FILE", tune_env);
    free(algo_env);
    free(tune_env);
}

/* The sizes of one collective: minbytes, times factor, then maxbytes. */
static void make_sizes(const tune_t *t, sweep_t *sw)
{
    size_t dts   = sizeof(float);
    int    parts = sw->coll == BRAID_COLL_REDUCE_SCATTER ||
                        sw->coll == BRAID_COLL_ALLGATHER
                       ? t->size
                       : 1;
    sw->nsizes   = 0;
    if (sw->coll == BRAID_COLL_BARRIER) {
        sw->nsizes = 1; /* size, bytes, count 0 */
        return;
    }
    for (size_t s = t->o.minbytes; sw->nsizes < TUNE_MAX_SIZES;) {
        size_t count = s / dts / (size_t)parts;
        if (count == 0)
            count = 1;
        int i = sw->nsizes;
        if (i == 0 || count != sw->count[i - 1]) {
            sw->count[i] = count;
            sw->bytes[i] = count * dts;
            sw->size[i]  = count * dts * (size_t)parts;
            sw->nsizes++;
        }
        if (s >= t->o.maxbytes)
            break;
        s = s * (size_t)t->o.factor > t->o.maxbytes ? t->o.maxbytes
                                                    : s * (size_t)t->o.factor;
    }
}

int main(int argc, char **argv)
{
    static tune_t t;
    parse_opts(&t.o, argc, argv);
    /* The link figures of now, for the cost model's choice; the splits
     * read them back from the cache. */
    int forced = getenv("BRAID_CALIBRATE") == NULL;
    if (forced)
        setenv("BRAID_CALIBRATE", "force", 1);
    braid_status_t st = braid_init(&t.world);
    if (st != BRAID_OK)
        die(st, "braid_init");
    if (forced)
        setenv("BRAID_CALIBRATE", "1", 1);
    t.rank          = t.world->rank;
    t.llc           = braid_calib_llc_bytes();
    t.size          = t.world->size;
    size_t cap      = t.o.maxbytes;
    int    maxiters = t.o.iters > 3 ? t.o.iters : 3;
    if (t.o.race > maxiters)
        maxiters = t.o.race;
    if (t.o.shared) {
        if ((st = braid_mem_alloc(cap ? cap : 1, (void **)&t.sbuf)) !=
                BRAID_OK ||
            (st = braid_mem_alloc(cap ? cap : 1, (void **)&t.rbuf)) !=
                BRAID_OK)
            die(st, "braid_mem_alloc");
    } else {
        t.sbuf = malloc(cap ? cap : 1);
        t.rbuf = malloc(cap ? cap : 1);
    }
    /* a round's calls of every series (tune_run.c, call by call) */
    size_t ntimes = (size_t)maxiters * TUNE_MAX_SERIES;
    t.times       = calloc(ntimes, sizeof(double));
    t.tmax        = calloc(ntimes, sizeof(double));
    t.one         = calloc((size_t)maxiters, sizeof(double));
    if (t.sbuf == NULL || t.rbuf == NULL || t.times == NULL ||
        t.tmax == NULL || t.one == NULL)
        die(BRAID_ERR_NO_MEMORY, "buffers");
    /* Every byte written once, checked or not (-c 0): a buffer only read
     * is the kernel's one zero page, always in cache, which would time
     * every read of the input as free.  Not a zero byte: malloc + memset 0
     * is turned into calloc. */
    memset(t.sbuf, 0x3f, cap);
    memset(t.rbuf, 0x3f, cap);
    make_series(&t);
    if (t.rank == 0 && !t.o.quiet) {
        char topo[512], links[1536];
        braid_topo_describe(t.world, topo, sizeof(topo));
        braid_calib_describe(t.world, links, sizeof(links));
        printf("# braid-tune: %d ranks; %s\n# %s\n# series:", t.size, topo,
               links);
        for (int k = 0; k < t.nseries; k++)
            printf(" %s", t.series[k].name);
        printf("\n");
        fflush(stdout);
    }
    sweep_t *sw = calloc(BRAID_COLL_COUNT, sizeof(sweep_t));
    int      n  = 0;
    if (sw == NULL)
        die(BRAID_ERR_NO_MEMORY, "results");
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        if (!(t.o.colls >> c & 1))
            continue;
        sw[n].coll = (braid_coll_t)c;
        make_sizes(&t, &sw[n]);
        tune_sweep(&t, &sw[n]);
        if (t.rank == 0 && !t.o.quiet)
            tune_print(&t, &sw[n]);
        n++;
    }
    int rc = 0;
    if (t.rank == 0 && t.o.csv != NULL)
        rc |= tune_csv(&t, sw, n);
    if (t.rank == 0 && t.o.out != NULL) {
        rc |= tune_write_table(&t, sw, n);
        if (rc == 0 && !t.o.quiet)
            printf("# wrote %s\n", t.o.out);
    }
    /* Every rank ends with rank 0's verdict. */
    int32_t mine = rc, all = 0;
    if ((st = braid_allreduce(&mine, &all, 1, BRAID_I32, BRAID_MAX,
                              t.world)) != BRAID_OK)
        die(st, "allreduce of the exit status");
    for (int k = 0; k < t.nseries; k++)
        braid_finalize(t.series[k].comm);
    free(sw);
    if (t.o.shared) {
        braid_mem_free(t.sbuf);
        braid_mem_free(t.rbuf);
    } else {
        free(t.sbuf);
        free(t.rbuf);
    }
    free(t.times);
    free(t.tmax);
    free(t.one);
    if ((st = braid_finalize(t.world)) != BRAID_OK)
        die(st, "braid_finalize");
    return all ? 1 : 0;
}
