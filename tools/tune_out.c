/* braid-tune's output (rank 0): the table on stdout, the CSV of every
 * measurement, and the tuning table (BRAID_TUNE_FILE, docs/tuning.md). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "busbw.h"
#include "tune.h"

static const char *topo_name(const braid_comm_t *c)
{
    return braid_tune_topo_name((int)c->topo.kind);
}

/* b bytes as "256 KiB", "8 MiB" where it is a whole number of them. */
static const char *size_text(char *buf, size_t len, size_t b)
{
    if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(buf, len, "%zu MiB", b >> 20);
    else if (b >= (1u << 10) && b % (1u << 10) == 0)
        snprintf(buf, len, "%zu KiB", b >> 10);
    else
        snprintf(buf, len, "%zu B", b);
    return buf;
}

void tune_print(const tune_t *t, const sweep_t *sw)
{
    const braid_comm_t *w = t->world;
    char                edge[32];
    printf("\n# %s, %d ranks on %d host(s) (%s), f32 sum, out of place: "
           "median over %d rounds (%d up to %s) of the slowest rank's "
           "per-call time (us)\n",
           braid_coll_name(sw->coll), w->size, w->topo.nnodes, topo_name(w),
           t->o.rounds, tune_rounds(t, 0),
           size_text(edge, sizeof(edge), t->o.small_max));
    printf("# %10s", "size");
    for (int k = 0; k < t->nseries; k++)
        printf(" %13.13s", t->series[k].name);
    printf("  %-14s %s\n", "best", "auto/best");
    for (int i = 0; i < sw->nsizes; i++) {
        printf("  %10zu", sw->size[i]);
        for (int k = 0; k < t->nseries; k++) {
            const point_t *p = &sw->pt[i][k];
            if (p->state == POINT_OK)
                printf(" %13.2f", p->us);
            else
                printf(" %13s", p->state == POINT_PRUNED ? "pruned" : "-");
        }
        int b = tune_best(t, sw, i), a = -1;
        for (int k = 0; k < t->nseries; k++)
            if (t->series[k].kind == SERIES_AUTO)
                a = k;
        printf("  %-14s", b >= 0 ? t->series[b].name : "-");
        if (a >= 0 && b >= 0 && sw->pt[i][b].us > 0)
            printf(" %.3f (auto ran %s)", sw->pt[i][a].us / sw->pt[i][b].us,
                   sw->pt[i][a].ran);
        printf("\n");
    }
    fflush(stdout);
}

int tune_csv(const tune_t *t, const sweep_t *sw, int nsweeps)
{
    FILE *f = fopen(t->o.csv, "w");
    if (f == NULL) {
        fprintf(stderr, "braid-tune: --csv '%s': %s\n", t->o.csv,
                strerror(errno));
        return 1;
    }
    const braid_comm_t *w = t->world;
    fprintf(f, "coll,nranks,nnodes,topo,size,bytes,series,cand,time_us,"
               "estimate_us,algbw_gbps,busbw_gbps,state,rounds_us,calls\n");
    for (int s = 0; s < nsweeps; s++)
        for (int i = 0; i < sw[s].nsizes; i++)
            for (int k = 0; k < t->nseries; k++) {
                const point_t *p = &sw[s].pt[i][k];
                if (p->state == POINT_CANNOT)
                    continue;
                double algbw =
                    p->us > 0 ? (double)sw[s].size[i] / p->us / 1e3 : 0;
                fprintf(f, "%s,%d,%d,%s,%zu,%zu,%s,%s,",
                        braid_coll_name(sw[s].coll), w->size, w->topo.nnodes,
                        topo_name(w), sw[s].size[i], sw[s].bytes[i],
                        t->series[k].name, p->ran);
                if (p->state == POINT_OK)
                    fprintf(f, "%.3f,", p->us);
                else
                    fprintf(f, ",");
                if (p->est >= 0)
                    fprintf(f, "%.3f,", p->est);
                else
                    fprintf(f, ",");
                if (p->state != POINT_OK) {
                    fprintf(f, ",,pruned,,\n");
                    continue;
                }
                fprintf(f, "%.4f,%.4f,ok,", algbw,
                        algbw * braid_bench_bus_factor(sw[s].coll, w->size));
                /* Each round's median call: what the table's pick of a
                 * reduction is checked against (tune_pick). */
                for (int r = 0; r < tune_rounds(t, sw[s].size[i]); r++)
                    fprintf(f, "%s%.3f", r ? ";" : "", p->round_us[r]);
                fprintf(f, ",%d\n", p->calls);
            }
    if (fclose(f) != 0) {
        fprintf(stderr, "braid-tune: --csv '%s': %s\n", t->o.csv,
                strerror(errno));
        return 1;
    }
    return 0;
}

/* Where the rows of sizes i and i+1 meet: the geometric mean of their
 * bytes per rank, so each measured size stands for the sizes nearest it on
 * a log scale. */
