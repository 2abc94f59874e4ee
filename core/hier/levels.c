/* The two levels of a hierarchical communicator, built when it is created.
 *
 *   host level  the k ranks of this host, on a channel of their own, over
 *               the transports that refused the whole communicator because
 *               they serve one host only (shm);
 *   rail level  the ranks at this rank's position on every host (one per
 *               host), on a channel of their own, over the communicator's
 *               transports opened anew: their own endpoints, so a step's
 *               tags never meet a flat call's.
 *
 * Every host and every rail is alike (hosts of k ranks each), and every
 * rank agrees through the communicator's channel on what opened where, so
 * that the composite candidates, and the steps their estimates pick, are
 * the same on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/res.h"
#include "comm/comm.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "hier"

static const braid_algo_spec_t no_override;
static const braid_tune_t      no_tune;

/* Fills k, nhosts, host, local and rank_at; 0 when the communicator is not
 * several hosts of k >= 2 ranks each (why says so). */
static int layout(braid_hier_t *h, const braid_comm_t *comm, char *why,
                  size_t len)
{
    const braid_topo_t *t = &comm->topo;
    if (t->nnodes < 2 || t->ppn < 2) {
        snprintf(why, len, "%s",
                 t->nnodes < 2 ? "one host" : "one rank per host");
        return 0;
    }
    if (t->nnodes * t->ppn != comm->size) {
        snprintf(why, len,
                 "hosts have different numbers of ranks (%d ranks "
                 "on %d hosts, up to %d on one)",
                 comm->size, t->nnodes, t->ppn);
        return 0;
    }
    h->k       = t->ppn;
    h->nhosts  = t->nnodes;
    h->nranks  = comm->size;
    h->rank_at = malloc((size_t)comm->size * sizeof(int));
    int *fill  = calloc((size_t)h->nhosts, sizeof(int));
    if (h->rank_at == NULL || fill == NULL) {
        free(fill);
        snprintf(why, len, "out of memory");
        return 0;
    }
    /* A rank's position on its host follows the ranks' order. */
    for (int r = 0; r < comm->size; r++) {
        int host = t->node_of_rank[r], local = fill[host]++;
        h->rank_at[host * h->k + local] = r;
        if (r == comm->rank) {
            h->host  = host;
            h->local = local;
        }
    }
    free(fill);
    return 1;
}

/* The level's topology: its members are ranks[0..size) of the
 * communicator, in level order. */
static braid_status_t level_topo(braid_level_t *l, const braid_comm_t *comm,
                                 const int *ranks, int one_host)
{
    l->node_of_rank = calloc((size_t)l->size, sizeof(int));
    l->cpu_of_rank  = calloc((size_t)l->size, sizeof(int));
    if (l->node_of_rank == NULL || l->cpu_of_rank == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "hier: out of memory");
    for (int i = 0; i < l->size; i++) {
        l->node_of_rank[i] = one_host ? 0 : i;
        l->cpu_of_rank[i]  = comm->cpu_of_rank[ranks[i]];
    }
    l->topo = (braid_topo_t){
        .struct_size  = sizeof(braid_topo_t),
        .size         = l->size,
        .kind         = one_host ? BRAID_TOPO_SINGLE_HOST : comm->topo.kind,
        .nnodes       = one_host ? 1 : l->size,
        .ppn          = one_host ? l->size : 1,
        .node_of_rank = l->node_of_rank,
        .cpu_of_rank  = l->cpu_of_rank,
    };
    return BRAID_OK;
}

/* Opens each of ops on the level, kept only where it opened on every rank
 * of the communicator (every level alike). */
