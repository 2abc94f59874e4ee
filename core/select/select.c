#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "select/select.h"
#include "util/log.h"

#define LOG_COMP "select"
/* Local reduction throughput fed to the cost model (GB/s).  A constant: it
 * only needs to rank candidates, and it must be the same on every rank. */
#define REDUCE_GBPS 8.0

static const char *why_names[] = {"BRAID_ALGO override", "tuning file",
                                  "cost model"};

void braid_selector_init(braid_selector_t *sel)
{
    braid_selector_fini(sel);
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        sel->last_bytes[c]  = SIZE_MAX;
        sel->last_mem[c]    = 0;
        sel->last_idx[c]    = -1;
        sel->none_why[c][0] = '\0';
    }
}

/* The memory type the cost model is told: the device one if any buffer is
 * on a device. */
static braid_mem_t cost_mem(uint32_t mem)
{
    for (int m = BRAID_MEM_KINDS - 1; m > 0; m--)
        if (mem & BRAID_MEM_BIT(m))
            return (braid_mem_t)m;
    return BRAID_MEM_HOST;
}

const braid_sel_bw_t *braid_select_bw(const braid_selector_t *sel,
                                      const braid_tl_t       *tl)
{
    for (int i = 0; i < sel->nbw; i++)
        if (sel->bw[i].tl == tl)
            return &sel->bw[i];
    return NULL;
}

/* The link of cand's transport for a call of bytes: where the calibration
 * measured its paths in and out of the caches, each path's bandwidth at
 * the call's working set (bw_curve.c).  Only the table's construction and
 * explanations come here, never a call that finds its size in the table. */
static void sized_link(braid_cost_in_t *in, const braid_selector_t *sel,
                       const braid_candidate_t *cand, int mapped)
{
    const braid_sel_bw_t *bw = braid_select_bw(sel, cand->tl);
    if (bw == NULL)
        return;
    double ws     = braid_call_working_set(in->coll, in->bytes, in->nranks);
    in->put_curve = bw->put;
    in->call_ws   = ws;
    if (bw->sr.in_gbps > 0)
        in->link.beta_gbps = braid_bw_at(&bw->sr, ws);
    if (bw->put.in_gbps > 0)
        in->link.put_beta_gbps = braid_bw_at(&bw->put, ws);
    if (bw->get.in_gbps > 0 && in->get_beta_gbps > 0)
        in->get_beta_gbps = braid_bw_at(&bw->get, ws);
    if (mapped && in->get_beta_gbps > 0 && bw->mget_beta_gbps > 0) {
        in->get_alpha_us  = bw->mget_alpha_us;
        in->get_beta_gbps = bw->mget.in_gbps > 0 ? braid_bw_at(&bw->mget, ws)
                                                 : bw->mget_beta_gbps;
    }
}

static double estimate(const braid_selector_t  *sel,
                       const braid_candidate_t *cand, braid_coll_t coll,
                       size_t bytes, uint32_t mem, int mapped)
{
    if (cand->algo->coll != coll || (cand->mem_types & mem) != mem)
        return -1.0;
    braid_link_t    none = {.struct_size = sizeof(braid_link_t)};
    braid_cost_in_t in   = {
          .struct_size   = sizeof(braid_cost_in_t),
          .coll          = coll,
          .bytes         = bytes,
          .nranks        = sel->nranks,
          .nnodes        = sel->nnodes,
          .ppn           = sel->ppn,
          .topo          = sel->topo,
          .link          = cand->tl != NULL ? cand->tl->link : none,
          .reduce_gbps   = sel->reduce_gbps > 0 ? sel->reduce_gbps : REDUCE_GBPS,
          .stage_us      = sel->stage_us,
          .mem           = cost_mem(mem),
          .comm_state    = cand->comm_state,
          .get_alpha_us  = cand->tl != NULL ? cand->tl->get_alpha_us : 0.0,
          .get_beta_gbps = cand->tl != NULL ? cand->tl->get_beta_gbps : 0.0,
          .caps          = cand->tl != NULL ? cand->tl->caps : 0,
    };
    if (cand->tl != NULL)
        sized_link(&in, sel, cand, mapped);
    if (sel->link_share > 1) {
        in.link.beta_gbps /= sel->link_share;
        in.link.put_beta_gbps /= sel->link_share;
    }
    return cand->algo->estimate(cand->algo, &in);
}

double braid_candidate_estimate(const braid_selector_t  *sel,
                                const braid_candidate_t *cand,
                                braid_coll_t coll, size_t bytes, uint32_t mem)
{
    return estimate(sel, cand, coll, bytes, mem, 0);
}

double braid_candidate_estimate_mapped(const braid_selector_t  *sel,
                                       const braid_candidate_t *cand,
                                       braid_coll_t coll, size_t bytes,
                                       uint32_t mem)
{
    return estimate(sel, cand, coll, bytes, mem, 1);
}

