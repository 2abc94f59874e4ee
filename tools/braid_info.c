/* braid-info: what this installation can do and what it would choose.
 *
 *   braid-info              plugins, versions, availability and reasons
 *   braid-info -n N         also the selection table of an N-rank
 *                           communicator on this host (runs N ranks with
 *                           braidrun and prints rank 0's table)
 *   braidrun -n N braid-info --table     the same, under any launcher */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/calib.h"
#include "comm/comm.h"
#include "loader/loader.h"
#include "util/log.h"

static const char *state_names[] = {"available", "unavailable", "excluded",
                                    "rejected", "shadowed"};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: braid-info [-n N] [--table] [-h]\n"
            "  -n N      show the selection table for N ranks on this host\n"
            "  --table   show the table of the communicator this process is\n"
            "            part of (run under braidrun or another launcher)\n");
}

/* Which reductions may stand in for each other (online tuning, tuning
 * rows; plugin.h): tests/mp/run_numerics.sh reads it. */
static const char *order_note(const braid_algo_t *a)
{
    if (a->coll != BRAID_COLL_ALLREDUCE &&
        a->coll != BRAID_COLL_REDUCE_SCATTER)
        return "";
    if (a->flags & BRAID_ALGO_RANK_ORDER)
        return ", folds in rank order";
    return a->flags & BRAID_ALGO_CORE_REDUCE ? ", rank order on 2 ranks" : "";
}

/* Returns the number of plugins found. */
static int print_plugins(void)
{
    const braid_plugin_table_t *t;
    char                        path[8192];
    printf("braid %d.%d.%d, plugin ABI %u\n", BRAID_VERSION_MAJOR,
           BRAID_VERSION_MINOR, BRAID_VERSION_PATCH, BRAID_PLUGIN_ABI_VERSION);
    braid_loader_search_path(path, sizeof(path));
    printf("plugin search path: %s\n\n", path[0] ? path : "(none)");
    if (braid_loader_acquire(&t) != BRAID_OK) {
        printf("cannot load plugins: %s\n", braid_last_error());
        return 0;
    }
    if (t->n == 0) {
        /* Say where we looked rather than print an empty table. */
        const char *env = getenv("BRAID_PLUGIN_PATH");
        printf("no plugins found: no libbraid-<name>.so in the directories "
               "above (those that exist of: BRAID_PLUGIN_PATH%s%s%s, the "
               "folder braid/ next to libbraid, the install's plugin folder "
               "relative to this program and as configured, and the build "
               "tree's plugins/ for programs inside it). Set "
               "BRAID_PLUGIN_PATH to the folder with the plugins.\n",
               env ? "='" : " (unset)", env ? env : "", env ? "'" : "");
        braid_loader_release();
        return 0;
    }
    printf("%-10s %-8s %-12s %s\n", "plugin", "version", "state", "details");
    for (int i = 0; i < t->n; i++) {
        const braid_plugin_entry_t *e = &t->entries[i];
        const braid_plugin_t       *d = e->desc;
        printf("%-10s %-8s %-12s %s%s\n", e->name,
               d && d->version ? d->version : "-", state_names[e->state],
               e->state == BRAID_PLUGIN_AVAILABLE ? e->path : e->why,
               d && e->adapted ? " (ABI 3, adapted)" : "");
        if (d == NULL)
            continue;
        for (int k = 0; k < d->n_transports && k < BRAID_LOADER_MAX_TLS; k++)
            printf("%-10s   transport %s%s%s%s: %s%s\n", "",
                   d->transports[k]->name,
                   d->transports[k]->caps & BRAID_CAP_SENDRECV ? " send/recv"
                                                               : "",
                   d->transports[k]->caps & BRAID_CAP_PUT_SIGNAL
                       ? " put-with-signal"
                       : "",
                   d->transports[k]->caps & BRAID_CAP_GET ? " get" : "",
                   e->tl_ok[k] ? "available" : "unavailable: ",
                   e->tl_ok[k] ? "" : e->tl_why[k]);
        for (int k = 0; k < d->n_algos; k++) {
            const braid_algo_t *a = d->algos[k];
            printf("%-10s   %s %s for %s%s%s%s%s\n", "",
                   a->flags & BRAID_ALGO_BACKEND ? "backend" : "algorithm",
                   a->name, braid_coll_name(a->coll),
                   a->transport ? " on " : "",
                   a->transport ? a->transport : "",
                   a->mem_types & BRAID_MEM_BIT(BRAID_MEM_CUDA)
                       ? (a->mem_types & BRAID_MEM_BIT(BRAID_MEM_HOST)
                              ? ", host and CUDA memory"
                              : ", CUDA memory")
                       : "",
                   order_note(a));
        }
    }
    int n = t->n;
    braid_loader_release();
    return n;
}

/* A path's out-of-cache figure, where the calibration measured one: what
 * the cost model moves toward for calls whose buffers leave the caches. */
