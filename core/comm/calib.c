/* Link calibration of a new communicator (calib.h): decide, read the cache
 * or measure, agree, apply.
 *
 * Every rank must feed the cost model the same numbers, or ranks would
 * pick different candidates and deadlock.  So rank 0 alone reads the
 * cache and broadcasts what it found; what is measured is measured by
 * every rank at once and agreed through the bootstrap channel: the
 * slowest rank's latency and bandwidth (a stage ends when its slowest rank
 * is done), the median rank's reduction speed.  The out-of-cache bandwidth
 * is the exception: it is timed in few repetitions of megabytes, and on a
 * host with more ranks than cores one rank descheduled in all of them
 * reads as a link several times slower than every other rank saw, so it
 * takes the rank a quarter of the way up from the slowest (the slowest on
 * 2 or 3 ranks); a link that is slow for a host's ranks is slow for more
 * than a quarter of them.
 *
 * What the selector is given: each path's latency with every rank busy
 * (`all`) is split into the link's own (alpha) and the stage term the
 * core adds to every stage of every algorithm (stage_us): stage_us is the
 * smallest excess of `all` over `pair` among the paths -- the scheduler's
 * hand-offs that every path pays on a host with more ranks than cores --
 * and each path's alpha is the rest, so that alpha + stage_us is that
 * path's measured stage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/calib.h"
#include "comm/comm.h"
#include "util/env.h"
#include "util/log.h"
#include "util/stats.h"

#define LOG_COMP "calib"
#define HOST_LEN 64
#define BOOT_LEN 40
#define ERR_LEN  400

/* What each rank says first. */
typedef struct hello {
    int32_t  status; /* its BRAID_CALIBRATE parse */
    int32_t  mode;
    uint32_t pinned; /* bit i: the user set tls[i]'s figures */
    int32_t  pad;
    char     host[HOST_LEN];
    char     boot[BOOT_LEN];
    char     err[ERR_LEN];
} hello_t;

/* Rank 0's cache, broadcast. */
typedef struct cached {
    int32_t       match;
    int32_t       pad;
    braid_calib_t values;
} cached_t;

/* What each rank measured. */
typedef struct result {
    int32_t       status;
    int32_t       pad;
    braid_calib_t values;
    char          err[ERR_LEN];
} result_t;

static void self_ident(char *host, char *boot)
{
    const char *env = getenv("BRAID_HOSTNAME");
    if (env != NULL && *env != '\0')
        snprintf(host, HOST_LEN, "%s", env);
    else if (gethostname(host, HOST_LEN - 1) != 0)
        snprintf(host, HOST_LEN, "localhost");
    host[HOST_LEN - 1] = '\0';
    FILE *f            = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f == NULL || fgets(boot, BOOT_LEN, f) == NULL)
        snprintf(boot, BOOT_LEN, "-");
    if (f != NULL)
        fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    /* The key is one line of blank-separated words. */
    for (char *p = host; *p; p++)
        if (*p <= ' ' || *p == '/' || *p == 0x7f)
            *p = '_';
}

/* The plugin version of a transport, blanks made '_'. */
static void tl_version(const braid_comm_t *comm, const braid_transport_t *ops,
                       char *buf, size_t len)
{
    snprintf(buf, len, "-");
    const braid_plugin_table_t *pt = comm->plugins;
    for (int p = 0; p < pt->n; p++) {
        const braid_plugin_t *d = pt->entries[p].desc;
        for (int t = 0; d != NULL && t < d->n_transports; t++)
            if (d->transports[t] == ops && d->version != NULL)
                snprintf(buf, len, "%s", d->version);
    }
    for (char *c = buf; *c; c++)
        if (*c <= ' ' || *c == 0x7f)
            *c = '_';
}

/* BRAID_<NAME>_ALPHA_US or BRAID_<NAME>_GBPS: the user pinned the
 * transport's figures (ucx and roce read them), which calibration must
 * not overwrite. */
