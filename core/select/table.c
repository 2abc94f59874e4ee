/* The selection table (select.h): per memory need and collective, the byte
 * ranges and the candidate each goes to, built once per communicator so
 * that a call looks its size up instead of asking every cost model.
 *
 * Building: the sizes are cut at every power of two and at every bound of
 * a BRAID_ALGO rule or tuning-file row of the collective, so that inside a
 * piece only the cost model can change its mind.  A piece whose two ends
 * get the same pick goes to it whole; otherwise it is halved until each
 * change is found to the byte.  So the table gives every size the pick a
 * direct decision gives, provided no candidate wins only strictly inside a
 * power-of-two piece whose ends both go to another one -- true of
 * alpha-beta-gamma estimates, whose differences are linear in the size
 * within a piece (with the bandwidth by working set, bw_curve.c, nearly
 * so: it moves with log size, by at most the ratio of two calibrated
 * figures over many pieces); the unit test compares the two at many
 * sizes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/select.h"
#include "util/log.h"

#define LOG_COMP    "select"
#define MAX_SKIPPED 8

typedef struct build {
    const braid_selector_t *sel;
    braid_coll_t            coll;
    uint32_t                mem;
    braid_sel_row_t        *rows;
    int                     nrows, cap, oom;
    /* Tuning-file rows that named a candidate unable to run a size. */
    const braid_tune_row_t *skipped[MAX_SKIPPED];
    int                     nskipped;
} build_t;

static int same(braid_pick_t a, braid_pick_t b)
{
    return a.idx == b.idx && a.why == b.why && a.ref == b.ref;
}

static braid_pick_t pick_at(build_t *b, size_t bytes)
{
    const braid_tune_row_t *sk;
    braid_pick_t p = braid_select_decide(b->sel, b->coll, bytes, b->mem, &sk);
    int          k = 0;
    while (sk != NULL && k < b->nskipped && b->skipped[k] != sk)
        k++;
    if (sk != NULL && k == b->nskipped && k < MAX_SKIPPED)
        b->skipped[b->nskipped++] = sk;
    return p;
}

/* Sizes from lo on go to p, unless the previous row already says so. */
static void push(build_t *b, size_t lo, braid_pick_t p)
{
    if (b->nrows > 0 && same(b->rows[b->nrows - 1].pick, p))
        return;
    if (b->nrows == b->cap) {
        int              cap = b->cap ? 2 * b->cap : 16;
        braid_sel_row_t *v   = realloc(b->rows, (size_t)cap * sizeof(*v));
        if (v == NULL) {
            b->oom = 1;
            return;
        }
        b->rows = v;
        b->cap  = cap;
    }
    b->rows[b->nrows++] = (braid_sel_row_t){lo, p};
}

