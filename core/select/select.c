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
        sel->last_mem[c]   = 0;
        sel->last_idx[c]   = -1;
        sel->explained[c]  = 0;
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

double braid_candidate_estimate(const braid_selector_t *sel,
                                const braid_candidate_t *cand,
                                braid_coll_t coll, size_t bytes, uint32_t mem)
{
    if (cand->algo->coll != coll || (cand->mem_types & mem) != mem)
        return -1.0;
    braid_link_t none = {.struct_size = sizeof(braid_link_t)};
    braid_cost_in_t in = {
        .struct_size = sizeof(braid_cost_in_t),
        .coll        = coll,
        .bytes       = bytes,
        .nranks      = sel->nranks,
        .nnodes      = sel->nnodes,
        .ppn         = sel->ppn,
        .topo        = sel->topo,
        .link        = cand->tl != NULL ? cand->tl->link : none,
        .reduce_gbps = REDUCE_GBPS,
        .stage_us    = sel->stage_us,
        .mem         = cost_mem(mem),
        .comm_state  = cand->comm_state,
    };
    if (sel->link_share > 1) {
        in.link.beta_gbps /= sel->link_share;
        in.link.put_beta_gbps /= sel->link_share;
    }
    return cand->algo->estimate(cand->algo, &in);
}

static int ref_matches(const braid_cand_ref_t *ref, const braid_candidate_t *c)
{
    if (strcmp(ref->algo, c->algo->name) != 0)
        return 0;
    return ref->tl[0] == '\0' || strcmp(ref->tl, c->tl_name) == 0;
}

/* Cheapest candidate matching ref (any when ref is NULL).  The tie rule:
 * of equal estimates the first in name order wins -- the candidates are
 * sorted by name and a later one must be strictly cheaper -- so every rank
 * picks the same one. */