static int user_pinned(const char *name)
{
    char   var[96], up[48];
    size_t i = 0;
    for (; name[i] && i < sizeof(up) - 1; i++)
        up[i] =
            (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
    up[i] = '\0';
    snprintf(var, sizeof(var), "BRAID_%s_ALPHA_US", up);
    if (getenv(var) != NULL)
        return 1;
    snprintf(var, sizeof(var), "BRAID_%s_GBPS", up);
    return getenv(var) != NULL;
}

static const char *topo_word(braid_topo_kind_t k)
{
    return k == BRAID_TOPO_RING     ? "ring"
           : k == BRAID_TOPO_SWITCH ? "switch"
                                    : "single";
}

/* The communicator's shape, as the cache's key, after the file format's
 * version (calib_cache.c): hosts (in node order, name
 * and boot id), ranks, hosts, ranks per host, topology, CPUs, pinning. */
static void make_key(char *key, size_t len, const braid_comm_t *comm,
                     const hello_t *all)
{
    char hosts[BRAID_CALIB_KEY / 2] = "";
    int  seen = 0, pinned = 0;
    for (int r = 0; r < comm->size; r++) {
        pinned += comm->cpu_of_rank[r] >= 0;
        if (comm->node_of_rank[r] != seen)
            continue; /* nodes are numbered by their lowest rank */
        seen++;
        size_t o = strlen(hosts);
        snprintf(hosts + o, sizeof(hosts) - o, "%s%s/%s", o ? "," : "",
                 all[r].host, all[r].boot);
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(key, len,
             "v8 hosts=%s ranks=%d nodes=%d ppn=%d machine_ppn=%d "
             "topo=%s cpus=%ld pinned=%s",
             hosts, comm->size, comm->topo.nnodes, comm->topo.ppn,
             comm->machine_ppn, topo_word(comm->topo.kind), ncpu,
             pinned == comm->size ? "all"
             : pinned             ? "some"
                                  : "none");
}

static braid_status_t say_hello(braid_comm_t *comm, braid_calib_state_t *cs,
                                hello_t **all_out)
{
    hello_t mine;
    memset(&mine, 0, sizeof(mine));
    braid_calib_mode_t mode;
    braid_status_t     pst =
        braid_calib_mode_parse(&mode, getenv("BRAID_CALIBRATE"));
    mine.status = pst;
    mine.mode   = (int32_t)mode;
    if (pst != BRAID_OK)
        snprintf(mine.err, sizeof(mine.err), "%s", braid_last_error());
    for (int i = 0; i < comm->ntls && i < 32; i++)
        if (user_pinned(comm->tls[i].ops->name))
            mine.pinned |= 1u << i;
    self_ident(mine.host, mine.boot);
    hello_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t st =
        braid_bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
    for (int r = 0; st == BRAID_OK && r < comm->size; r++) {
        if (all[r].status != BRAID_OK)
            st = braid_error((braid_status_t)all[r].status, "%s%.*s",
                             r == comm->rank ? "" : "on another rank: ",
                             ERR_LEN - 1, all[r].err);
        else if (all[r].mode != mine.mode)
            st = braid_error(BRAID_ERR_MISMATCH,
                             "rank %d's BRAID_CALIBRATE "
                             "differs from rank %d's: every rank must be "
                             "given the same, or they would measure "
                             "different things",
                             r, comm->rank);
        cs->pinned |= all[r].pinned;
    }
    cs->mode = mode;
    if (st != BRAID_OK) {
        free(all);
        return st;
    }
    *all_out = all;
    return BRAID_OK;
}

/* Which of this communicator's transports the values lack (or all, when
 * forced); pinned ones are never measured. */
static unsigned missing(const braid_comm_t        *comm,
                        const braid_calib_state_t *cs,
                        const braid_calib_t *have, int force)
{
    unsigned need = 0;
    for (int i = 0; i < comm->ntls && i < 32; i++) {
        char ver[BRAID_CALIB_NAME];
        tl_version(comm, comm->tls[i].ops, ver, sizeof(ver));
        if (!(cs->pinned >> i & 1) &&
            (force ||
             braid_calib_find(have, comm->tls[i].ops->name, ver) == NULL))
            need |= 1u << i;
    }
    return need;
}

double braid_calib_agree_out_gbps(double *gbps, int n)
{
    int have = 0;
    for (int i = 0; i < n; i++)
        if (gbps[i] > 0)
            gbps[have++] = gbps[i];
    if (have == 0)
        return 0.0;
    braid_sort_doubles(gbps, have);
    return gbps[have / 4];
}

/* Every rank's measurement combined: the slowest rank's stages, the
 * median rank's reductions, the out-of-cache bandwidth of the rank a
 * quarter of the way up (top of the file).  big: room for n doubles. */
static void combine_path(braid_calib_path_t *out, const result_t *all, int n,
                         int t, int which, double *big)
{
    memset(out, 0, sizeof(*out));
    for (int r = 0; r < n; r++) {
        const braid_calib_tl_t   *x = &all[r].values.tl[t];
        const braid_calib_path_t *p = which == 3   ? &x->mget
                                      : which == 2 ? &x->get
                                      : which == 1 ? &x->put
                                                   : &x->sr;
        if (p->pair_us > out->pair_us)
            out->pair_us = p->pair_us;
        if (p->all_us > out->all_us)
            out->all_us = p->all_us;
        if (p->beta_gbps > 0 &&
            (out->beta_gbps == 0 || p->beta_gbps < out->beta_gbps))
            out->beta_gbps = p->beta_gbps;
        big[r]         = p->big_beta_gbps;
        out->bytes     = p->bytes; /* the same on every rank */
        out->big_bytes = p->big_bytes;
    }
    out->big_beta_gbps = braid_calib_agree_out_gbps(big, n);
}

static braid_status_t measure(braid_comm_t *comm, unsigned need,
                              int want_reduce, braid_calib_t *got)
{
    result_t mine;
    memset(&mine, 0, sizeof(mine));
    double t0 = braid_now_s();
    /* Rank 0's cache size decides the out-of-cache exchange for all: the
     * ranks must exchange messages of one size. */
    uint64_t big =
        braid_calib_big_bytes(braid_calib_llc_bytes(), comm->machine_ppn);
    braid_status_t st = braid_bootstrap_bcast(comm->bs, &big, sizeof(big), 0);
    braid_tl_t    *tls[BRAID_CALIB_MAX_TLS];
    braid_calib_tl_t *outs[BRAID_CALIB_MAX_TLS];
    int               n = 0;
    for (int i = 0; i < comm->ntls && n < BRAID_CALIB_MAX_TLS; i++) {
        if (!(need >> i & 1))
            continue;
        braid_calib_tl_t *t = &mine.values.tl[mine.values.ntl++];
        snprintf(t->name, sizeof(t->name), "%s", comm->tls[i].ops->name);
        tl_version(comm, comm->tls[i].ops, t->version, sizeof(t->version));
        tls[n]    = &comm->tls[i];
        outs[n++] = t;
    }
    if (st == BRAID_OK)
        st = braid_calib_measure_tls(comm, tls, n, (size_t)big, outs);
    if (st == BRAID_OK && want_reduce)
        st = braid_calib_measure_reduce(comm, &mine.values.reduce_gbps);
    mine.status = st;
    if (st != BRAID_OK)
        snprintf(mine.err, sizeof(mine.err), "%s", braid_last_error());
    result_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t ast =
        braid_bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
    if (ast != BRAID_OK) {
        free(all);
        return ast;
    }
    for (int r = 0; r < comm->size; r++)
        if (all[r].status != BRAID_OK) {
            st = braid_error((braid_status_t)all[r].status,
                             "calibration "
                             "failed on rank %d: %.*s",
                             r, ERR_LEN - 1, all[r].err);
            free(all);
            return st;
        }
    *got      = mine.values; /* names and which paths: the same everywhere */
    double *g = malloc(sizeof(double) * (size_t)comm->size);
    if (g == NULL) {
        free(all);
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    for (int t = 0; t < got->ntl; t++) {
        combine_path(&got->tl[t].sr, all, comm->size, t, 0, g);
        combine_path(&got->tl[t].put, all, comm->size, t, 1, g);
        combine_path(&got->tl[t].get, all, comm->size, t, 2, g);
        combine_path(&got->tl[t].mget, all, comm->size, t, 3, g);
    }
    for (int r = 0; r < comm->size; r++)
        g[r] = all[r].values.reduce_gbps;
    braid_sort_doubles(g, comm->size);
    got->reduce_gbps = g[comm->size / 2];
    free(g);
    free(all);
    got->took_s = braid_now_s() - t0;
    got->when   = (double)time(NULL);
    return BRAID_OK;
}

/* merged = cache, with what was measured now replacing the same
 * transports. */
static void merge(braid_calib_t *merged, const braid_calib_t *now)
{
    for (int i = 0; i < now->ntl; i++) {
        int j = 0;
        while (j < merged->ntl &&
               strcmp(merged->tl[j].name, now->tl[i].name) != 0)
            j++;
        if (j == merged->ntl) {
            if (merged->ntl == BRAID_CALIB_MAX_TLS)
                continue;
            merged->ntl++;
        }
        merged->tl[j] = now->tl[i];
    }
    if (now->reduce_gbps > 0)
        merged->reduce_gbps = now->reduce_gbps;
    if (now->ntl > 0 || now->reduce_gbps > 0) {
        merged->when   = now->when;
        merged->took_s = now->took_s;
    }
}

/* c as the cache file's text holds it. */
static braid_status_t round_trip(braid_calib_t *c, const char *key)
{
    char *text = malloc(8192);
    int   match;
    if (text == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t st = braid_calib_format(text, 8192, key, c);
    if (st == BRAID_OK)
        st = braid_calib_parse(c, &match, text, key, "calibration");
    free(text);
    return st;
}

/* A measured path as the selector's curve: the working set of an exchange
 * is its send and its receive buffer (or the peer's area it writes). */
static braid_bw_curve_t curve(const braid_calib_path_t *p)
{
    braid_bw_curve_t c = {0};
    if (p->big_beta_gbps <= 0 || p->big_bytes <= p->bytes)
        return c;
    c.in_gbps  = p->beta_gbps;
    c.in_ws    = 2.0 * p->bytes;
    c.out_gbps = p->big_beta_gbps;
    c.out_ws   = 2.0 * p->big_bytes;
    return c;
}

/* The selector's size-dependent bandwidth of tls[i] (select/bw_curve.c);
 * 1 when added, 0 when the selector has no room. */
static int apply_curves(braid_comm_t *comm, int i, const braid_calib_tl_t *t)
{
    braid_selector_t *sel = &comm->sel;
    if (sel->nbw >= BRAID_SEL_MAX_BW)
        return 0;
    braid_sel_bw_t *b = &sel->bw[sel->nbw++];
    memset(b, 0, sizeof(*b));
    b->tl = &comm->tls[i];
    if (t->has_sr)
        b->sr = curve(&t->sr);
    if (t->has_put)
        b->put = curve(&t->put);
    if (t->has_get)
        b->get = curve(&t->get);
    if (t->has_get && t->has_mget)
        b->mget = curve(&t->mget);
    return 1;
}

/* This communicator's ranks on the host per core, at least 1 (1 where the
 * cores are unknown). */
static double ranks_per_core(const braid_comm_t *comm)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    return ncpu >= 1 && comm->topo.ppn > ncpu
               ? (double)comm->topo.ppn / (double)ncpu
               : 1.0;
}

/* What one more message in a stage costs on a path is the part of its
 * pair latency (a lone message between two ranks) above the fastest
 * path's: that part is the two ends' software (a transport's stack, system
 * calls), which a rank pays again for every message it sends or receives
 * in the stage; the fastest path's is the memory system's line transfer,
 * which messages overlap (a shm put is a copy and a flag, nothing to do
 * at the other end).  The ranks sharing a core pay theirs in turn: the
 * link's msg_us is that part times this, ranks per core (at least 1) on a
 * communicator of one host, 0 across hosts (a NIC's latency is no
 * software of theirs, and hosts can differ in cores while every rank's
 * estimate must be the same). */
static double msg_share(const braid_comm_t *comm)
{
    return comm->topo.nnodes == 1 ? ranks_per_core(comm) : 0.0;
}

/* A get, and a put where the transport maps the peers' areas
 * (BRAID_CAP_LOAD: a put is a memcpy), are one rank's own copy, and a
 * large exchange is summarised by its fastest repetition
 * (calib_measure.c): on a host with more ranks than cores, that is a
 * repetition in which the rank copied with a core to itself, its
 * neighbour's part done while it waited descheduled.  In a collective
 * every rank of the host copies at once and those sharing a core take
 * turns: each gets cores / ranks of that speed (as the reduction's figure,
 * calib_measure.c).  A send/receive through the transport's bounded cells,
 * or a put through a stack that the receiver's progress completes (ucx),
 * hands off between the two ends all along: its exchange already takes
 * turns.  1 across hosts (a NIC moves the data) and where every rank has a
 * core. */
static double copy_share(const braid_comm_t *comm)
{
    return comm->topo.nnodes == 1 ? 1.0 / ranks_per_core(comm) : 1.0;
}

static void scale_curve(braid_bw_curve_t *c, double share)
{
    c->in_gbps *= share;
    c->out_gbps *= share;
}

/* Sets the links and the selector from cs->values. */
static void apply(braid_comm_t *comm, braid_calib_state_t *cs)
{
    double stage = -1, floor = -1, share = msg_share(comm);
    double copy   = copy_share(comm);
    comm->sel.nbw = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < comm->ntls && i < 32; i++) {
            if (cs->pinned >> i & 1)
                continue;
            char ver[BRAID_CALIB_NAME];
            tl_version(comm, comm->tls[i].ops, ver, sizeof(ver));
            const braid_calib_tl_t *t =
                braid_calib_find(&cs->values, comm->tls[i].ops->name, ver);
            if (t == NULL)
                continue;
            double put_copy = comm->tls[i].caps & BRAID_CAP_LOAD ? copy : 1.0;
            if (pass == 1 && apply_curves(comm, i, t)) {
                braid_sel_bw_t *b = &comm->sel.bw[comm->sel.nbw - 1];
                scale_curve(&b->put, put_copy);
                scale_curve(&b->get, copy);
                scale_curve(&b->mget, copy);
                /* Reads of braid_mem_alloc's memory (the figures of a
                 * call whose buffers all come from it): as get's below. */
                if (t->has_get && t->has_mget) {
                    b->mget_alpha_us  = t->mget.all_us;
                    b->mget_beta_gbps = t->mget.beta_gbps * copy;
                }
            }
#ifdef BRAID_CAP_GET
            /* Reads wait for nobody: their latency is a read's, with no
             * hand-off in it, and stays out of the stage term. */
            if (pass == 1 && t->has_get &&
                BRAID_HAS(&comm->tls[i], braid_tl_t, get_beta_gbps) &&
                (comm->tls[i].caps & BRAID_CAP_GET)) {
                comm->tls[i].get_alpha_us  = t->get.all_us;
                comm->tls[i].get_beta_gbps = t->get.beta_gbps * copy;
            }
#endif
            for (int put = 0; put < 2; put++) {
                const braid_calib_path_t *p = put ? &t->put : &t->sr;
                if (!(put ? t->has_put : t->has_sr))
                    continue;
                double excess = p->all_us - p->pair_us;
                if (excess < 0)
                    excess = 0;
                if (pass == 0) {
                    if (stage < 0 || excess < stage)
                        stage = excess;
                    if (floor < 0 || p->pair_us < floor)
                        floor = p->pair_us;
                    continue;
                }
                double        alpha = p->all_us - stage;
                braid_link_t *l     = &comm->tls[i].link;
                double        msg =
                    p->pair_us > floor ? (p->pair_us - floor) * share : 0.0;
                if (put) {
                    l->put_alpha_us  = alpha > 0 ? alpha : 0;
                    l->put_beta_gbps = p->beta_gbps * put_copy;
                    l->put_msg_us    = msg;
                } else {
                    l->alpha_us  = alpha > 0 ? alpha : 0;
                    l->beta_gbps = p->beta_gbps;
                    l->msg_us    = msg;
                }
            }
        }
    if (stage >= 0)
        comm->sel.stage_us = stage;
    if (cs->values.reduce_gbps > 0)
        comm->sel.reduce_gbps = cs->values.reduce_gbps;
    cs->stage_us = comm->sel.stage_us;
}

static void log_figures(const braid_comm_t *comm)
{
    if (comm->rank != 0 || braid_log_level() < BRAID_LOG_INFO)
        return;
    char buf[1536];
    braid_calib_describe(comm, buf, sizeof(buf));
    braid_log(BRAID_LOG_INFO, LOG_COMP, "%s", buf);
    for (int i = 0; i < comm->ntls; i++) {
        const braid_link_t *l       = &comm->tls[i].link;
        char                get[160] = "";
#ifdef BRAID_CAP_GET
        const braid_sel_bw_t *bw = braid_select_bw(&comm->sel, &comm->tls[i]);
        if (BRAID_HAS(&comm->tls[i], braid_tl_t, get_beta_gbps) &&
            comm->tls[i].get_beta_gbps > 0)
            snprintf(get, sizeof(get), ", get %.3g us + %.3g GB/s",
                     comm->tls[i].get_alpha_us, comm->tls[i].get_beta_gbps);
        if (get[0] != '\0' && bw != NULL && bw->mget_beta_gbps > 0)
            snprintf(get + strlen(get), sizeof(get) - strlen(get),
                     " (of braid_mem_alloc's memory %.3g us + %.3g GB/s)",
                     bw->mget_alpha_us, bw->mget_beta_gbps);
#endif
        braid_log(BRAID_LOG_INFO, LOG_COMP,
                  "transport %s: send/recv %.3g us "
                  "+ %.3g GB/s, put %.3g us + %.3g GB/s%s%s",
                  comm->tls[i].ops->name, l->alpha_us, l->beta_gbps,
                  l->put_alpha_us, l->put_beta_gbps, get,
                  comm->calib->pinned >> i & 1 ? " (set by the user)" : "");
    }
    braid_log(BRAID_LOG_INFO, LOG_COMP,
              "stage %.3g us, reduction %.3g GB/s "
              "per rank",
              comm->sel.stage_us,
              comm->sel.reduce_gbps > 0 ? comm->sel.reduce_gbps : 0.0);
}

braid_status_t braid_calib_apply(braid_comm_t *comm)
{
    braid_calib_state_t *cs  = calloc(1, sizeof(*cs));
    hello_t             *all = NULL;
    if (cs == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    comm->calib       = cs;
    braid_status_t st = say_hello(comm, cs, &all);
    if (st != BRAID_OK)
        return st;
    if (cs->mode == BRAID_CALIB_OFF || comm->size == 1) {
        snprintf(cs->why, sizeof(cs->why), "declared by the transports (%s)",
                 comm->size == 1 ? "one rank: nothing to measure"
                                 : "BRAID_CALIBRATE=0");
        cs->stage_us = comm->sel.stage_us;
        free(all);
        log_figures(comm);
        return BRAID_OK;
    }
    char key[BRAID_CALIB_KEY], dir[512];
    make_key(key, sizeof(key), comm, all);
    free(all);
    braid_calib_cache_dir(dir, sizeof(dir));
    if (dir[0] != '\0')
        braid_calib_cache_path(cs->path, sizeof(cs->path), dir, key);

    /* Rank 0's cache, for everyone. */
    cached_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    char cache_note[640] = "";
    if (comm->rank == 0 && cs->mode == BRAID_CALIB_ON && cs->path[0]) {
        int            match = 0;
        braid_status_t lst =
            braid_calib_load(&c->values, &match, cs->path, key);
        /* A missing file is the first run; anything else is worth a word,
         * and the figures are measured again. */
        if (lst == BRAID_ERR_PARSE ||
            (lst == BRAID_ERR_IO && errno != ENOENT)) {
            BRAID_LOG(BRAID_LOG_WARN, LOG_COMP, "%s; measuring again",
                      braid_last_error());
            snprintf(cache_note, sizeof(cache_note),
                     " (the cache file could "
                     "not be used)");
        }
        c->match = lst == BRAID_OK && match;
        if (!c->match)
            memset(&c->values, 0, sizeof(c->values));
    }
    if ((st = braid_bootstrap_bcast(comm->bs, c, sizeof(*c), 0)) != BRAID_OK) {
        free(c);
        return st;
    }
    unsigned need =
        missing(comm, cs, &c->values, cs->mode == BRAID_CALIB_FORCE);
    int want_reduce = !c->match || c->values.reduce_gbps <= 0 ||
                      cs->mode == BRAID_CALIB_FORCE;
    cs->values   = c->values;
    cs->measured = need;
    free(c);
    if (need != 0 || want_reduce) {
        braid_calib_t now;
        memset(&now, 0, sizeof(now));
        if ((st = measure(comm, need, want_reduce, &now)) != BRAID_OK)
            return st;
        merge(&cs->values, &now);
        /* Use the figures as the cache holds them (its text rounds them),
         * so that this communicator and the next of its shape, which reads
         * the cache, get the very same. */
        if ((st = round_trip(&cs->values, key)) != BRAID_OK)
            return st;
        char wrote[800] = "";
        if (comm->rank == 0 && cs->path[0]) {
            if (braid_calib_store(cs->path, key, &cs->values) == BRAID_OK)
                snprintf(wrote, sizeof(wrote), "; saved in %s", cs->path);
            else
                BRAID_LOG_JOB(BRAID_LOG_WARN, LOG_COMP,
                              "%s (calibration "
                              "not cached: the next communicator measures "
                              "again)",
                              braid_last_error());
        }
        snprintf(cs->why, sizeof(cs->why),
                 "measured at creation in %.2f s "
                 "(BRAID_CALIBRATE=%s)%s%s",
                 now.took_s, cs->mode == BRAID_CALIB_FORCE ? "force" : "1",
                 cache_note, comm->rank == 0 ? wrote : "");
    } else {
        char      when[64];
        time_t    tt = (time_t)cs->values.when;
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S",
                 localtime_r(&tt, &tm));
        snprintf(cs->why, sizeof(cs->why),
                 "from the calibration cache %s "
                 "(measured %s in %.2f s)",
                 cs->path, when, cs->values.took_s);
    }
    apply(comm, cs);
    log_figures(comm);
    return BRAID_OK;
}

void braid_calib_free(braid_comm_t *comm)
{
    free(comm->calib);
    comm->calib = NULL;
}

void braid_calib_describe(const braid_comm_t *comm, char *buf, size_t len)
{
    const braid_calib_state_t *cs = comm->calib;
    if (cs == NULL) {
        snprintf(buf, len, "link figures: declared by the transports");
        return;
    }
    char pinned[256] = "";
    for (int i = 0; i < comm->ntls && i < 32; i++)
        if (cs->pinned >> i & 1)
            snprintf(pinned + strlen(pinned), sizeof(pinned) - strlen(pinned),
                     "%s%s", pinned[0] ? ", " : "; set by the user: ",
                     comm->tls[i].ops->name);
    snprintf(buf, len, "link figures: %s%s", cs->why, pinned);
}