/* [lo, hi], whose ends' picks are known. */
static void split(build_t *b, size_t lo, braid_pick_t plo, size_t hi,
                  braid_pick_t phi)
{
    if (same(plo, phi)) {
        push(b, lo, plo);
        return;
    }
    if (hi - lo == 1) {
        push(b, lo, plo);
        push(b, hi, phi);
        return;
    }
    size_t       mid = lo + (hi - lo) / 2;
    braid_pick_t pm  = pick_at(b, mid);
    split(b, lo, plo, mid, pm);
    split(b, mid, pm, hi, phi);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Where pieces start: first, the powers of two above it, and the bounds of
 * the collective's rules and tuning rows; sorted, each once.  NULL when
 * out of memory. */
static size_t *cuts_of(int *n, const braid_selector_t *sel, braid_coll_t coll,
                       size_t first)
{
    const braid_algo_spec_t *o = sel->override;
    const braid_tune_t      *t = sel->tune;
    size_t  max = 65 + 2 * (size_t)(o ? o->n : 0) + 2 * (size_t)(t ? t->n : 0);
    size_t *c   = malloc(max * sizeof(*c));
    int     k   = 0;
    if (c == NULL)
        return NULL;
    c[k++] = first;
    for (int p = 0; p < 64; p++)
        c[k++] = (size_t)1 << p;
    for (int i = 0; o != NULL && i < o->n; i++)
        if (o->rules[i].coll == coll) {
            c[k++] = o->rules[i].lo;
            c[k++] = o->rules[i].hi;
        }
    for (int i = 0; t != NULL && i < t->n; i++)
        if (t->rows[i].coll == coll) {
            c[k++] = t->rows[i].lo;
            c[k++] = t->rows[i].hi;
        }
    qsort(c, (size_t)k, sizeof(*c), cmp_size);
    int m = 0;
    for (int i = 0; i < k; i++)
        if (c[i] >= first && c[i] != SIZE_MAX && (m == 0 || c[i] != c[m - 1]))
            c[m++] = c[i];
    *n = m;
    return c;
}

static const char *need_name(uint32_t mem)
{
    if (mem & BRAID_NEED_STREAM)
        return "stream-ordered device memory";
    if (mem == BRAID_MEM_BIT(BRAID_MEM_HOST))
        return "host memory";
    return mem & BRAID_MEM_BIT(BRAID_MEM_HOST) ? "host and device memory"
                                               : "device memory";
}

static void skipped_warn(const build_t *b)
{
    for (int i = 0; i < b->nskipped; i++) {
        const braid_tune_row_t *r = b->skipped[i];
        char                    name[80], lo[24], hi[24];
        braid_cand_ref_format(name, sizeof(name), &r->cand);
        snprintf(lo, sizeof(lo), "%zu", r->lo);
        snprintf(hi, sizeof(hi), "%zu", r->hi);
        /* A tuning table may come from another machine. */
        BRAID_LOG_JOB(BRAID_LOG_WARN, LOG_COMP,
                      "tuning file names %s for %s "
                      "of %s to %s bytes, which this communicator cannot "
                      "run (at some of those sizes%s); the cost model decides "
                      "there",
                      name, braid_coll_name(b->coll), lo,
                      r->hi == SIZE_MAX ? "inf" : hi,
                      b->mem == BRAID_MEM_BIT(BRAID_MEM_HOST) ? ""
                                                              : ", on device "
                                                                "memory");
    }
}

static braid_status_t build_coll(braid_sel_table_t      *t,
                                 const braid_selector_t *sel,
                                 braid_coll_t            coll)
{
    size_t  first = coll == BRAID_COLL_BARRIER ? 0 : 1; /* 0: done locally */
    int     ncuts;
    size_t *cuts = cuts_of(&ncuts, sel, coll, first);
    build_t b    = {.sel = sel, .coll = coll, .mem = t->need};
    if (cuts == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "selection table: out of "
                                                "memory");
    for (int i = 0; i < ncuts && !b.oom; i++) {
        size_t lo = cuts[i], hi = i + 1 < ncuts ? cuts[i + 1] - 1 : SIZE_MAX;
        split(&b, lo, pick_at(&b, lo), hi, pick_at(&b, hi));
    }
    free(cuts);
    if (b.oom) {
        free(b.rows);
        return braid_error(BRAID_ERR_NO_MEMORY, "selection table: out of "
                                                "memory");
    }
    skipped_warn(&b);
    t->rows[coll]  = b.rows;
    t->nrows[coll] = b.nrows;
    return BRAID_OK;
}

static void table_free(braid_sel_table_t *t)
{
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        free(t->rows[c]);
        t->rows[c]  = NULL;
        t->nrows[c] = 0;
    }
}

void braid_selector_fini(braid_selector_t *sel)
{
    for (int i = 0; i < sel->ntables; i++)
        table_free(&sel->tables[i]);
    sel->ntables = 0;
}

static void table_log(braid_selector_t *sel, uint32_t mem)
{
    if (sel->rank != 0 || braid_log_level() < BRAID_LOG_INFO)
        return;
    braid_log(BRAID_LOG_INFO, LOG_COMP,
              "selection table for %s, %d ranks "
              "on %d nodes:",
              need_name(mem), sel->nranks, sel->nnodes);
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        int n;
        braid_select_rows(&n, sel, (braid_coll_t)c, mem);
        for (int i = 0; i < n; i++) {
            char line[512];
            braid_select_row_format(line, sizeof(line), sel, (braid_coll_t)c,
                                    mem, i);
            braid_log(BRAID_LOG_INFO, LOG_COMP, "  %-14s %s",
                      braid_coll_name((braid_coll_t)c), line);
        }
    }
}

