/* Opens the transports every rank has and builds the candidate set.
 *
 * Each rank may have loaded different plugins (a node without an RDMA NIC, a
 * BRAID_PLUGINS set on one node only), so what a communicator uses is the
 * intersection over its ranks, computed through the bootstrap channel, and
 * each transport -- and each backend, an algorithm that brings its own
 * transport -- is kept only if it opened on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/res.h"
#include "comm/comm.h"
#include "util/log.h"

#define LOG_COMP  "comm"
#define NAME_LEN  96
#define MAX_NAMES 256

typedef struct name_set {
    uint32_t n;
    char     names[MAX_NAMES][NAME_LEN];
} name_set_t;

static void name_set_add(name_set_t *set, const char *a, const char *b,
                         const char *c)
{
    if (set->n < MAX_NAMES)
        snprintf(set->names[set->n++], NAME_LEN, "%s/%s/%s", a, b, c);
}

static int name_set_has(const name_set_t *set, const char *name)
{
    for (uint32_t i = 0; i < set->n && i < MAX_NAMES; i++)
        if (strncmp(set->names[i], name, NAME_LEN) == 0)
            return 1;
    return 0;
}

/* keep[i] = 1 when local->names[i] is on every rank. */
static braid_status_t intersect(braid_comm_t *comm, const name_set_t *local,
                                int *keep)
{
    name_set_t *all = malloc(sizeof(name_set_t) * (size_t)comm->size);
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "candidate agreement: out of "
                                                "memory");
    braid_status_t st =
        braid_bootstrap_allgather(comm->bs, local, all, sizeof(*local));
    for (uint32_t i = 0; st == BRAID_OK && i < local->n; i++) {
        keep[i] = 1;
        for (int r = 0; r < comm->size && keep[i]; r++)
            if (!name_set_has(&all[r], local->names[i])) {
                keep[i] = 0;
                BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                          "%s is not on rank %d: not "
                          "used on this communicator",
                          local->names[i], r);
            }
    }
    free(all);
    return st;
}

static int transport_name_taken(const braid_comm_t *comm, const char *name)
{
    for (int i = 0; i < comm->ntls; i++)
        if (strcmp(comm->tls[i].ops->name, name) == 0)
            return 1;
    return 0;
}

braid_status_t braid_comm_agree(braid_comm_t *comm, int ok, int *all_ok,
                                const char *what)
{
    int32_t  mine = ok;
    int32_t *oks  = malloc(sizeof(int32_t) * (size_t)comm->size);
    if (oks == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t ast =
        braid_bootstrap_allgather(comm->bs, &mine, oks, sizeof(mine));
    *all_ok = ast == BRAID_OK;
    for (int r = 0; r < comm->size && *all_ok; r++)
        if (!oks[r]) {
            *all_ok = 0;
            BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                      "%s did not open on rank %d: "
                      "not used on this communicator",
                      what, r);
        }
    free(oks);
    return ast; /* a bootstrap failure is fatal; a refusal is not */
}

uint32_t braid_tl_declared_caps(const braid_transport_t *ops)
{
    uint32_t caps = ops->caps;
    if (!BRAID_HAS(ops, braid_transport_t, mem_peer) || ops->mem_peer == NULL)
        caps &= ~BRAID_CAP_LOAD;
    return caps;
}

/* Whether a transport that declares BRAID_CAP_GET has the get path on this
 * communicator (the transport decided it with its peers in comm_create, so
 * every rank hears the same): without it, tl->caps loses the bit and no
 * candidate needing it is built.  why (160 bytes) keeps the answer for
 * braid-info. */
static void open_get_path(braid_comm_t *comm, braid_tl_t *tl, char *why)
{
    const braid_transport_t *ops = tl->ops;
    int                      ok  = 0;
    why[0]                       = '\0';
    if (!(ops->caps & BRAID_CAP_GET))
        return;
    if (!BRAID_HAS(ops, braid_transport_t, get) || ops->get_link == NULL ||
        ops->mem_expose == NULL || ops->mem_unexpose == NULL ||
        ops->get == NULL) {
        snprintf(why, 160,
                 "the transport declares it but lacks get_link, "
                 "mem_expose, mem_unexpose or get");
    } else if (ops->get_link(tl->tcomm, &tl->get_alpha_us, &tl->get_beta_gbps,
                             why, 160) == BRAID_OK &&
               tl->get_beta_gbps > 0.0) {
        ok = 1; /* why keeps the transport's word on the path */
    } else if (why[0] == '\0') {
        snprintf(why, 160, "no bandwidth declared");
    }
    if (!ok) {
        tl->caps &= ~BRAID_CAP_GET;
        tl->get_alpha_us = tl->get_beta_gbps = 0.0;
        char  *note                          = comm->sel.caps_note;
        size_t used                          = strlen(note);
        snprintf(note + used, sizeof(comm->sel.caps_note) - used,
                 "%s%s: single-copy reads (get) unavailable: %s",
                 used ? "; " : "", ops->name, why);
    }
    if (comm->rank == 0)
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                  "transport %s: single-copy "
                  "reads (get) %s%s",
                  ops->name, ok ? "available: " : "unavailable: ", why);
}