static int cheapest(const braid_selector_t *sel, const braid_cand_ref_t *ref,
                    braid_coll_t coll, size_t bytes, uint32_t mem)
{
    int    best   = -1;
    double best_t = 0;
    for (int i = 0; i < sel->ncands; i++) {
        if (ref != NULL && !ref_matches(ref, &sel->cands[i]))
            continue;
        double t = braid_candidate_estimate(sel, &sel->cands[i], coll, bytes,
                                            mem);
        if (t >= 0 && (best < 0 || t < best_t)) {
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

/* *ref: the BRAID_ALGO or tuning-file entry that decided (NULL: the cost
 * model among all). */
static braid_status_t decide(int *idx, why_t *why,
                             const braid_cand_ref_t **ref,
                             braid_selector_t *sel, braid_coll_t coll,
                             size_t bytes, uint32_t mem)
{
    *ref = NULL;
    const braid_algo_rule_t *rule = braid_algo_spec_match(sel->override, coll,
                                                          bytes);
    if (rule != NULL) {
        for (int i = 0; i < rule->ncands; i++) {
            *idx = cheapest(sel, &rule->cands[i], coll, bytes, mem);
            if (*idx >= 0) {
                *why = WHY_OVERRIDE;
                *ref = &rule->cands[i];
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
            if (sel->cands[i].algo->coll == coll &&
                (sel->cands[i].mem_types & mem) == mem)
                snprintf(avail + strlen(avail), sizeof(avail) - strlen(avail),
                         "%s%s", avail[0] ? ", " : "", sel->cands[i].name);
        return braid_error(BRAID_ERR_NOT_SUPPORTED, "BRAID_ALGO forces %s for "
                           "%s of %zu bytes%s on %d ranks, but no such "
                           "candidate can run it on this communicator "
                           "(available: %s)", list, braid_coll_name(coll),
                           bytes, mem_note(mem), sel->nranks,
                           avail[0] ? avail : "none");
    }
    const braid_tune_row_t *row = braid_tune_match(sel->tune, coll, sel->nranks,
                                                   sel->nnodes, bytes);
    if (row != NULL) {
        *idx = cheapest(sel, &row->cand, coll, bytes, mem);
        if (*idx >= 0) {
            *why = WHY_TUNE;
            *ref = &row->cand;
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
    *idx = cheapest(sel, NULL, coll, bytes, mem);
    *why = WHY_COST;
    if (*idx < 0 && sel->none_why[coll][0] != '\0')
        return braid_error(BRAID_ERR_NOT_SUPPORTED, "no candidate can run %s "
                           "on this communicator: %s", braid_coll_name(coll),
                           sel->none_why[coll]);
    if (*idx < 0)
        return braid_error(BRAID_ERR_NOT_SUPPORTED, "no candidate can run %s "
                           "of %zu bytes%s on %d ranks: each of this "
                           "communicator's %s candidates declines it (see "
                           "braid-info -n %d)", braid_coll_name(coll), bytes,
                           mem_note(mem), sel->nranks, braid_coll_name(coll),
                           sel->nranks);
    return BRAID_OK;
}

/* The candidates that tie with the chosen one among those ref allows,
 * ", "-separated (empty when none does). */
static void ties_of(char *buf, size_t len, const braid_selector_t *sel,
                    const braid_cand_ref_t *ref, int idx, braid_coll_t coll,
                    size_t bytes, uint32_t mem)
{
    double t = braid_candidate_estimate(sel, &sel->cands[idx], coll, bytes,
                                        mem);
    buf[0] = '\0';
    for (int i = 0; i < sel->ncands; i++) {
        if (i == idx || (ref != NULL && !ref_matches(ref, &sel->cands[i])) ||
            braid_candidate_estimate(sel, &sel->cands[i], coll, bytes, mem) !=
                t)
            continue;
        size_t o = strlen(buf);
        snprintf(buf + o, len - o, "%s%s", o ? ", " : "", sel->cands[i].name);
    }
}

/* "cost model", or "cost model; tie with x, y: first in name order". */
static void why_text(char *buf, size_t len, const braid_selector_t *sel,
                     const braid_cand_ref_t *ref, int idx, why_t why,
                     braid_coll_t coll, size_t bytes, uint32_t mem)
{
    char ties[256];
    ties_of(ties, sizeof(ties), sel, ref, idx, coll, bytes, mem);
    if (ties[0] != '\0')
        snprintf(buf, len, "%s; tie with %s: first in name order",
                 why_names[why], ties);
    else
        snprintf(buf, len, "%s", why_names[why]);
    size_t o = strlen(buf);
    if (sel->describe != NULL && o + 4 < len &&
        sel->describe(&sel->cands[idx], coll, bytes, buf + o + 2,
                      len - o - 2))
        memcpy(buf + o, "; ", 2);
}

static int size_class(size_t bytes)
{
    return bytes == 0 ? 0 : 64 - __builtin_clzll((unsigned long long)bytes);
}

static void explain_once(braid_selector_t *sel, braid_coll_t coll,
                         size_t bytes, uint32_t mem, int idx, why_t why,
                         const braid_cand_ref_t *ref)
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
        const braid_candidate_t *c = &sel->cands[i];
        double t = braid_candidate_estimate(sel, c, coll, bytes, mem);
        size_t o = strlen(others);
        if (t >= 0) {
            snprintf(others + o, sizeof(others) - o, "%s %s %.2f us",
                     o ? "," : "", c->name, t);
            continue;
        }
        /* Not for this call's memory: what it would cost on its own (NCCL
         * next to the host candidates, for either kind of call). */
        uint32_t own = c->mem_types & ~BRAID_NEED_STREAM;
        double   t2  = (c->mem_types & mem) != mem && own != 0
                           ? braid_candidate_estimate(sel, c, coll, bytes, own)
                           : -1;
        if (t2 >= 0)
            snprintf(others + o, sizeof(others) - o, "%s %s %.2f us on %s "
                     "memory only", o ? "," : "", c->name, t2,
                     own & BRAID_MEM_BIT(BRAID_MEM_HOST) ? "host" : "device");
        else
            snprintf(others + o, sizeof(others) - o, "%s %s cannot run",
                     o ? "," : "", c->name);
    }
    char reason[640];
    why_text(reason, sizeof(reason), sel, ref, idx, why, coll, bytes, mem);
    braid_log(BRAID_LOG_INFO, LOG_COMP, "%s %zu B%s (class %s%zu B), %d ranks "
              "on %d nodes: %s by %s (estimate %.2f us); others:%s",
              braid_coll_name(coll), bytes, mem_note(mem), cls ? "<=" : "",
              cls ? ((size_t)1 << cls) - 1 : 0, sel->nranks, sel->nnodes,
              sel->cands[idx].name, reason,
              braid_candidate_estimate(sel, &sel->cands[idx], coll, bytes,
                                       mem),
              others[0] ? others : " none");
}

braid_status_t braid_select(braid_candidate_t **cand, braid_selector_t *sel,
                            braid_coll_t coll, size_t bytes, uint32_t mem)
{
    if (sel->last_bytes[coll] == bytes && sel->last_mem[coll] == mem) {
        *cand = &sel->cands[sel->last_idx[coll]];
        return BRAID_OK;
    }
    int    idx;
    why_t  why;
    const braid_cand_ref_t *ref;
    braid_status_t st = decide(&idx, &why, &ref, sel, coll, bytes, mem);
    if (st != BRAID_OK)
        return st;
    explain_once(sel, coll, bytes, mem, idx, why, ref);
    sel->last_bytes[coll] = bytes;
    sel->last_mem[coll]   = mem;
    sel->last_idx[coll]   = idx;
    *cand = &sel->cands[idx];
    return BRAID_OK;
}

braid_status_t braid_select_explain(braid_selector_t *sel, braid_coll_t coll,
                                    size_t bytes, uint32_t mem, char *cand,
                                    size_t cand_len, char *why,
                                    size_t why_len)
{
    int            idx;
    why_t          w;
    const braid_cand_ref_t *ref;
    braid_status_t st = decide(&idx, &w, &ref, sel, coll, bytes, mem);
    if (st != BRAID_OK)
        return st;
    if (cand != NULL && cand_len > 0)
        snprintf(cand, cand_len, "%s", sel->cands[idx].name);
    if (why != NULL && why_len > 0)
        why_text(why, why_len, sel, ref, idx, w, coll, bytes, mem);
    return BRAID_OK;
}