static int ref_matches(const braid_cand_ref_t *ref, const braid_candidate_t *c)
{
    if (strcmp(ref->algo, c->algo->name) != 0)
        return 0;
    return ref->tl[0] == '\0' || strcmp(ref->tl, c->tl_name) == 0;
}

/* Estimates within a relative 1e-9 of each other are equal: two
 * algorithms whose models sum the same terms in another order differ by
 * rounding, not by cost, and would otherwise take turns along the sizes. */
static int cheaper(double t, double than) { return t < than - 1e-9 * than; }

/* Cheapest candidate matching ref (any when ref is NULL).  The tie rule:
 * of equal estimates the first in name order wins -- the candidates are
 * sorted by name and a later one must be cheaper -- so every rank picks
 * the same one. */
static int cheapest(const braid_selector_t *sel, const braid_cand_ref_t *ref,
                    braid_coll_t coll, size_t bytes, uint32_t mem)
{
    int    best   = -1;
    double best_t = 0;
    for (int i = 0; i < sel->ncands; i++) {
        if (ref != NULL && !ref_matches(ref, &sel->cands[i]))
            continue;
        double t =
            braid_candidate_estimate(sel, &sel->cands[i], coll, bytes, mem);
        if (t >= 0 && (best < 0 || cheaper(t, best_t))) {
            best   = i;
            best_t = t;
        }
    }
    return best;
}

int braid_select_cheapest(const braid_selector_t *sel, braid_coll_t coll,
                          size_t bytes, uint32_t mem, double *est)
{
    int idx = cheapest(sel, NULL, coll, bytes, mem);
    *est    = idx >= 0 ? braid_candidate_estimate(sel, &sel->cands[idx], coll,
                                                  bytes, mem)
                       : -1.0;
    return idx;
}

static const char *mem_note(uint32_t mem)
{
    if (mem & BRAID_NEED_STREAM)
        return " on device memory, stream-ordered";
    return mem == BRAID_MEM_BIT(BRAID_MEM_HOST) ? "" : " on device memory";
}

braid_pick_t braid_select_decide(const braid_selector_t *sel,
                                 braid_coll_t coll, size_t bytes, uint32_t mem,
                                 const braid_tune_row_t **skipped)
{
    braid_pick_t pick = {-1, BRAID_WHY_OVERRIDE, NULL};
    *skipped          = NULL;
    const braid_algo_rule_t *rule =
        braid_algo_spec_match(sel->override, coll, bytes);
    if (rule != NULL) {
        /* Forced but impossible stays impossible (idx -1): the call is
         * refused rather than silently given to another. */
        for (int i = 0; i < rule->ncands && pick.idx < 0; i++) {
            pick.idx = cheapest(sel, &rule->cands[i], coll, bytes, mem);
            pick.ref = &rule->cands[i];
        }
        if (pick.idx < 0)
            pick.ref = NULL;
        return pick;
    }
    const braid_tune_row_t *row = braid_tune_match(
        sel->tune, coll, sel->nranks, sel->nnodes, (int)sel->topo, bytes);
    if (row != NULL) {
        pick = (braid_pick_t){cheapest(sel, &row->cand, coll, bytes, mem),
                              BRAID_WHY_TUNE, &row->cand};
        if (pick.idx >= 0)
            return pick;
        *skipped = row; /* from another machine, perhaps: the cost model */
    }
    return (braid_pick_t){cheapest(sel, NULL, coll, bytes, mem),
                          BRAID_WHY_COST, NULL};
}

/* The error of a call that no candidate can run (pick.idx < 0). */
static braid_status_t refuse(const braid_selector_t *sel, braid_pick_t pick,
                             braid_coll_t coll, size_t bytes, uint32_t mem)
{
    if (pick.why == BRAID_WHY_OVERRIDE) {
        const braid_algo_rule_t *rule =
            braid_algo_spec_match(sel->override, coll, bytes);
        char list[256] = "", name[80];
        for (int i = 0; rule != NULL && i < rule->ncands; i++) {
            braid_cand_ref_format(name, sizeof(name), &rule->cands[i]);
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                     i ? ", " : "", name);
        }
        char avail[512] = "";
        for (int i = 0; i < sel->ncands; i++)
            if (sel->cands[i].algo->coll == coll &&
                (sel->cands[i].mem_types & mem) == mem)
                snprintf(avail + strlen(avail), sizeof(avail) - strlen(avail),
                         "%s%s", avail[0] ? ", " : "", sel->cands[i].name);
        return braid_error(BRAID_ERR_NOT_SUPPORTED,
                           "BRAID_ALGO forces %s for "
                           "%s of %zu bytes%s on %d ranks, but no such "
                           "candidate can run it on this communicator "
                           "(available: %s)%s%s",
                           list, braid_coll_name(coll), bytes, mem_note(mem),
                           sel->nranks, avail[0] ? avail : "none",
                           sel->caps_note[0] ? "; " : "", sel->caps_note);
    }
    if (sel->none_why[coll][0] != '\0')
        return braid_error(BRAID_ERR_NOT_SUPPORTED,
                           "no candidate can run %s "
                           "on this communicator: %s",
                           braid_coll_name(coll), sel->none_why[coll]);
    return braid_error(BRAID_ERR_NOT_SUPPORTED,
                       "no candidate can run %s "
                       "of %zu bytes%s on %d ranks: each of this "
                       "communicator's %s candidates declines it (see "
                       "braid-info -n %d)",
                       braid_coll_name(coll), bytes, mem_note(mem),
                       sel->nranks, braid_coll_name(coll), sel->nranks);
}