static braid_status_t level_open_tls(braid_comm_t *comm, braid_level_t *l,
                                     const braid_transport_t *const *ops,
                                     int                             nops)
{
    l->tls = calloc(nops > 0 ? (size_t)nops : 1, sizeof(braid_tl_t));
    if (l->tls == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "hier: out of memory");
    for (int i = 0; i < nops; i++) {
        void          *tcomm = NULL;
        char           what[96];
        int            all_ok;
        braid_status_t st = ops[i]->comm_create(ops[i], braid_core_services(),
                                                &l->oob, &l->topo, &tcomm);
        if (st != BRAID_OK)
            BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                      "transport %s not opened on "
                      "the %s level: %s",
                      ops[i]->name, l->name, braid_last_error());
        snprintf(what, sizeof(what), "transport %s on the %s level",
                 ops[i]->name, l->name);
        braid_status_t ast =
            braid_comm_agree(comm, st == BRAID_OK, &all_ok, what);
        if (!all_ok) {
            if (st == BRAID_OK)
                ops[i]->comm_destroy(tcomm);
            if (ast != BRAID_OK)
                return ast;
            continue;
        }
        braid_tl_t *tl       = &l->tls[l->ntls++];
        tl->struct_size      = sizeof(*tl);
        tl->ops              = ops[i];
        tl->tcomm            = tcomm;
        tl->link.struct_size = sizeof(tl->link);
        ops[i]->link(tcomm, &tl->link);
        /* No single-copy reads inside a level: whether they opened would
         * have to be agreed per level as the communicator does (not done),
         * so the levels' steps keep to the copy paths. */
        tl->caps = braid_tl_declared_caps(ops[i]) & ~BRAID_CAP_GET;
    }
    return BRAID_OK;
}

/* Every pair of the level exchanges an empty message on each transport
 * before any step runs.  A step may first talk to a peer long after the
 * level opened (a rail broadcast from a host that was never root), and
 * Debian's UCX 1.13 aborts the process when it connects for the first time
 * to a peer that has died meanwhile (a fatal error inside its wireup, which
 * no error mode reaches); a failure of an established connection is an
 * ordinary error.  The communicator's own transports get the same: with
 * the composites chosen, nothing else may ever complete their wireup, and
 * UCX asserts when it destroys an endpoint still half connected to a dead
 * peer.  Tag: seq 0, which a level's steps never use (they start at 1);
 * the communicator has made no call yet, and every message is matched
 * before this returns. */
static braid_status_t connect_all(braid_tl_t *tls, int ntls, int rank, int n,
                                  const char *name, double timeout_s)
{
    braid_status_t st  = BRAID_OK;
    braid_treq_t  *req = calloc(2 * (size_t)n, sizeof(*req));
    if (req == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "hier: out of memory");
    for (int t = 0; t < ntls && st == BRAID_OK; t++) {
        braid_tl_t *tl       = &tls[t];
        double      deadline = braid_now_s() + timeout_s;
        if (!(tl->ops->caps & BRAID_CAP_SENDRECV))
            continue;
        memset(req, 0, 2 * (size_t)n * sizeof(*req));
        for (int p = 0; p < n && st == BRAID_OK; p++) {
            if (p == rank)
                continue;
            st = tl->ops->irecv(tl->tcomm, p, BRAID_TAG(0, 0), NULL, 0,
                                &req[2 * p]);
            if (st == BRAID_OK)
                st = tl->ops->isend(tl->tcomm, p, BRAID_TAG(0, 0), NULL, 0,
                                    &req[2 * p + 1]);
        }
        for (int i = 0; i < 2 * n && st == BRAID_OK;) {
            st = tl->ops->test(tl->tcomm, &req[i]);
            if (st == BRAID_OK) {
                i++;
            } else if (st == BRAID_INPROGRESS) {
                st = BRAID_OK;
                if (braid_now_s() > deadline)
                    st = braid_error(BRAID_ERR_TIMEOUT,
                                     "hier: the ranks "
                                     "of the %s did not all connect over "
                                     "%s within %.0f s",
                                     name, tl->ops->name, timeout_s);
            }
        }
        for (int i = 0; i < 2 * n; i++)
            if (req[i].active)
                tl->ops->cancel(tl->tcomm, &req[i]);
    }
    free(req);
    return st;
}