static void print_out(const braid_bw_curve_t *c)
{
    if (c->out_gbps > 0)
        printf(" (%.3g GB/s at %.0f MiB per rank)", c->out_gbps,
               c->out_ws / 2 / (1024.0 * 1024.0));
}

/* What one more message in a stage costs on the path, where counted. */
static void print_msg(double us)
{
    if (us > 0)
        printf(" (+%.3g us a message more)", us);
}

/* The cost model's inputs: where they came from and what they are. */
static void print_links(const braid_comm_t *comm)
{
    char line[1536];
    braid_calib_describe(comm, line, sizeof(line));
    printf("%s\n", line);
    for (int i = 0; i < comm->ntls; i++) {
        const braid_link_t   *l  = &comm->tls[i].link;
        const braid_sel_bw_t  none = {0};
        const braid_sel_bw_t *bw   = braid_select_bw(&comm->sel, &comm->tls[i]);
        if (bw == NULL)
            bw = &none;
        printf("  %-6s", comm->tls[i].ops->name);
        if (comm->tls[i].ops->caps & BRAID_CAP_SENDRECV) {
            printf("  send/recv %.3g us + %.3g GB/s", l->alpha_us,
                   l->beta_gbps);
            print_out(&bw->sr);
            print_msg(l->msg_us);
        }
        if (comm->tls[i].ops->caps & BRAID_CAP_PUT_SIGNAL) {
            printf("  put %.3g us + %.3g GB/s", l->put_alpha_us,
                   l->put_beta_gbps);
            print_out(&bw->put);
            print_msg(l->put_msg_us);
        }
#ifdef BRAID_CAP_GET
        if (BRAID_HAS(&comm->tls[i], braid_tl_t, get_beta_gbps) &&
            comm->tls[i].get_beta_gbps > 0) {
            printf("  get %.3g us + %.3g GB/s", comm->tls[i].get_alpha_us,
                   comm->tls[i].get_beta_gbps);
            print_out(&bw->get);
            if (bw->mget_beta_gbps > 0) {
                printf(", of braid_mem_alloc's memory %.3g us + %.3g GB/s",
                       bw->mget_alpha_us, bw->mget_beta_gbps);
                print_out(&bw->mget);
            }
            if (comm->tl_get_why[i][0] != '\0')
                printf(" [%s]", comm->tl_get_why[i]);
        } else if (comm->tl_get_why[i][0] != '\0')
            printf("  get unavailable: %s", comm->tl_get_why[i]);
#endif
        printf("\n");
    }
    printf("  stage %.3g us, reduction %.3g GB/s per rank\n",
           comm->sel.stage_us,
           comm->sel.reduce_gbps > 0 ? comm->sel.reduce_gbps : 8.0);
}

/* The tuning file's rows that apply to this communicator. */
static void print_tune_rows(const braid_comm_t *comm)
{
    const char *path = getenv("BRAID_TUNE_FILE");
    if (path == NULL || *path == '\0' || comm->tune.n == 0)
        return;
    int mine = 0;
    for (int i = 0; i < comm->tune.n; i++) {
        const braid_tune_row_t *r = &comm->tune.rows[i];
        mine += (r->nranks < 0 || r->nranks == comm->size) &&
                (r->nnodes < 0 || r->nnodes == comm->topo.nnodes) &&
                (r->topo < 0 || r->topo == (int)comm->topo.kind);
    }
    printf("tuning file %s: %d rows, %d for this communicator%s\n", path,
           comm->tune.n, mine, mine ? ":" : "");
    for (int i = 0; i < comm->tune.n; i++) {
        const braid_tune_row_t *r = &comm->tune.rows[i];
        if (!((r->nranks < 0 || r->nranks == comm->size) &&
              (r->nnodes < 0 || r->nnodes == comm->topo.nnodes) &&
              (r->topo < 0 || r->topo == (int)comm->topo.kind)))
            continue;
        char cand[80], hi[32];
        braid_cand_ref_format(cand, sizeof(cand), &r->cand);
        if (r->hi == SIZE_MAX)
            snprintf(hi, sizeof(hi), "inf");
        else
            snprintf(hi, sizeof(hi), "%zu", r->hi);
        printf("  line %-4d %-14s [%zu, %s) B  %s", r->line,
               braid_coll_name(r->coll), r->lo, hi, cand);
        double us = braid_tune_measured(r, cand);
        if (us >= 0)
            printf("  (measured %.2f us at %zu B)", us, r->at);
        printf("\n");
    }
}

/* The memory needs some candidate takes besides host memory's: their
 * tables are printed too. */
static uint32_t device_needs(const braid_comm_t *comm, uint32_t *needs)
{
    static const uint32_t all[] = {BRAID_MEM_BIT(BRAID_MEM_CUDA),
                                   BRAID_MEM_BIT(BRAID_MEM_CUDA) |
                                       BRAID_NEED_STREAM};
    uint32_t              n     = 0;
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++)
        for (int i = 0; i < comm->sel.ncands; i++)
            if ((comm->sel.cands[i].mem_types & all[k]) == all[k]) {
                needs[n++] = all[k];
                break;
            }
    return n;
}