/* The candidates that tie with the chosen one among those ref allows,
 * ", "-separated (empty when none does). */
static void ties_of(char *buf, size_t len, const braid_selector_t *sel,
                    const braid_cand_ref_t *ref, int idx, braid_coll_t coll,
                    size_t bytes, uint32_t mem)
{
    double t =
        braid_candidate_estimate(sel, &sel->cands[idx], coll, bytes, mem);
    buf[0] = '\0';
    for (int i = 0; i < sel->ncands; i++) {
        if (i == idx || (ref != NULL && !ref_matches(ref, &sel->cands[i])))
            continue;
        double u =
            braid_candidate_estimate(sel, &sel->cands[i], coll, bytes, mem);
        if (u < 0 || cheaper(u, t) || cheaper(t, u))
            continue;
        size_t o = strlen(buf);
        snprintf(buf + o, len - o, "%s%s", o ? ", " : "", sel->cands[i].name);
    }
}

/* "tuning file line 12 (measured 5.10 us at 4096 B; cost model:
 * twoshot@shm)": the row, what braid-tune measured there, and what the
 * cost model alone would have taken. */
static void tune_note(char *buf, size_t len, const braid_selector_t *sel,
                      int idx, braid_coll_t coll, size_t bytes, uint32_t mem)
{
    const braid_tune_row_t *row = braid_tune_match(
        sel->tune, coll, sel->nranks, sel->nnodes, (int)sel->topo, bytes);
    if (row == NULL || idx < 0) {
        snprintf(buf, len, "%s", why_names[BRAID_WHY_TUNE]);
        return;
    }
    int    model    = cheapest(sel, NULL, coll, bytes, mem);
    double us       = braid_tune_measured(row, sel->cands[idx].name);
    char   meas[96] = "";
    if (us >= 0)
        snprintf(meas, sizeof(meas), "measured %.2f us at %zu B; ", us,
                 row->at);
    snprintf(buf, len, "%s line %d (%scost model: %s)",
             why_names[BRAID_WHY_TUNE], row->line, meas,
             model >= 0 ? sel->cands[model].name : "none");
}

void braid_select_why(char *buf, size_t len, const braid_selector_t *sel,
                      braid_pick_t pick, braid_coll_t coll, size_t bytes,
                      uint32_t mem)
{
    char ties[256] = "", what[256];
    if (pick.idx >= 0)
        ties_of(ties, sizeof(ties), sel, pick.ref, pick.idx, coll, bytes, mem);
    if (pick.why == BRAID_WHY_TUNE)
        tune_note(what, sizeof(what), sel, pick.idx, coll, bytes, mem);
    else
        snprintf(what, sizeof(what), "%s", why_names[pick.why]);
    if (ties[0] != '\0')
        snprintf(buf, len, "%s; tie with %s: first in name order", what, ties);
    else
        snprintf(buf, len, "%s", what);
    /* A composite says what its estimate is made of (hier/). */
    size_t o = strlen(buf);
    if (pick.idx >= 0 && sel->describe != NULL && o + 4 < len &&
        sel->describe(&sel->cands[pick.idx], coll, bytes, buf + o + 2,
                      len - o - 2))
        memcpy(buf + o, "; ", 2);
}

braid_status_t braid_select(braid_candidate_t **cand, braid_selector_t *sel,
                            braid_coll_t coll, size_t bytes, uint32_t mem)
{
    if (braid_select_cached(cand, sel, coll, bytes, mem))
        return BRAID_OK;
    braid_pick_t pick = braid_select_find(sel, coll, bytes, mem);
    if (pick.idx < 0)
        return refuse(sel, pick, coll, bytes, mem);
    sel->last_bytes[coll] = bytes;
    sel->last_mem[coll]   = mem;
    sel->last_idx[coll]   = pick.idx;
    *cand                 = &sel->cands[pick.idx];
    return BRAID_OK;
}

braid_status_t braid_select_explain(braid_selector_t *sel, braid_coll_t coll,
                                    size_t bytes, uint32_t mem, char *cand,
                                    size_t cand_len, char *why, size_t why_len)
{
    braid_pick_t pick = braid_select_find(sel, coll, bytes, mem);
    if (pick.idx < 0)
        return refuse(sel, pick, coll, bytes, mem);
    if (cand != NULL && cand_len > 0)
        snprintf(cand, cand_len, "%s", sel->cands[pick.idx].name);
    if (why != NULL && why_len > 0)
        braid_select_why(why, why_len, sel, pick, coll, bytes, mem);
    return BRAID_OK;
}