static braid_status_t level_cands(braid_comm_t *comm, braid_level_t *l,
                                  int link_share)
{
    braid_selector_t *sel = &l->sel;
    braid_selector_init(sel);
    sel->cands = calloc((size_t)comm->nalgos * (size_t)l->ntls + 1,
                        sizeof(braid_candidate_t));
    if (sel->cands == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "hier: out of memory");
    for (int a = 0; a < comm->nalgos; a++) {
        braid_status_t st =
            braid_cands_add(sel, comm->algos[a].algo, l->tls, l->ntls, NULL);
        if (st != BRAID_OK)
            return st;
    }
    braid_cands_sort(sel);
    sel->override           = &no_override;
    sel->tune               = &no_tune;
    sel->nranks             = l->size;
    sel->nnodes             = l->topo.nnodes;
    sel->ppn                = l->topo.ppn;
    sel->topo               = l->topo.kind;
    sel->rank               = -1; /* the composite explains its steps */
    sel->stage_us           = 0.0;
    sel->link_share         = link_share;
    l->sel_alone            = *sel; /* the same candidates */
    l->sel_alone.link_share = 1;
    return BRAID_OK;
}

/* One level: its channel (split of the communicator's by color, ordered
 * by key), topology, transports and candidates.  ranks: its members. */
static braid_status_t level_open(braid_comm_t *comm, braid_level_t *l,
                                 const char *name, int color, int key,
                                 const int *ranks, int one_host,
                                 const braid_transport_t *const *ops, int nops,
                                 int link_share)
{
    braid_status_t st;
    l->name = name;
    if ((st = braid_bootstrap_split(comm->bs, color, key, &l->bs)) != BRAID_OK)
        return st;
    l->rank = braid_bootstrap_rank(l->bs);
    l->size = braid_bootstrap_size(l->bs);
    braid_comm_oob_init(&l->oob, l->bs);
    if ((st = level_topo(l, comm, ranks, one_host)) != BRAID_OK ||
        (st = level_open_tls(comm, l, ops, nops)) != BRAID_OK ||
        (st = connect_all(l->tls, l->ntls, l->rank, l->size, l->name,
                          comm->timeout_s)) != BRAID_OK)
        return st;
    l->seq = 1;
    return level_cands(comm, l, link_share);
}

static void level_close(braid_level_t *l)
{
    /* Algorithm state first: it may hold areas of the transports. */
    for (int i = 0; l->sel.cands != NULL && i < l->sel.ncands; i++) {
        braid_candidate_t *c = &l->sel.cands[i];
        if (c->comm_state != NULL && c->algo->comm_state_free != NULL)
            c->algo->comm_state_free(c->comm_state, c->tl);
        braid_res_destroy(c->res, c->tl);
        c->res = NULL;
    }
    braid_selector_fini(&l->sel); /* their rows point into cands */
    braid_selector_fini(&l->sel_alone);
    free(l->sel.cands);
    for (int i = l->ntls - 1; i >= 0; i--)
        l->tls[i].ops->comm_destroy(l->tls[i].tcomm);
    free(l->tls);
    free(l->node_of_rank);
    free(l->cpu_of_rank);
    if (l->bs != NULL)
        braid_bootstrap_destroy(l->bs);
    memset(l, 0, sizeof(*l));
}

static void hier_free(braid_hier_t *h)
{
    if (h == NULL)
        return;
    level_close(&h->host_lvl);
    level_close(&h->rail);
    free(h->rank_at);
    free(h->scratch);
    free(h);
}

/* The composites join the communicator's candidates. */
static braid_status_t add_composites(braid_comm_t *comm, braid_hier_t *h)
{
    braid_candidate_t *grown = realloc(
        comm->sel.cands, ((size_t)comm->sel.ncands + BRAID_COLL_COUNT) *
                             sizeof(braid_candidate_t));
    if (grown == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "hier: out of memory");
    comm->sel.cands = grown;
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        const braid_algo_t *algo = braid_hier_algo((braid_coll_t)c);
        if (algo == NULL)
            continue;
        braid_candidate_t *cand = &comm->sel.cands[comm->sel.ncands++];
        memset(cand, 0, sizeof(*cand));
        snprintf(cand->name, sizeof(cand->name), "%s", BRAID_HIER_NAME);
        cand->algo       = algo;
        cand->tl_name    = BRAID_HIER_NAME;
        cand->mem_types  = BRAID_MEM_BIT(BRAID_MEM_HOST);
        cand->comm_state = h;
    }
    comm->sel.describe = braid_hier_describe;
    return BRAID_OK;
}

