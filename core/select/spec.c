/* BRAID_ALGO parser (grammar in spec.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "select/lex.h"
#include "select/spec.h"
#include "util/log.h"
#include "util/suggest.h"

static const struct {
    const char  *name;
    braid_coll_t coll;
} coll_names[] = {
    {"allreduce", BRAID_COLL_ALLREDUCE},
    {"reduce_scatter", BRAID_COLL_REDUCE_SCATTER},
    {"reducescatter", BRAID_COLL_REDUCE_SCATTER},
    {"allgather", BRAID_COLL_ALLGATHER},
    {"broadcast", BRAID_COLL_BROADCAST},
    {"bcast", BRAID_COLL_BROADCAST},
    {"barrier", BRAID_COLL_BARRIER},
};

int braid_coll_from_name(braid_coll_t *coll, const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(coll_names) / sizeof(coll_names[0]); i++) {
        if (strlen(coll_names[i].name) == len &&
            strncmp(coll_names[i].name, name, len) == 0) {
            *coll = coll_names[i].coll;
            return 1;
        }
    }
    return 0;
}

void braid_cand_ref_format(char *buf, size_t len, const braid_cand_ref_t *ref)
{
    if (ref->tl[0])
        snprintf(buf, len, "%s@%s", ref->algo, ref->tl);
    else
        snprintf(buf, len, "%s", ref->algo);
}

static braid_status_t parse_coll(braid_lex_t *lx, braid_coll_t *coll)
{
    const char *s;
    size_t      start = (braid_lex_skip_blanks(lx), lx->pos);
    size_t      n     = braid_lex_name(lx, &s);
    if (n == 0 || !braid_coll_from_name(coll, s, n)) {
        static const char *const names[] = {"allreduce", "reduce_scatter",
                                            "allgather", "broadcast",
                                            "barrier"};
        char                     expected[320], hint[96];
        size_t                   before = start;
        while (before > 0 &&
               (lx->text[before - 1] == ' ' || lx->text[before - 1] == '\t'))
            before--;
        braid_suggest_phrase(hint, sizeof(hint), s, n, names, 5);
        /* "allreduce:ring;recdbl": a second candidate after ';', which
         * starts a new collective's rule.  The likely fix is ','. */
        if (hint[0] == '\0' && n > 0 && before > 0 &&
            lx->text[before - 1] == ';' && braid_lex_peek(lx) != ':')
            snprintf(hint, sizeof(hint),
                     " (';' starts another collective's "
                     "rules: list more candidates for one collective with "
                     "',')");
        snprintf(expected, sizeof(expected),
                 "a collective (allreduce, "
                 "reduce_scatter, allgather, broadcast, barrier)%s",
                 hint);
        lx->pos = start;
        return braid_lex_fail(lx, expected);
    }
    return BRAID_OK;
}

static braid_status_t new_rule(braid_algo_spec_t *spec, braid_lex_t *lx,
                               braid_coll_t coll, size_t lo, size_t hi)
{
    if (spec->n == BRAID_MAX_RULES)
        return braid_lex_fail(lx, "at most 64 size ranges in all");
    braid_algo_rule_t *r = &spec->rules[spec->n++];
    memset(r, 0, sizeof(*r));
    r->coll = coll;
    r->lo   = lo;
    r->hi   = hi;
    return BRAID_OK;
}

/* item := [range '='] cand.  A range is recognised by its leading digit. */
static braid_status_t parse_item(braid_algo_spec_t *spec, braid_lex_t *lx,
                                 braid_coll_t coll, int first)
{
    braid_status_t st;
    int            c = braid_lex_peek(lx);
    if (c >= '0' && c <= '9') {
        size_t range_pos = lx->pos, lo, hi = SIZE_MAX;
        if ((st = braid_lex_size(lx, &lo)) != BRAID_OK)
            return st;
        if (!braid_lex_accept(lx, '-'))
            return braid_lex_fail(lx, "'-' in a size range (lo-hi or lo-)");
        c = braid_lex_peek(lx);
        if (c >= '0' && c <= '9' && (st = braid_lex_size(lx, &hi)) != BRAID_OK)
            return st;
        if (hi <= lo) {
            lx->pos = range_pos;
            return braid_lex_fail(lx, "a non-empty range (lo < hi)");
        }
        if (!braid_lex_accept(lx, '='))
            return braid_lex_fail(lx, "'=' after the size range");
        if ((st = new_rule(spec, lx, coll, lo, hi)) != BRAID_OK)
            return st;
    } else if (first) {
        if ((st = new_rule(spec, lx, coll, 0, SIZE_MAX)) != BRAID_OK)
            return st;
    }
    braid_algo_rule_t *r = &spec->rules[spec->n - 1];
    if (r->ncands == BRAID_RULE_CANDS)
        return braid_lex_fail(lx, "at most 8 candidates per size range");
    return braid_lex_cand(lx, &r->cands[r->ncands++]);
}

braid_status_t braid_algo_spec_parse(braid_algo_spec_t *spec, const char *text)
{
    memset(spec, 0, sizeof(*spec));
    if (text == NULL)
        return BRAID_OK;
    braid_lex_t lx = {text, strlen(text), 0, "BRAID_ALGO"};
    if (braid_lex_peek(&lx) == '\0')
        return BRAID_OK;

    braid_status_t st;
    do {
        /* Set on success only; initialized so that -O3 sees no path that
         * reads it unset (a release build is -Werror too in CI). */
        braid_coll_t coll = BRAID_COLL_COUNT;
        if ((st = parse_coll(&lx, &coll)) != BRAID_OK)
            return st;
        if (!braid_lex_accept(&lx, ':'))
            return braid_lex_fail(&lx, "':' after the collective");
        int first = 1;
        do {
            if ((st = parse_item(spec, &lx, coll, first)) != BRAID_OK)
                return st;
            first = 0;
        } while (braid_lex_accept(&lx, ','));
    } while (braid_lex_accept(&lx, ';'));

    if (braid_lex_peek(&lx) != '\0')
        return braid_lex_fail(&lx, "',', ';' or the end");
    return BRAID_OK;
}

const braid_algo_rule_t *braid_algo_spec_match(const braid_algo_spec_t *spec,
                                               braid_coll_t coll, size_t bytes)
{
    for (int i = 0; i < spec->n; i++) {
        const braid_algo_rule_t *r = &spec->rules[i];
        if (r->coll == coll && bytes >= r->lo && bytes < r->hi)
            return r;
    }
    return NULL;
}