static size_t boundary(const sweep_t *sw, int i)
{
    double g = sqrt((double)sw->bytes[i] * (double)sw->bytes[i + 1]);
    size_t b = (size_t)ceil(g);
    return b > sw->bytes[i] ? b : sw->bytes[i] + 1;
}

static void write_rows(FILE *f, const tune_t *t, const sweep_t *sw)
{
    const braid_comm_t *w = t->world;
    for (int i = 0; i < sw->nsizes; i++) {
        int b = tune_pick(t, sw, i);
        if (b < 0)
            continue;
        size_t lo = i == 0 ? 0 : boundary(sw, i - 1);
        fprintf(f, "%s %d %d %s %zu ", braid_coll_name(sw->coll), w->size,
                w->topo.nnodes, topo_name(w), lo);
        if (i + 1 < sw->nsizes)
            fprintf(f, "%zu", boundary(sw, i));
        else
            fprintf(f, "inf");
        fprintf(f, " %s at %zu", t->series[b].name, sw->bytes[i]);
        for (int k = 0; k < t->nseries; k++)
            if (t->series[k].kind == SERIES_CAND &&
                sw->pt[i][k].state == POINT_OK)
                fprintf(f, " %s=%.2f", t->series[k].name, sw->pt[i][k].us);
        fprintf(f, "\n");
    }
}

/* The old file's rows for other shapes (nranks, nnodes, topology), kept by
 * --merge; returns 0, or 1 when the old file is malformed. */
static int keep_other_rows(FILE *out, const tune_t *t)
{
    FILE *in = fopen(t->o.out, "r");
    if (in == NULL)
        return 0; /* nothing to merge */
    braid_tune_t old;
    if (braid_tune_load(&old, t->o.out) != BRAID_OK) {
        fprintf(stderr, "braid-tune: --merge: %s\n", braid_last_error());
        fclose(in);
        return 1;
    }
    braid_tune_free(&old);
    const braid_comm_t *w = t->world;
    char                line[8192];
    int                 kept = 0;
    while (fgets(line, sizeof(line), in) != NULL) {
        braid_tune_t one;
        if (braid_tune_parse(&one, line, t->o.out) != BRAID_OK || one.n == 0)
            continue; /* comments: the new header replaces them */
        const braid_tune_row_t *r = &one.rows[0];
        int same = r->nranks == w->size && r->nnodes == w->topo.nnodes &&
                   r->topo == (int)w->topo.kind && (t->o.colls >> r->coll & 1);
        braid_tune_free(&one);
        if (same)
            continue;
        if (!kept++)
            fprintf(out, "# rows kept from the previous %s (--merge)\n",
                    t->o.out);
        fputs(line, out);
        if (line[strlen(line) - 1] != '\n')
            fputc('\n', out);
    }
    fclose(in);
    return 0;
}

int tune_write_table(const tune_t *t, const sweep_t *sw, int nsweeps)
{
    char tmp[4200], host[64] = "?", when[64], topo[512], links[1536];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", t->o.out, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "braid-tune: -o '%s': %s\n", t->o.out,
                strerror(errno));
        return 1;
    }
    const braid_comm_t *w = t->world;
    gethostname(host, sizeof(host) - 1);
    time_t    now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    braid_topo_describe(w, topo, sizeof(topo));
    braid_calib_describe(w, links, sizeof(links));
    fprintf(f,
            "# braid tuning table (BRAID_TUNE_FILE; docs/tuning.md), "
            "written by braid-tune on %s at %s\n# %s\n# topology: %s\n# %s\n"
            "# each row: the fastest candidate measured at the size after "
            "'at' (bytes per rank; for a reduction, one that does not fold "
            "in rank order, on more than 2 ranks, only where it was over 5%% "
            "faster in every round), "
            "then every candidate's median time there (us)\n# coll nranks "
            "nnodes topo min_bytes max_bytes winner at "
            "bytes cand=us...\n",
            host, when, t->o.command, topo, links);
    int bad = t->o.merge ? keep_other_rows(f, t) : 0;
    for (int s = 0; s < nsweeps; s++)
        write_rows(f, t, &sw[s]);
    if (fclose(f) != 0 || bad) {
        if (!bad)
            fprintf(stderr, "braid-tune: -o '%s': %s\n", t->o.out,
                    strerror(errno));
        unlink(tmp);
        return 1;
    }
    /* What we wrote must be what the core reads. */
    braid_tune_t check;
    if (braid_tune_load(&check, tmp) != BRAID_OK) {
        fprintf(stderr, "braid-tune: the table written does not parse: %s\n",
                braid_last_error());
        unlink(tmp);
        return 1;
    }
    braid_tune_free(&check);
    if (rename(tmp, t->o.out) != 0) {
        fprintf(stderr, "braid-tune: -o '%s': %s\n", t->o.out,
                strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}