static void tl_names(char *buf, size_t len, const braid_level_t *l)
{
    buf[0] = '\0';
    for (int i = 0; i < l->ntls; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "," : "",
                 l->tls[i].ops->name);
}

braid_status_t braid_hier_open(braid_comm_t *comm)
{
    char          why[160];
    braid_hier_t *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "hier: out of memory");
    /* The same answer on every rank: the topology and the transports that
     * opened are agreed. */
    if (!layout(h, comm, why, sizeof(why)) || comm->ntl_local == 0) {
        if (comm->ntl_local == 0 && h->rank_at != NULL)
            snprintf(why, sizeof(why), "no transport serves one host only");
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "no hierarchical candidates: %s",
                  why);
        hier_free(h);
        return BRAID_OK;
    }
    const braid_transport_t **net =
        malloc((size_t)(comm->ntls ? comm->ntls : 1) * sizeof(*net));
    int           *host_ranks = h->rank_at + (size_t)h->host * (size_t)h->k;
    int           *rail_ranks = malloc((size_t)h->nhosts * sizeof(int));
    braid_status_t st         = BRAID_OK;
    if (net == NULL || rail_ranks == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "hier: out of memory");
        goto out;
    }
    for (int i = 0; i < comm->ntls; i++)
        net[i] = comm->tls[i].ops;
    for (int host = 0; host < h->nhosts; host++)
        rail_ranks[host] = h->rank_at[host * h->k + h->local];
    /* Rail ranks are numbered by host, host ranks by position. */
    st = level_open(comm, &h->host_lvl, "host", h->host, h->local, host_ranks,
                    1, comm->tl_local, comm->ntl_local, 1);
    if (st == BRAID_OK)
        st = level_open(comm, &h->rail, "rail", h->local, h->host, rail_ranks,
                        0, net, comm->ntls, h->k);
    if (st != BRAID_OK)
        goto out;
    if (h->host_lvl.ntls == 0 || h->rail.ntls == 0) {
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
                  "no hierarchical candidates: "
                  "no transport opened on the %s level",
                  h->host_lvl.ntls == 0 ? "host" : "rail");
        goto out;
    }
    if ((st = connect_all(comm->tls, comm->ntls, comm->rank, comm->size,
                          "communicator", comm->timeout_s)) != BRAID_OK ||
        (st = add_composites(comm, h)) != BRAID_OK)
        goto out;
    comm->hier = h;
    h          = NULL;
    if (comm->rank == 0 && braid_log_level() >= BRAID_LOG_INFO) {
        char host_tls[96], rail_tls[96];
        tl_names(host_tls, sizeof(host_tls), &comm->hier->host_lvl);
        tl_names(rail_tls, sizeof(rail_tls), &comm->hier->rail);
        braid_log(BRAID_LOG_INFO, LOG_COMP,
                  "%d hosts of %d ranks: "
                  "hierarchical candidates with a host level over %s and "
                  "%d rails over %s",
                  comm->hier->nhosts, comm->hier->k, host_tls, comm->hier->k,
                  rail_tls);
    }
out:
    free(net);
    free(rail_ranks);
    hier_free(h);
    return st;
}

void braid_hier_close(braid_comm_t *comm)
{
    hier_free(comm->hier);
    comm->hier = NULL;
}

char *braid_hier_scratch(braid_hier_t *h, size_t bytes)
{
    if (bytes <= h->scratch_cap)
        return h->scratch;
    /* 64-byte aligned: the reduction kernels vectorise. */
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0)
        return NULL;
    free(h->scratch);
    h->scratch     = p;
    h->scratch_cap = bytes;
    return h->scratch;
}
