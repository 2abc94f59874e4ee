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

#include "comm/comm.h"
#include "loader/loader.h"
#include "util/log.h"

static const char *state_names[] = {"available", "unavailable", "excluded",
                                    "rejected", "shadowed"};

static void usage(FILE *f)
{
    fprintf(f, "usage: braid-info [-n N] [--table] [-h]\n"
               "  -n N      show the selection table for N ranks on this host\n"
               "  --table   show the table of the communicator this process is\n"
               "            part of (run under braidrun or another launcher)\n");
}

/* Returns the number of plugins found. */
static int print_plugins(void)
{
    const braid_plugin_table_t *t;
    char path[8192];
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
            printf("%-10s   transport %s%s%s: %s%s\n", "",
                   d->transports[k]->name,
                   d->transports[k]->caps & BRAID_CAP_SENDRECV ? " send/recv"
                                                               : "",
                   d->transports[k]->caps & BRAID_CAP_PUT_SIGNAL
                       ? " put-with-signal" : "",
                   e->tl_ok[k] ? "available" : "unavailable: ",
                   e->tl_ok[k] ? "" : e->tl_why[k]);
        for (int k = 0; k < d->n_algos; k++) {
            const braid_algo_t *a = d->algos[k];
            printf("%-10s   %s %s for %s%s%s%s\n", "",
                   a->flags & BRAID_ALGO_BACKEND ? "backend" : "algorithm",
                   a->name, braid_coll_name(a->coll),
                   a->transport ? " on " : "",
                   a->transport ? a->transport : "",
                   a->mem_types & BRAID_MEM_BIT(BRAID_MEM_CUDA)
                       ? (a->mem_types & BRAID_MEM_BIT(BRAID_MEM_HOST)
                              ? ", host and CUDA memory" : ", CUDA memory")
                       : "");
        }
    }
    int n = t->n;
    braid_loader_release();
    return n;
}

static void print_table(braid_comm_t *comm)
{
    static const size_t sizes[] = {8, 64, 512, 4096, 16384, 65536, 262144,
                                   1 << 20, 4 << 20, 16 << 20, 64 << 20};
    char topo[512];
    braid_topo_describe(comm, topo, sizeof(topo));
    printf("\nselection table: %d ranks on %d nodes (ppn %d)\ntopology: %s\n",
           comm->size, comm->topo.nnodes, comm->topo.ppn, topo);
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        printf("\n%s\n", braid_coll_name((braid_coll_t)c));
        int nsizes = c == BRAID_COLL_BARRIER ? 1 : (int)(sizeof(sizes) /
                                                        sizeof(sizes[0]));
        for (int s = 0; s < nsizes; s++) {
            size_t bytes = c == BRAID_COLL_BARRIER ? 0 : sizes[s];
            char   cand[80], why[320];
            if (braid_comm_choice(comm, (braid_coll_t)c, bytes, cand,
                                  sizeof(cand), why, sizeof(why)) != BRAID_OK) {
                printf("  %10zu B  error: %s\n", bytes, braid_last_error());
                continue;
            }
            printf("  %10zu B  %-14s (%s)", bytes, cand, why);
            for (int i = 0; i < comm->sel.ncands; i++) {
                const braid_candidate_t *k = &comm->sel.cands[i];
                if (k->algo->coll != (braid_coll_t)c)
                    continue;
                double t = braid_candidate_estimate(
                    &comm->sel, k, (braid_coll_t)c, bytes,
                    braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST));
                if (t >= 0)
                    printf("  %s %.1fus", k->name, t);
                else
                    printf("  %s -", k->name);
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
    char *const argv[] = {braidrun, "-n", (char *)n, "--", (char *)self,
                          "--table", NULL};
    execvp(braidrun, argv);
    fprintf(stderr, "braid-info: cannot run %s: %m\n", braidrun);
    return 1;
}

int main(int argc, char **argv)
{
    const char *n = NULL;
    int table = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            n = argv[++i];
            char *end;
            long v = strtol(n, &end, 10);
            if (*end != '\0' || v < 1 || v > 1024) {
                fprintf(stderr, "braid-info: -n '%s': expected a rank count "
                        "from 1 to 1024\n", n);
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
        char self[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (len <= 0)
            return 1;
        self[len] = '\0';
        return spawn_ranks(self, n);
    }
    return print_plugins() > 0 ? 0 : 1;
}
