#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "select/select.h"
#include "util/log.h"

#define LOG_COMP "select"
/* Local reduction throughput fed to the cost model (GB/s).  A constant: it
 * only needs to rank candidates, and it must be the same on every rank. */
#define REDUCE_GBPS 8.0

typedef enum { WHY_OVERRIDE, WHY_TUNE, WHY_COST } why_t;
static const char *why_names[] = {"BRAID_ALGO override", "tuning file",
                                  "cost model"};

void braid_selector_init(braid_selector_t *sel)
{
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        sel->last_bytes[c] = SIZE_MAX;
        sel->last_idx[c]   = -1;
        sel->explained[c]  = 0;
        sel->none_why[c][0] = '\0';
    }
}

double braid_candidate_estimate(const braid_selector_t *sel,
                                const braid_candidate_t *cand,
                                braid_coll_t coll, size_t bytes)
{
    if (cand->algo->coll != coll)
        return -1.0;
    braid_cost_in_t in = {
        .coll        = coll,
        .bytes       = bytes,
        .nranks      = sel->nranks,
        .nnodes      = sel->nnodes,
        .ppn         = sel->ppn,
        .topo        = sel->topo,
        .link        = cand->tl->link,
        .reduce_gbps = REDUCE_GBPS,
        .stage_us    = sel->stage_us,
    };
    return cand->algo->estimate(&in);
}

static int ref_matches(const braid_cand_ref_t *ref, const braid_candidate_t *c)
{
    if (strcmp(ref->algo, c->algo->name) != 0)
        return 0;
    return ref->tl[0] == '\0' || strcmp(ref->tl, c->tl->ops->name) == 0;
}

/* Cheapest candidate matching ref (any when ref is NULL); ties go to the
 * first in name order, which every rank shares. */
static int cheapest(const braid_selector_t *sel, const braid_cand_ref_t *ref,
                    braid_coll_t coll, size_t bytes)
{
    int    best   = -1;
    double best_t = 0;
    for (int i = 0; i < sel->ncands; i++) {
        if (ref != NULL && !ref_matches(ref, &sel->cands[i]))
            continue;
        double t = braid_candidate_estimate(sel, &sel->cands[i], coll, bytes);
        if (t >= 0 && (best < 0 || t < best_t)) {
            best   = i;
            best_t = t;
        }
    }
    return best;
}

static braid_status_t decide(int *idx, why_t *why, braid_selector_t *sel,
                             braid_coll_t coll, size_t bytes)
{
    const braid_algo_rule_t *rule = braid_algo_spec_match(sel->override, coll,
                                                          bytes);
    if (rule != NULL) {
        for (int i = 0; i < rule->ncands; i++) {
            *idx = cheapest(sel, &rule->cands[i], coll, bytes);
            if (*idx >= 0) {
                *why = WHY_OVERRIDE;
                return BRAID_OK;
            }
        }
        /* Forced but impossible: refuse rather than silently run another. */
        char list[256] = "", name[80];
        for (int i = 0; i < rule->ncands; i++) {
            braid_cand_ref_format(name, sizeof(name), &rule->cands[i]);
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                     i ? ", " : "", name);
        }
        char avail[512] = "";
        for (int i = 0; i < sel->ncands; i++)
            if (sel->cands[i].algo->coll == coll)
                snprintf(avail + strlen(avail), sizeof(avail) - strlen(avail),
                         "%s%s", avail[0] ? ", " : "", sel->cands[i].name);
        return braid_error(BRAID_ERR_NOT_SUPPORTED, "BRAID_ALGO forces %s for "
                           "%s of %zu bytes on %d ranks, but no such candidate "
                           "can run it on this communicator (available: %s)",
                           list, braid_coll_name(coll), bytes, sel->nranks,
                           avail[0] ? avail : "none");
    }
    const braid_tune_row_t *row = braid_tune_match(sel->tune, coll, sel->nranks,
                                                   sel->nnodes, bytes);
    if (row != NULL) {
        *idx = cheapest(sel, &row->cand, coll, bytes);
        if (*idx >= 0) {
            *why = WHY_TUNE;
            return BRAID_OK;
        }
        /* A tuning table may come from another machine: say so, once per
         * class, and let the cost model decide. */
        char name[80];
        braid_cand_ref_format(name, sizeof(name), &row->cand);
        BRAID_LOG_JOB(BRAID_LOG_WARN, LOG_COMP, "tuning file names %s for %s of "
                  "%zu bytes, which this communicator does not have; using "
                  "the cost model", name, braid_coll_name(coll), bytes);
    }
    *idx = cheapest(sel, NULL, coll, bytes);
    *why = WHY_COST;
    if (*idx < 0 && sel->none_why[coll][0] != '\0')
        return braid_error(BRAID_ERR_NOT_SUPPORTED, "no candidate can run %s "
                           "on this communicator: %s", braid_coll_name(coll),
                           sel->none_why[coll]);
    if (*idx < 0)
        return braid_error(BRAID_ERR_NOT_SUPPORTED, "no candidate can run %s "
                           "of %zu bytes on %d ranks: each of this "
                           "communicator's %s candidates declines that size "
                           "(see braid-info -n %d)", braid_coll_name(coll),
                           bytes, sel->nranks, braid_coll_name(coll),
                           sel->nranks);
    return BRAID_OK;
}

