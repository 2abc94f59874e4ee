/* Parsers of the user's choices: the BRAID_ALGO override and the tuning file.
 *
 * BRAID_ALGO grammar (whitespace allowed between tokens):
 *   spec  := rule (';' rule)*
 *   rule  := coll ':' item (',' item)*
 *   item  := [range '='] cand          an item without a range joins the
 *                                      previous item's range (all sizes if
 * first) range := size '-' [size]           half-open [lo, hi); no hi = no
 * limit size  := digits [K|M|G]            binary multiples, case-insensitive
 *   cand  := algo ['@' transport]      no transport: the cheapest one
 *   coll  := allreduce | reduce_scatter | allgather | broadcast | barrier
 * e.g. "allreduce:0-16K=oneshot,16K-=ring@ucx;allgather:ring".  Candidates of
 * one range are tried in the order written.
 *
 * Tuning file (written by braid-tune, read through BRAID_TUNE_FILE): one row
 * per line, '#' starts a comment, fields separated by blanks:
 *   coll nranks nnodes [topo] min_bytes max_bytes candidate [measured]
 *   topo     := single | switch | ring | '*'    (absent: any topology)
 *   measured := 'at' size (cand '=' microseconds)+
 * nranks and nnodes may be '*'; max_bytes may be 'inf'; the range is
 * [min_bytes, max_bytes) of the call's bytes per rank (braid_cost_in_t
 * .bytes).  `measured` records what braid-tune timed at one size of the
 * range (at most BRAID_TUNE_MEAS candidates); the dispatcher only shows
 * it.  The first matching row wins.  docs/tuning.md has the details. */
#ifndef BRAID_CORE_SPEC_H
#define BRAID_CORE_SPEC_H

#include <stddef.h>

#include <braid/braid.h>

#define BRAID_NAME_LEN   32
#define BRAID_RULE_CANDS 8
#define BRAID_MAX_RULES  64

typedef struct braid_cand_ref {
    char algo[BRAID_NAME_LEN];
    char tl[BRAID_NAME_LEN]; /* "" = any transport */
} braid_cand_ref_t;

typedef struct braid_algo_rule {
    braid_coll_t     coll;
    size_t           lo, hi; /* [lo, hi); hi == SIZE_MAX means no limit */
    int              ncands;
    braid_cand_ref_t cands[BRAID_RULE_CANDS];
} braid_algo_rule_t;

typedef struct braid_algo_spec {
    int               n;
    braid_algo_rule_t rules[BRAID_MAX_RULES];
} braid_algo_spec_t;

/* text may be NULL or "" (no override).  Errors name the position. */
braid_status_t           braid_algo_spec_parse(braid_algo_spec_t *spec,
                                               const char        *text);
const braid_algo_rule_t *braid_algo_spec_match(const braid_algo_spec_t *spec,
                                               braid_coll_t             coll,
                                               size_t                   bytes);

#define BRAID_TUNE_MEAS 24

typedef struct braid_tune_meas {
    braid_cand_ref_t cand;
    double           us;
} braid_tune_meas_t;

typedef struct braid_tune_row {
    braid_coll_t      coll;
    int               nranks; /* -1: any */
    int               nnodes; /* -1: any */
    size_t            lo, hi;
    braid_cand_ref_t  cand;
    int               topo; /* -1: any, else a braid_topo_kind_t */
    int               line; /* in its file, for messages */
    size_t            at;   /* the size measured (valid when nmeas > 0) */
    int               nmeas;
    braid_tune_meas_t meas[BRAID_TUNE_MEAS];
} braid_tune_row_t;

typedef struct braid_tune {
    int               n;
    braid_tune_row_t *rows;
} braid_tune_t;

/* Parses a whole file's text; source names it in errors ("file:line:col"). */
braid_status_t braid_tune_parse(braid_tune_t *tune, const char *text,
                                const char *source);
braid_status_t braid_tune_load(braid_tune_t *tune, const char *path);
/* The first row for this call on a communicator of nranks ranks on nnodes
 * hosts cabled as topo (a braid_topo_kind_t), or NULL. */
const braid_tune_row_t *braid_tune_match(const braid_tune_t *tune,
                                         braid_coll_t coll, int nranks,
                                         int nnodes, int topo, size_t bytes);
/* The measured time of cand in row, or -1 when it has none. */
double braid_tune_measured(const braid_tune_row_t *row, const char *cand);
/* "single", "switch", "ring" for a braid_topo_kind_t; "*" for -1. */
const char *braid_tune_topo_name(int topo);
void        braid_tune_free(braid_tune_t *tune);

/* Shared by both parsers. */
int  braid_coll_from_name(braid_coll_t *coll, const char *name, size_t len);
void braid_cand_ref_format(char *buf, size_t len, const braid_cand_ref_t *ref);

#endif
