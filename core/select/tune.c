/* Tuning-file parser (format in spec.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/lex.h"
#include "select/spec.h"
#include "util/log.h"

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
    if ((st = parse_count(lx, &row->nranks, "a rank count or '*'")) != BRAID_OK ||
        (st = parse_count(lx, &row->nnodes, "a node count or '*'")) != BRAID_OK ||
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
    if (braid_lex_peek(lx) != '\0' && braid_lex_peek(lx) != '#')
        return braid_lex_fail(lx, "the end of the row");
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
        int c = braid_lex_peek(&lx);
        if (c != '\0' && c != '#') {
            braid_tune_row_t *rows = realloc(tune->rows, sizeof(*rows) *
                                             (size_t)(tune->n + 1));
            if (rows == NULL) {
                braid_tune_free(tune);
                return braid_error(BRAID_ERR_NO_MEMORY, "%s: out of memory",
                                   where);
            }
            tune->rows = rows;
            memset(&rows[tune->n], 0, sizeof(rows[0]));
            braid_status_t st = parse_row(&rows[tune->n], &lx);
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
    memset(tune, 0, sizeof(*tune));
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return braid_error(BRAID_ERR_IO, "BRAID_TUNE_FILE='%s': cannot open: "
                           "%s", path, strerror(errno));
    char  *buf = malloc(TUNE_MAX_BYTES + 1);
    size_t n   = buf ? fread(buf, 1, TUNE_MAX_BYTES + 1, f) : 0;
    int    err = ferror(f);
    fclose(f);
    braid_status_t st;
    if (buf == NULL)
        st = braid_error(BRAID_ERR_NO_MEMORY, "BRAID_TUNE_FILE: out of memory");
    else if (err)
        st = braid_error(BRAID_ERR_IO, "BRAID_TUNE_FILE='%s': read error", path);
    else if (n > TUNE_MAX_BYTES)
        st = braid_error(BRAID_ERR_PARSE, "BRAID_TUNE_FILE='%s': larger than "
                         "%u bytes", path, TUNE_MAX_BYTES);
    else if (memchr(buf, '\0', n) != NULL)
        st = braid_error(BRAID_ERR_PARSE, "BRAID_TUNE_FILE='%s': contains a NUL "
                         "byte at offset %zu", path,
                         (size_t)((char *)memchr(buf, '\0', n) - buf));
    else {
        buf[n] = '\0';
        st = braid_tune_parse(tune, buf, path);
    }
    free(buf);
    return st;
}

const braid_tune_row_t *braid_tune_match(const braid_tune_t *tune,
                                         braid_coll_t coll, int nranks,
                                         int nnodes, size_t bytes)
{
    for (int i = 0; i < tune->n; i++) {
        const braid_tune_row_t *r = &tune->rows[i];
        if (r->coll == coll && (r->nranks < 0 || r->nranks == nranks) &&
            (r->nnodes < 0 || r->nnodes == nnodes) && bytes >= r->lo &&
            bytes < r->hi)
            return r;
    }
    return NULL;
}

void braid_tune_free(braid_tune_t *tune)
{
    free(tune->rows);
    tune->rows = NULL;
    tune->n    = 0;
}