static int size_class(size_t bytes)
{
    return bytes == 0 ? 0 : 64 - __builtin_clzll((unsigned long long)bytes);
}

static void explain_once(braid_selector_t *sel, braid_coll_t coll,
                         size_t bytes, int idx, why_t why)
{
    int cls = size_class(bytes);
    if (sel->rank != 0 || (sel->explained[coll] >> cls & 1) ||
        braid_log_level() < BRAID_LOG_INFO)
        return;
    sel->explained[coll] |= 1ull << cls;
    char others[768] = "";
    for (int i = 0; i < sel->ncands; i++) {
        if (i == idx || sel->cands[i].algo->coll != coll)
            continue;
        double t = braid_candidate_estimate(sel, &sel->cands[i], coll, bytes);
        size_t o = strlen(others);
        if (t >= 0)
            snprintf(others + o, sizeof(others) - o, "%s %s %.2f us",
                     o ? "," : "", sel->cands[i].name, t);
        else
            snprintf(others + o, sizeof(others) - o, "%s %s cannot run",
                     o ? "," : "", sel->cands[i].name);
    }
    braid_log(BRAID_LOG_INFO, LOG_COMP, "%s %zu B (class %s%zu B), %d ranks on "
              "%d nodes: %s by %s (estimate %.2f us); others:%s",
              braid_coll_name(coll), bytes, cls ? "<=" : "",
              cls ? ((size_t)1 << cls) - 1 : 0, sel->nranks, sel->nnodes,
              sel->cands[idx].name, why_names[why],
              braid_candidate_estimate(sel, &sel->cands[idx], coll, bytes),
              others[0] ? others : " none");
}

braid_status_t braid_select(braid_candidate_t **cand, braid_selector_t *sel,
                            braid_coll_t coll, size_t bytes)
{
    if (sel->last_bytes[coll] == bytes) {
        *cand = &sel->cands[sel->last_idx[coll]];
        return BRAID_OK;
    }
    int    idx;
    why_t  why;
    braid_status_t st = decide(&idx, &why, sel, coll, bytes);
    if (st != BRAID_OK)
        return st;
    explain_once(sel, coll, bytes, idx, why);
    sel->last_bytes[coll] = bytes;
    sel->last_idx[coll]   = idx;
    *cand = &sel->cands[idx];
    return BRAID_OK;
}

braid_status_t braid_select_explain(braid_selector_t *sel, braid_coll_t coll,
                                    size_t bytes, char *cand, size_t cand_len,
                                    char *why, size_t why_len)
{
    int            idx;
    why_t          w;
    braid_status_t st = decide(&idx, &w, sel, coll, bytes);
    if (st != BRAID_OK)
        return st;
    if (cand != NULL && cand_len > 0)
        snprintf(cand, cand_len, "%s", sel->cands[idx].name);
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "%s", why_names[w]);
    return BRAID_OK;
}