/* Opens one transport everywhere or nowhere. */
static braid_status_t open_one(braid_comm_t            *comm,
                               const braid_transport_t *ops)
{
    void          *tcomm = NULL;
    char           what[96];
    int            all_ok;
    braid_status_t st = ops->comm_create(ops, braid_core_services(),
                                         &comm->oob, &comm->topo, &tcomm);
    if (st != BRAID_OK)
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP, "transport %s not opened: %s",
                  ops->name, braid_last_error());
    snprintf(what, sizeof(what), "transport %s", ops->name);
    braid_status_t ast = braid_comm_agree(comm, st == BRAID_OK, &all_ok, what);
    if (!all_ok) {
        if (st == BRAID_OK)
            ops->comm_destroy(tcomm);
        /* Every rank has it, and it did not open here: it may still serve
         * the ranks of each host (hier/). */
        if (ast == BRAID_OK)
            comm->tl_local[comm->ntl_local++] = ops;
        return ast;
    }
    char       *get_why  = comm->tl_get_why[comm->ntls];
    braid_tl_t *tl       = &comm->tls[comm->ntls++];
    tl->struct_size      = sizeof(*tl);
    tl->ops              = ops;
    tl->tcomm            = tcomm;
    tl->link.struct_size = sizeof(tl->link);
    ops->link(tcomm, &tl->link);
    tl->caps = braid_tl_declared_caps(ops);
    open_get_path(comm, tl, get_why);
    BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
              "transport %s open: alpha %.2f us, "
              "%.2f GB/s",
              ops->name, tl->link.alpha_us, tl->link.beta_gbps);
    return BRAID_OK;
}

