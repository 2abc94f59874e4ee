/* A cursor over one line of user input, shared by the BRAID_ALGO and tuning
 * file parsers so that both report faults the same way: what was expected,
 * what was found, and where. */
#ifndef BRAID_CORE_LEX_H
#define BRAID_CORE_LEX_H

#include <stddef.h>

#include <braid/braid.h>

typedef struct braid_lex {
    const char *text; /* the whole input (BRAID_ALGO value or file line) */
    size_t      end;  /* parse stops here (end of line) */
    size_t      pos;
    const char *where; /* "BRAID_ALGO" or "file.tune:12" */
} braid_lex_t;

void braid_lex_skip_blanks(braid_lex_t *lx);
int  braid_lex_peek(braid_lex_t *lx); /* after blanks; '\0' at end */
int  braid_lex_accept(braid_lex_t *lx, char c);
/* A run of [A-Za-z0-9_]; returns its length (0 if none). */
size_t braid_lex_name(braid_lex_t *lx, const char **start);
/* digits with an optional K/M/G suffix. */
braid_status_t braid_lex_size(braid_lex_t *lx, size_t *out);
/* algo['@'transport] */
braid_status_t braid_lex_cand(braid_lex_t *lx,
                              void        *ref /* braid_cand_ref_t */);
/* BRAID_ERR_PARSE: "<where>: expected X, found 'c' at position N: '<text>'".
 */
braid_status_t braid_lex_fail(braid_lex_t *lx, const char *expected);

#endif
