/* Tuning-file parser (format in spec.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/plugin.h>

#include "select/lex.h"
#include "select/spec.h"
#include "util/log.h"
#include "util/textfile.h"

#define TUNE_MAX_BYTES (16u << 20) /* a tuning table is small; refuse junk */

static braid_status_t parse_count(braid_lex_t *lx, int *out, const char *what)
{
    if (braid_lex_accept(lx, '*')) {
        *out = -1;
        return BRAID_OK;
    }
    size_t v;
    size_t start = (braid_lex_skip_blanks(lx), lx->pos);
    if (braid_lex_peek(lx) < '0' || braid_lex_peek(lx) > '9' ||
        braid_lex_size(lx, &v) != BRAID_OK || v == 0 || v > 1u << 24) {
        lx->pos = start;
        return braid_lex_fail(lx, what);
    }
    *out = (int)v;
    return BRAID_OK;
}

/* '*', single, switch or ring; absent (a digit follows): any. */
static braid_status_t parse_topo(braid_lex_t *lx, int *topo)
{
    *topo = -1;
    if (braid_lex_accept(lx, '*'))
        return BRAID_OK;
    int c = braid_lex_peek(lx);
    if (c >= '0' && c <= '9')
        return BRAID_OK;
    size_t      start = lx->pos;
    const char *s;
    size_t      n = braid_lex_name(lx, &s);
    static const struct {
        const char *name;
        int         kind;
    } words[] = {
        {"single", BRAID_TOPO_SINGLE_HOST},
        {"switch", BRAID_TOPO_SWITCH},
        {"ring", BRAID_TOPO_RING},
    };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (n == strlen(words[i].name) && strncmp(s, words[i].name, n) == 0) {
            *topo = words[i].kind;
            return BRAID_OK;
        }
    lx->pos = start;
    return braid_lex_fail(lx, "a topology (single, switch, ring or '*') or "
                              "min_bytes");
}

/* A non-negative decimal number of microseconds ("12", "3.25"). */
static braid_status_t parse_us(braid_lex_t *lx, double *us)
{
    braid_lex_skip_blanks(lx);
    size_t start = lx->pos, dots = 0;
    while (lx->pos < lx->end &&
           ((lx->text[lx->pos] >= '0' && lx->text[lx->pos] <= '9') ||
            lx->text[lx->pos] == '.')) {
        dots += lx->text[lx->pos] == '.';
        lx->pos++;
    }
    size_t n = lx->pos - start;
    char   num[40];
    if (n == 0 || n >= sizeof(num) || dots > 1 || lx->text[start] == '.' ||
        lx->text[lx->pos - 1] == '.') {
        lx->pos = start;
        return braid_lex_fail(lx, "a time in microseconds (digits, one "
                                  "optional decimal point)");
    }
    memcpy(num, lx->text + start, n);
    num[n]   = '\0';
    double v = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        if (num[i] == '.') {
            scale = 1;
            continue;
        }
        v = v * 10 + (num[i] - '0');
        scale *= 10;
    }
    *us = scale > 0 ? v / scale : v;
    if (!(*us < 1e15)) {
        lx->pos = start;
        return braid_lex_fail(lx, "a time below 1e15 microseconds");
    }
    return BRAID_OK;
}

/* 'at' size (cand '=' us)+ */
static braid_status_t parse_measured(braid_tune_row_t *row, braid_lex_t *lx)
{
    braid_status_t st;
    size_t         at_pos = (braid_lex_skip_blanks(lx), lx->pos);
    if ((st = braid_lex_size(lx, &row->at)) != BRAID_OK)
        return st;
    if (row->at < row->lo || row->at >= row->hi) {
        lx->pos = at_pos;
        return braid_lex_fail(lx, "a measured size inside the row's range");
    }
    do {
        if (row->nmeas == BRAID_TUNE_MEAS)
            return braid_lex_fail(lx, "the end of the row (at most "
                                      "24 measured candidates)");
        braid_tune_meas_t *m        = &row->meas[row->nmeas];
        size_t             cand_pos = (braid_lex_skip_blanks(lx), lx->pos);
        if ((st = braid_lex_cand(lx, &m->cand)) != BRAID_OK)
            return st;
        for (int i = 0; i < row->nmeas; i++)
            if (strcmp(row->meas[i].cand.algo, m->cand.algo) == 0 &&
                strcmp(row->meas[i].cand.tl, m->cand.tl) == 0) {
                lx->pos = cand_pos;
                return braid_lex_fail(lx, "a candidate not measured before "
                                          "on this row");
            }
        if (lx->pos >= lx->end || lx->text[lx->pos] != '=')
            return braid_lex_fail(lx, "'=' and the candidate's time in "
                                      "microseconds");
        lx->pos++;
        if ((st = parse_us(lx, &m->us)) != BRAID_OK)
            return st;
        row->nmeas++;
    } while (braid_lex_peek(lx) != '\0' && braid_lex_peek(lx) != '#');
    return BRAID_OK;
}

