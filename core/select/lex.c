#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "select/lex.h"
#include "select/spec.h"
#include "util/env.h"
#include "util/log.h"

void braid_lex_skip_blanks(braid_lex_t *lx)
{
    while (lx->pos < lx->end &&
           (lx->text[lx->pos] == ' ' || lx->text[lx->pos] == '\t' ||
            lx->text[lx->pos] == '\r'))
        lx->pos++;
}

int braid_lex_peek(braid_lex_t *lx)
{
    braid_lex_skip_blanks(lx);
    return lx->pos < lx->end ? (unsigned char)lx->text[lx->pos] : '\0';
}

int braid_lex_accept(braid_lex_t *lx, char c)
{
    if (braid_lex_peek(lx) != (unsigned char)c || c == '\0')
        return 0;
    lx->pos++;
    return 1;
}

size_t braid_lex_name(braid_lex_t *lx, const char **start)
{
    braid_lex_skip_blanks(lx);
    size_t s = lx->pos;
    while (lx->pos < lx->end && (isalnum((unsigned char)lx->text[lx->pos]) ||
                                 lx->text[lx->pos] == '_'))
        lx->pos++;
    *start = lx->text + s;
    return lx->pos - s;
}

braid_status_t braid_lex_fail(braid_lex_t *lx, const char *expected)
{
    braid_quote_t ex = braid_quote(lx->text, lx->end, lx->pos);
    if (lx->pos >= lx->end)
        return braid_error(BRAID_ERR_PARSE,
                           "%s: expected %s at position %zu "
                           "(end of input): '%s'",
                           lx->where, expected, lx->pos, ex.s);
    unsigned char c = (unsigned char)lx->text[lx->pos];
    if (isprint(c))
        return braid_error(BRAID_ERR_PARSE,
                           "%s: expected %s, found '%c' at "
                           "position %zu: '%s'",
                           lx->where, expected, c, lx->pos, ex.s);
    return braid_error(BRAID_ERR_PARSE,
                       "%s: expected %s, found byte 0x%02x at "
                       "position %zu: '%s'",
                       lx->where, expected, c, lx->pos, ex.s);
}

braid_status_t braid_lex_size(braid_lex_t *lx, size_t *out)
{
    braid_lex_skip_blanks(lx);
    size_t      start = lx->pos;
    const char *fault;
    if (braid_size_scan(lx->text, lx->end, &lx->pos, out, &fault) == BRAID_OK)
        return BRAID_OK;
    if (strcmp(fault, "too large") == 0) {
        lx->pos = start;
        return braid_lex_fail(lx, "a size that fits in 64 bits");
    }
    return braid_lex_fail(lx, "a size (digits with optional K, M, G or T)");
}

braid_status_t braid_lex_cand(braid_lex_t *lx, void *out)
{
    braid_cand_ref_t *ref = out;
    const char       *s;
    memset(ref, 0, sizeof(*ref));
    size_t n = braid_lex_name(lx, &s);
    if (n == 0)
        return braid_lex_fail(lx, "a candidate name (algorithm[@transport])");
    if (n >= sizeof(ref->algo)) {
        lx->pos -= n;
        return braid_lex_fail(lx, "an algorithm name under 32 characters");
    }
    memcpy(ref->algo, s, n);
    if (lx->pos < lx->end && lx->text[lx->pos] == '@') {
        lx->pos++;
        n = braid_lex_name(lx, &s);
        if (n == 0)
            return braid_lex_fail(lx, "a transport name after '@'");
        if (n >= sizeof(ref->tl)) {
            lx->pos -= n;
            return braid_lex_fail(lx, "a transport name under 32 characters");
        }
        memcpy(ref->tl, s, n);
    }
    return BRAID_OK;
}