static braid_status_t open_agreed_transports(braid_comm_t *comm)
{
    const braid_plugin_table_t *pt    = comm->plugins;
    name_set_t                 *local = calloc(1, sizeof(*local));
    int                        *keep  = calloc(MAX_NAMES, sizeof(int));
    braid_status_t              st    = BRAID_OK;
    if (local == NULL || keep == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    for (int p = 0; p < pt->n; p++) {
        const braid_plugin_entry_t *e = &pt->entries[p];
        if (e->state != BRAID_PLUGIN_AVAILABLE)
            continue;
        for (int t = 0; t < e->desc->n_transports && t < BRAID_LOADER_MAX_TLS;
             t++)
            if (e->tl_ok[t])
                name_set_add(local, e->name, "transport",
                             e->desc->transports[t]->name);
    }
    if ((st = intersect(comm, local, keep)) != BRAID_OK)
        goto out;
    comm->tls = calloc(local->n ? local->n : 1, sizeof(braid_tl_t));
    comm->tl_get_why =
        calloc(local->n ? local->n : 1, sizeof(*comm->tl_get_why));
    comm->tl_local = calloc(local->n ? local->n : 1, sizeof(*comm->tl_local));
    if (comm->tls == NULL || comm->tl_get_why == NULL ||
        comm->tl_local == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    /* Same order on every rank: the plugin table is sorted, and only names
     * every rank has are opened. */
    uint32_t i = 0;
    for (int p = 0; p < pt->n; p++) {
        const braid_plugin_entry_t *e = &pt->entries[p];
        if (e->state != BRAID_PLUGIN_AVAILABLE)
            continue;
        for (int t = 0; t < e->desc->n_transports &&
                        t < BRAID_LOADER_MAX_TLS && i < local->n;
             t++) {
            const braid_transport_t *ops = e->desc->transports[t];
            if (!e->tl_ok[t] || !keep[i++])
                continue;
            if (transport_name_taken(comm, ops->name)) {
                BRAID_LOG(BRAID_LOG_WARN, LOG_COMP,
                          "plugin %s brings transport "
                          "'%s' which an earlier plugin already brought; "
                          "ignored",
                          e->name, ops->name);
                continue;
            }
            if ((st = open_one(comm, ops)) != BRAID_OK)
                goto out;
        }
    }
out:
    free(local);
    free(keep);
    return st;
}

static int cand_cmp(const void *a, const void *b)
{
    const braid_candidate_t *x = a, *y = b;
    int                      c = strcmp(x->name, y->name);
    return c ? c : (int)x->algo->coll - (int)y->algo->coll;
}

void braid_cands_sort(braid_selector_t *sel)
{
    qsort(sel->cands, (size_t)sel->ncands, sizeof(braid_candidate_t),
          cand_cmp);
}

static int cand_exists(const braid_selector_t *sel, const char *name,
                       braid_coll_t coll)
{
    for (int i = 0; i < sel->ncands; i++)
        if (sel->cands[i].algo->coll == coll &&
            strcmp(sel->cands[i].name, name) == 0)
            return 1;
    return 0;
}

/* A mask of 0 means host memory only. */
static uint32_t mem_mask(uint32_t declared)
{
    return declared != 0 ? declared : BRAID_MEM_BIT(BRAID_MEM_HOST);
}

/* What calls an algorithm takes: its memory types, and stream-ordered
 * calls if it says so. */
static uint32_t takes(const braid_algo_t *algo)
{
    return mem_mask(algo->mem_types) |
           (algo->flags & BRAID_ALGO_STREAM ? BRAID_NEED_STREAM : 0);
}

/* 1 when added, 0 when an earlier plugin brought the same, -1 when out
 * of memory. */
static int cand_add(braid_selector_t *sel, const braid_candidate_t *c,
                    const char *plugin)
{
    if (cand_exists(sel, c->name, c->algo->coll)) {
        if (plugin != NULL)
            BRAID_LOG(BRAID_LOG_WARN, LOG_COMP,
                      "plugin %s brings %s for %s, "
                      "which an earlier plugin already brought; ignored",
                      plugin, c->name, braid_coll_name(c->algo->coll));
        return 0;
    }
    braid_candidate_t *added = &sel->cands[sel->ncands];
    *added                   = *c;
    if ((added->res = braid_res_create()) == NULL)
        return -1;
    sel->ncands++;
    return 1;
}

braid_status_t braid_cands_add(braid_selector_t *sel, const braid_algo_t *algo,
                               braid_tl_t *tls, int ntls, const char *plugin)
{
    for (int t = 0; t < ntls; t++) {
        braid_tl_t *tl = &tls[t];
        if ((tl->caps & algo->needs_caps) != algo->needs_caps)
            continue;
        if (algo->transport != NULL && strcmp(algo->transport, tl->ops->name))
            continue;
        braid_candidate_t c = {
            .algo = algo, .tl = tl, .tl_name = tl->ops->name};
        /* An algorithm runs on the memory both it and its transport take. */
        c.mem_types =
            takes(algo) & (mem_mask(tl->ops->mem_types) | BRAID_NEED_STREAM);
        /* An algorithm and transport that share a name ("nccl", an ABI-3
         * backend) are written with that name alone. */
        if (strcmp(algo->name, tl->ops->name) == 0)
            snprintf(c.name, sizeof(c.name), "%s", algo->name);
        else
            snprintf(c.name, sizeof(c.name), "%s@%s", algo->name,
                     tl->ops->name);
        if (cand_add(sel, &c, plugin) < 0)
            return braid_error(BRAID_ERR_NO_MEMORY, "out of memory for the "
                                                    "candidates");
    }
    return BRAID_OK;
}

/* A backend (BRAID_ALGO_BACKEND) brings its own transport: the core opens
 * its per-communicator state through the oob, everywhere or nowhere, and
 * its candidate is written with its name alone. */
static braid_status_t add_backend(braid_comm_t *comm, const braid_algo_t *algo,
                                  const char *plugin)
{
    void          *state = NULL;
    char           what[96];
    int            all_ok;
    braid_status_t st = algo->comm_create(algo, braid_core_services(),
                                          &comm->oob, &comm->topo, &state);
    if (st != BRAID_OK)
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP, "backend %s not opened: %s",
                  algo->name, braid_last_error());
    snprintf(what, sizeof(what), "backend %s", algo->name);
    braid_status_t ast = braid_comm_agree(comm, st == BRAID_OK, &all_ok, what);
    braid_candidate_t c = {.algo       = algo,
                           .tl         = NULL,
                           .tl_name    = algo->name,
                           .mem_types  = takes(algo),
                           .comm_state = state};
    snprintf(c.name, sizeof(c.name), "%s", algo->name);
    int added = all_ok ? cand_add(&comm->sel, &c, plugin) : 0;
    if (added <= 0) {
        if (st == BRAID_OK && algo->comm_state_free != NULL)
            algo->comm_state_free(state, NULL);
        if (added < 0)
            return braid_error(BRAID_ERR_NO_MEMORY, "out of memory for the "
                                                    "candidates");
        return ast;
    }
    return BRAID_OK;
}

static braid_status_t build_candidates(braid_comm_t *comm)
{
    const braid_plugin_table_t *pt     = comm->plugins;
    name_set_t                 *local  = calloc(1, sizeof(*local));
    int                        *keep   = calloc(MAX_NAMES, sizeof(int));
    int                         nalgos = 0;
    braid_status_t              st     = BRAID_OK;
    if (local == NULL || keep == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    for (int p = 0; p < pt->n; p++) {
        const braid_plugin_entry_t *e = &pt->entries[p];
        if (e->state != BRAID_PLUGIN_AVAILABLE)
            continue;
        for (int a = 0; a < e->desc->n_algos; a++, nalgos++)
            name_set_add(local, e->name, e->desc->algos[a]->name,
                         braid_coll_name(e->desc->algos[a]->coll));
    }
    if ((st = intersect(comm, local, keep)) != BRAID_OK)
        goto out;
    comm->sel.cands = calloc((size_t)(nalgos * (comm->ntls ? comm->ntls : 1)) +
                                 (size_t)nalgos + 1,
                             sizeof(braid_candidate_t));
    comm->algos     = calloc((size_t)nalgos + 1, sizeof(*comm->algos));
    if (comm->sel.cands == NULL || comm->algos == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    uint32_t i = 0;
    for (int p = 0; p < pt->n; p++) {
        const braid_plugin_entry_t *e = &pt->entries[p];
        if (e->state != BRAID_PLUGIN_AVAILABLE)
            continue;
        for (int a = 0; a < e->desc->n_algos && i < local->n; a++, i++) {
            const braid_algo_t *algo = e->desc->algos[a];
            if (!keep[i])
                continue;
            if (!(algo->flags & BRAID_ALGO_BACKEND)) {
                st = braid_cands_add(&comm->sel, algo, comm->tls, comm->ntls,
                                     e->name);
                comm->algos[comm->nalgos++] =
                    (braid_agreed_algo_t){algo, e->name};
            } else {
                st = add_backend(comm, algo, e->name);
            }
            if (st != BRAID_OK)
                goto out;
        }
    }
out:
    free(local);
    free(keep);
    return st;
}

braid_status_t braid_comm_open_transports(braid_comm_t *comm)
{
    braid_status_t st = open_agreed_transports(comm);
    if (st == BRAID_OK)
        st = build_candidates(comm);
    /* Composites of the candidates of each host and across hosts, where
     * ranks share hosts (hier/). */
    if (st == BRAID_OK)
        st = braid_hier_open(comm);
    if (st == BRAID_OK)
        braid_cands_sort(&comm->sel);
    return st;
}

void braid_comm_close_transports(braid_comm_t *comm)
{
    /* The levels' own transports and candidates, and the composites. */
    braid_hier_close(comm);
    /* Algorithm state first, transports after: comm_state_free may give
     * registered areas back to its transport (mem_free needs the tcomm).
     * That is safe after a failure too, because every call was finished
     * before (finalize refuses pending requests) and finish cancels the
     * requests that still used those buffers. */
    for (int i = 0; i < comm->sel.ncands; i++) {
        braid_candidate_t *c = &comm->sel.cands[i];
        if (c->comm_state != NULL && c->algo->comm_state_free != NULL)
            c->algo->comm_state_free(c->comm_state, c->tl);
        c->comm_state = NULL;
        braid_res_destroy(c->res, c->tl);
        c->res = NULL;
    }
    braid_selector_fini(&comm->sel); /* its rows point into cands */
    free(comm->sel.cands);
    comm->sel.cands  = NULL;
    comm->sel.ncands = 0;
    for (int i = comm->ntls - 1; i >= 0; i--)
        comm->tls[i].ops->comm_destroy(comm->tls[i].tcomm);
    free(comm->tls);
    free(comm->tl_get_why);
    comm->tls        = NULL;
    comm->tl_get_why = NULL;
    comm->ntls       = 0;
    free(comm->tl_local);
    comm->tl_local  = NULL;
    comm->ntl_local = 0;
    free(comm->algos);
    comm->algos  = NULL;
    comm->nalgos = 0;
}