static braid_status_t parse_row(braid_tune_row_t *row, braid_lex_t *lx)
{
    braid_status_t st;
    const char    *s;
    size_t         start = (braid_lex_skip_blanks(lx), lx->pos);
    size_t         n     = braid_lex_name(lx, &s);
    if (n == 0 || !braid_coll_from_name(&row->coll, s, n)) {
        lx->pos = start;
        return braid_lex_fail(lx, "a collective (allreduce, reduce_scatter, "
                                  "allgather, broadcast, barrier)");
    }
    if ((st = parse_count(lx, &row->nranks, "a rank count or '*'")) !=
            BRAID_OK ||
        (st = parse_count(lx, &row->nnodes, "a node count or '*'")) !=
            BRAID_OK ||
        (st = parse_topo(lx, &row->topo)) != BRAID_OK ||
        (st = braid_lex_size(lx, &row->lo)) != BRAID_OK)
        return st;
    size_t hi_pos = (braid_lex_skip_blanks(lx), lx->pos);
    if (lx->end - lx->pos >= 3 && strncmp(lx->text + lx->pos, "inf", 3) == 0) {
        lx->pos += 3;
        row->hi = SIZE_MAX;
    } else if ((st = braid_lex_size(lx, &row->hi)) != BRAID_OK) {
        return st;
    }
    if (row->hi <= row->lo) {
        lx->pos = hi_pos;
        return braid_lex_fail(lx, "max_bytes above min_bytes");
    }
    if ((st = braid_lex_cand(lx, &row->cand)) != BRAID_OK)
        return st;
    size_t at_pos = (braid_lex_skip_blanks(lx), lx->pos);
    if (braid_lex_name(lx, &s) == 2 && strncmp(s, "at", 2) == 0)
        return parse_measured(row, lx);
    lx->pos = at_pos;
    if (braid_lex_peek(lx) != '\0' && braid_lex_peek(lx) != '#')
        return braid_lex_fail(lx, "'at' (the measured times) or the end of "
                                  "the row");
    return BRAID_OK;
}

braid_status_t braid_tune_parse(braid_tune_t *tune, const char *text,
                                const char *source)
{
    memset(tune, 0, sizeof(*tune));
    size_t len = strlen(text), line_start = 0;
    int    line = 0;
    while (line_start < len) {
        line++;
        const char *nl  = memchr(text + line_start, '\n', len - line_start);
        size_t      end = nl ? (size_t)(nl - text) : len;
        char        where[512];
        snprintf(where, sizeof(where), "%s:%d", source, line);
        /* Positions are reported relative to the line. */
        braid_lex_t lx = {text + line_start, end - line_start, 0, where};
        int         c  = braid_lex_peek(&lx);
        if (c != '\0' && c != '#') {
            braid_tune_row_t *rows =
                realloc(tune->rows, sizeof(*rows) * (size_t)(tune->n + 1));
            if (rows == NULL) {
                braid_tune_free(tune);
                return braid_error(BRAID_ERR_NO_MEMORY, "%s: out of memory",
                                   where);
            }
            tune->rows = rows;
            memset(&rows[tune->n], 0, sizeof(rows[0]));
            rows[tune->n].line = line;
            braid_status_t st  = parse_row(&rows[tune->n], &lx);
            if (st != BRAID_OK) {
                braid_tune_free(tune);
                return st;
            }
            tune->n++;
        }
        line_start = end + 1;
    }
    return BRAID_OK;
}

braid_status_t braid_tune_load(braid_tune_t *tune, const char *path)
{
    char  label[1024]; /* the message names the path; a long one is cut */
    char *text;
    memset(tune, 0, sizeof(*tune));
    snprintf(label, sizeof(label), "BRAID_TUNE_FILE='%s'", path);
    braid_status_t st = braid_text_read(&text, path, label, TUNE_MAX_BYTES);
    if (st != BRAID_OK)
        return st;
    st = braid_tune_parse(tune, text, path);
    free(text);
    return st;
}

const braid_tune_row_t *braid_tune_match(const braid_tune_t *tune,
                                         braid_coll_t coll, int nranks,
                                         int nnodes, int topo, size_t bytes)
{
    for (int i = 0; i < tune->n; i++) {
        const braid_tune_row_t *r = &tune->rows[i];
        if (r->coll == coll && (r->nranks < 0 || r->nranks == nranks) &&
            (r->nnodes < 0 || r->nnodes == nnodes) &&
            (r->topo < 0 || r->topo == topo) && bytes >= r->lo &&
            bytes < r->hi)
            return r;
    }
    return NULL;
}

double braid_tune_measured(const braid_tune_row_t *row, const char *cand)
{
    char name[80];
    for (int i = 0; i < row->nmeas; i++) {
        braid_cand_ref_format(name, sizeof(name), &row->meas[i].cand);
        if (strcmp(name, cand) == 0)
            return row->meas[i].us;
    }
    return -1.0;
}

const char *braid_tune_topo_name(int topo)
{
    switch (topo) {
    case BRAID_TOPO_SINGLE_HOST: return "single";
    case BRAID_TOPO_SWITCH: return "switch";
    case BRAID_TOPO_RING: return "ring";
    default: return "*";
    }
}

void braid_tune_free(braid_tune_t *tune)
{
    free(tune->rows);
    tune->rows = NULL;
    tune->n    = 0;
}