/* The communicator's selection table, row for row as calls read it (and
 * as BRAID_DEBUG=info prints it), then every candidate's estimate at a few
 * sizes. */
static void print_table(braid_comm_t *comm)
{
    static const size_t sizes[] = {8,       64,       512,     4096,
                                   16384,   65536,    262144,  1 << 20,
                                   4 << 20, 16 << 20, 64 << 20};
    const uint32_t      host = braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST);
    uint32_t            needs[3] = {host};
    uint32_t            nneeds   = 1 + device_needs(comm, needs + 1);
    char                topo[512];
    braid_topo_describe(comm, topo, sizeof(topo));
    printf("\nselection table: %d ranks on %d nodes (ppn %d)\ntopology: %s\n"
           "sizes are bytes per rank, half-open [from, to) as BRAID_ALGO "
           "writes them\n",
           comm->size, comm->topo.nnodes, comm->topo.ppn, topo);
    print_links(comm);
    print_tune_rows(comm);
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        printf("\n%s\n", braid_coll_name((braid_coll_t)c));
        for (uint32_t k = 0; k < nneeds; k++) {
            int n;
            braid_select_rows(&n, &comm->sel, (braid_coll_t)c, needs[k]);
            if (k > 0)
                printf("  on %s:\n", needs[k] & BRAID_NEED_STREAM
                                         ? "device memory, stream-ordered"
                                         : "device memory");
            for (int i = 0; i < n; i++) {
                char line[512];
                braid_select_row_format(line, sizeof(line), &comm->sel,
                                        (braid_coll_t)c, needs[k], i);
                printf("  %s\n", line);
            }
        }
        /* Estimates (us; '-': cannot run it), one column per candidate. */
        printf("  %-12s", "estimate us");
        for (int i = 0; i < comm->sel.ncands; i++)
            if (comm->sel.cands[i].algo->coll == (braid_coll_t)c)
                printf(" %12s", comm->sel.cands[i].name);
        printf("\n");
        int nsizes = c == BRAID_COLL_BARRIER
                         ? 1
                         : (int)(sizeof(sizes) / sizeof(sizes[0]));
        for (int s = 0; s < nsizes; s++) {
            size_t bytes = c == BRAID_COLL_BARRIER ? 0 : sizes[s];
            printf("  %10zu B", bytes);
            for (int i = 0; i < comm->sel.ncands; i++) {
                const braid_candidate_t *k = &comm->sel.cands[i];
                if (k->algo->coll != (braid_coll_t)c)
                    continue;
                double t = braid_candidate_estimate(
                    &comm->sel, k, (braid_coll_t)c, bytes, host);
                if (t >= 0)
                    printf(" %12.1f", t);
                else
                    printf(" %12s", "-");
            }
            printf("\n");
        }
    }
}

static int run_table(void)
{
    braid_comm_t *comm;
    if (braid_init(&comm) != BRAID_OK) {
        fprintf(stderr, "braid-info: braid_init failed: %s\n",
                braid_last_error());
        return 1;
    }
    if (comm->rank == 0) {
        print_plugins();
        print_table(comm);
    }
    fflush(stdout);
    return braid_finalize(comm) == BRAID_OK ? 0 : 1;
}

/* braidrun sits next to braid-info, in the build tree and when installed. */
static int spawn_ranks(const char *self, const char *n)
{
    char dir[4096], braidrun[4200];
    snprintf(dir, sizeof(dir), "%s", self);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    snprintf(braidrun, sizeof(braidrun), "%s/braidrun", dir);
    if (access(braidrun, X_OK) != 0)
        snprintf(braidrun, sizeof(braidrun), "braidrun"); /* from PATH */
    char *const argv[] = {braidrun,     "-n",      (char *)n, "--",
                          (char *)self, "--table", NULL};
    execvp(braidrun, argv);
    fprintf(stderr, "braid-info: cannot run %s: %m\n", braidrun);
    return 1;
}

int main(int argc, char **argv)
{
    const char *n     = NULL;
    int         table = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            n = argv[++i];
            char *end;
            long  v = strtol(n, &end, 10);
            if (*end != '\0' || v < 1 || v > 1024) {
                fprintf(stderr,
                        "braid-info: -n '%s': expected a rank count "
                        "from 1 to 1024\n",
                        n);
                return 2;
            }
        } else if (!strcmp(argv[i], "--table")) {
            table = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "braid-info: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (table)
        return run_table();
    if (n != NULL) {
        char    self[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (len <= 0)
            return 1;
        self[len] = '\0';
        return spawn_ranks(self, n);
    }
    return print_plugins() > 0 ? 0 : 1;
}