/* The table of mem, built now if need be; NULL when out of memory or when
 * every slot holds another need's. */
static braid_sel_table_t *table_of(braid_selector_t *sel, uint32_t mem)
{
    for (int i = 0; i < sel->ntables; i++)
        if (sel->tables[i].need == mem)
            return &sel->tables[i];
    if (sel->ntables == BRAID_SEL_TABLES)
        return NULL;
    braid_sel_table_t *t = &sel->tables[sel->ntables];
    memset(t, 0, sizeof(*t));
    t->need = mem;
    for (int c = 0; c < BRAID_COLL_COUNT; c++)
        if (build_coll(t, sel, (braid_coll_t)c) != BRAID_OK) {
            table_free(t);
            return NULL;
        }
    sel->ntables++;
    table_log(sel, mem);
    return t;
}

braid_status_t braid_selector_build(braid_selector_t *sel, uint32_t mem)
{
    if (table_of(sel, mem) == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY,
                           "selection table for %s: out "
                           "of memory",
                           need_name(mem));
    return BRAID_OK;
}

braid_pick_t braid_select_find(braid_selector_t *sel, braid_coll_t coll,
                               size_t bytes, uint32_t mem)
{
    braid_sel_table_t *t = table_of(sel, mem);
    if (t == NULL || t->nrows[coll] == 0 || bytes < t->rows[coll][0].lo) {
        const braid_tune_row_t *sk;
        return braid_select_decide(sel, coll, bytes, mem, &sk);
    }
    /* The last row that starts at or below bytes. */
    const braid_sel_row_t *r  = t->rows[coll];
    int                    lo = 0, hi = t->nrows[coll] - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (r[mid].lo <= bytes)
            lo = mid;
        else
            hi = mid - 1;
    }
    return r[lo].pick;
}

const braid_sel_row_t *braid_select_rows(int *nrows, braid_selector_t *sel,
                                         braid_coll_t coll, uint32_t mem)
{
    braid_sel_table_t *t = table_of(sel, mem);
    *nrows               = t != NULL ? t->nrows[coll] : 0;
    return t != NULL ? t->rows[coll] : NULL;
}

/* A size as BRAID_ALGO writes it: 16K, 1M, 4G, or the bytes. */
static void size_text(char *buf, size_t len, size_t v)
{
    static const char units[] = "GMK";
    for (int u = 0; u < 3; u++) {
        size_t m = (size_t)1 << (10 * (3 - u));
        if (v != 0 && v % m == 0) {
            snprintf(buf, len, "%zu%c", v / m, units[u]);
            return;
        }
    }
    snprintf(buf, len, "%zu", v);
}

void braid_select_row_format(char *buf, size_t len, braid_selector_t *sel,
                             braid_coll_t coll, uint32_t mem, int i)
{
    int                    n;
    const braid_sel_row_t *r = braid_select_rows(&n, sel, coll, mem);
    if (r == NULL || i < 0 || i >= n) {
        snprintf(buf, len, "(no such row)");
        return;
    }
    char lo[24], hi[24] = "", range[56], why[320];
    size_text(lo, sizeof(lo), r[i].lo);
    if (i + 1 < n)
        size_text(hi, sizeof(hi), r[i + 1].lo);
    snprintf(range, sizeof(range), "%s-%s", lo, hi);
    /* The reason (and its ties) at the row's first size. */
    braid_select_why(why, sizeof(why), sel, r[i].pick, coll, r[i].lo, mem);
    snprintf(buf, len, "%-14s %-16s (%s)", range,
             r[i].pick.idx >= 0 ? sel->cands[r[i].pick.idx].name
                                : "none: refused",
             why);
}
