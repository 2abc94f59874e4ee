/* Topology: which ranks share a host, and how the hosts are cabled.
 *
 * A host is a hostname (or BRAID_HOSTNAME) in one network namespace: ranks
 * in different network namespaces reach each other only over the network,
 * whatever their label, so they are different hosts (braidrun --netns
 * emulates hosts that way, and containers on one machine are alike), and
 * shared memory, which is only opened within a host, never bypasses the
 * network between them.
 *
 * How the hosts are cabled is measured: the IP TTL of probes between the
 * hosts counts the routers in between (bootstrap/probe.c), and the counts
 * tell one switch from a cabled ring (topo_classify.c).  BRAID_TOPO=switch
 * or ring overrides it.  Every rank classifies the same allgathered matrix,
 * so all agree.
 *
 * Each rank also says which CPU it is pinned to, if just one: ranks pinned
 * to one CPU take turns on it, which decides how a rank should wait; and
 * which machine it runs on (its kernel's boot id): emulated hosts share the
 * machine's cores. */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/probe.h"
#include "comm/comm.h"
#include "util/api.h"
#include "util/log.h"

#define LOG_COMP "topo"
#define HOST_LEN 64
#define BOOT_LEN 40

/* What each rank contributes. */
typedef struct {
    char     host[HOST_LEN];
    char     boot[BOOT_LEN]; /* the machine: its kernel's boot id */
    uint64_t netns;          /* inode of its network namespace */
    int32_t  cpu;
    int32_t  pad;
} topo_rec_t;

/* The one CPU this thread may run on, or -1. */
static int32_t pinned_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            return c;
    return -1;
}

braid_status_t braid_topo_kind_parse(braid_topo_kind_t *kind, const char *s,
                                     int nnodes)
{
    *kind = nnodes == 1 ? BRAID_TOPO_SINGLE_HOST : BRAID_TOPO_SWITCH;
    if (s == NULL || *s == '\0' || strcmp(s, "auto") == 0)
        return BRAID_OK;
    if (strcmp(s, "switch") == 0)
        *kind = BRAID_TOPO_SWITCH;
    else if (strcmp(s, "ring") == 0)
        *kind = BRAID_TOPO_RING;
    else {
        /* Point at the first character where s leaves every keyword. */
        static const char *words[] = {"auto", "switch", "ring"};
        size_t             best    = 0;
        for (int w = 0; w < 3; w++) {
            size_t i = 0;
            while (s[i] && s[i] == words[w][i])
                i++;
            if (i > best)
                best = i;
        }
        return braid_error(BRAID_ERR_PARSE,
                           "BRAID_TOPO: %s at position %zu: "
                           "'%s' (expected auto, switch or ring)",
                           s[best] ? "unexpected character"
                                   : "value ends early",
                           best, braid_quote(s, strlen(s), best).s);
    }
    if (nnodes == 1)
        *kind = BRAID_TOPO_SINGLE_HOST; /* one host has no cabling to model */
    return BRAID_OK;
}

static void fill_self(topo_rec_t *self)
{
    struct stat sb;
    memset(self, 0, sizeof(*self));
    const char *env = getenv("BRAID_HOSTNAME");
    if (env != NULL && *env != '\0')
        strncpy(self->host, env, HOST_LEN - 1);
    else if (gethostname(self->host, HOST_LEN - 1) != 0)
        strcpy(self->host, "localhost");
    if (stat("/proc/self/ns/net", &sb) == 0)
        self->netns = (uint64_t)sb.st_ino;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL || fgets(self->boot, BOOT_LEN, f) == NULL)
        gethostname(self->boot, BOOT_LEN - 1); /* a machine per name, then */
    if (f != NULL)
        fclose(f);
    self->boot[strcspn(self->boot, "\n")] = '\0';
    self->cpu                             = pinned_cpu();
}

static int same_host(const topo_rec_t *a, const topo_rec_t *b)
{
    return strncmp(a->host, b->host, HOST_LEN) == 0 && a->netns == b->netns;
}

/* Most ranks on one machine (emulated hosts included). */
static int ranks_per_machine(const topo_rec_t *all, int size)
{
    int most = 0;
    for (int r = 0; r < size; r++) {
        int k = 0;
        for (int q = 0; q < size; q++)
            k += strncmp(all[q].boot, all[r].boot, BOOT_LEN) == 0;
        most = k > most ? k : most;
    }
    return most;
}

/* The hop matrix, compactly, for the log: "0 0 1 0 | 0 0 0 1 | ...". */
static void format_hops(char *buf, size_t n, const int *hops, int nnodes)
{
    size_t o = 0;
    buf[0]   = '\0';
    for (int a = 0; a < nnodes && o + 16 < n; a++)
        for (int b = 0; b < nnodes && o + 16 < n; b++)
            o += (size_t)snprintf(buf + o, n - o, "%s%d",
                                  b == 0 ? (a ? " | " : "") : " ",
                                  hops[a * nnodes + b]);
    if (o + 16 >= n)
        snprintf(buf + o, n - o, " ...");
}

/* Measures the cabling of nnodes > 1 hosts, into comm->topo.kind and
 * comm->topo_why. */
static braid_status_t detect_kind(braid_comm_t *comm)
{
    int  n = comm->topo.nnodes, probed = 0, fits = 0;
    int *hops  = malloc((size_t)n * (size_t)n * sizeof(int));
    int *order = malloc((size_t)n * sizeof(int));
    char why[160], matrix[160];
    if (hops == NULL || order == NULL) {
        free(hops);
        free(order);
        return braid_error(BRAID_ERR_NO_MEMORY, "topology: out of memory");
    }
    braid_status_t st =
        braid_bootstrap_hops(comm->bs, comm->node_of_rank, n, hops, &probed);
    if (st == BRAID_OK && !probed) {
        comm->topo.kind = BRAID_TOPO_SWITCH;
        snprintf(comm->topo_why, sizeof(comm->topo_why),
                 "assumed: %d hosts "
                 "are more than the %d probed (set BRAID_TOPO)",
                 n, BRAID_PROBE_MAX_NODES);
    } else if (st == BRAID_OK) {
        comm->topo.kind =
            braid_topo_classify(hops, n, order, &fits, why, sizeof(why));
        format_hops(matrix, sizeof(matrix), hops, n);
        snprintf(comm->topo_why, sizeof(comm->topo_why),
                 "%s from IP TTL "
                 "hop counts between hosts [%s]: %s%s",
                 fits ? "detected" : "assumed switch", matrix, why,
                 fits ? "" : " (set BRAID_TOPO)");
        int in_order = 1;
        for (int i = 0; i < n; i++)
            in_order &= order[i] == i || order[i] == (n - i) % n;
        if (comm->topo.kind == BRAID_TOPO_RING && !in_order) {
            size_t o = strlen(comm->topo_why);
            o += (size_t)snprintf(comm->topo_why + o,
                                  sizeof(comm->topo_why) - o,
                                  "; ranks are not in ring order, the ring "
                                  "goes through hosts");
            for (int i = 0; i < n && o + 8 < sizeof(comm->topo_why); i++)
                o += (size_t)snprintf(comm->topo_why + o,
                                      sizeof(comm->topo_why) - o, " %d",
                                      order[i]);
        }
        if (!fits && comm->rank == 0)
            BRAID_LOG(BRAID_LOG_WARN, LOG_COMP, "%s", comm->topo_why);
    }
    free(hops);
    free(order);
    return st;
}

/* The one measured, or the user's BRAID_TOPO.  Every rank probes, whatever
 * its BRAID_TOPO says: the probe is collective, and ranks given different
 * values must still reach the check that tells them so (setup.c). */
static braid_status_t decide_kind(braid_comm_t *comm)
{
    const char       *env = getenv("BRAID_TOPO");
    int               n   = comm->topo.nnodes;
    braid_topo_kind_t set;
    braid_status_t    st;
    if (n == 1) {
        snprintf(comm->topo_why, sizeof(comm->topo_why),
                 "every rank on one "
                 "host (one host name and network namespace)");
        return braid_topo_kind_parse(&comm->topo.kind, env, n);
    }
    if ((st = detect_kind(comm)) != BRAID_OK ||
        (st = braid_topo_kind_parse(&set, env, n)) != BRAID_OK)
        return st;
    if (env != NULL && *env != '\0' && strcmp(env, "auto") != 0) {
        char measured[sizeof(comm->topo_why)];
        snprintf(measured, sizeof(measured), "%s", comm->topo_why);
        snprintf(comm->topo_why, sizeof(comm->topo_why),
                 "set by BRAID_TOPO="
                 "%s; %.*s",
                 env, (int)sizeof(measured) - 64, measured);
        comm->topo.kind = set;
    }
    return BRAID_OK;
}

braid_status_t braid_topo_detect(braid_comm_t *comm)
{
    topo_rec_t     self;
    topo_rec_t    *all   = NULL;
    int           *count = NULL;
    braid_status_t st;

    fill_self(&self);

    all                = calloc((size_t)comm->size, sizeof(*all));
    count              = calloc((size_t)comm->size, sizeof(int));
    comm->node_of_rank = calloc((size_t)comm->size, sizeof(int));
    comm->cpu_of_rank  = calloc((size_t)comm->size, sizeof(int));
    comm->cpu_mate     = calloc((size_t)comm->size, 1);
    if (all == NULL || count == NULL || comm->node_of_rank == NULL ||
        comm->cpu_of_rank == NULL || comm->cpu_mate == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "topology: out of memory");
        goto out;
    }
    st = braid_bootstrap_allgather(comm->bs, &self, all, sizeof(self));
    if (st != BRAID_OK)
        goto out;

    /* Hosts are numbered in order of their lowest rank. */
    int nnodes = 0;
    for (int r = 0; r < comm->size; r++) {
        int node = -1;
        for (int q = 0; q < r && node < 0; q++)
            if (same_host(&all[q], &all[r]))
                node = comm->node_of_rank[q];
        comm->node_of_rank[r] = node >= 0 ? node : nnodes++;
        comm->cpu_of_rank[r]  = all[r].cpu;
        count[comm->node_of_rank[r]]++;
    }
    int ppn = 0;
    for (int n = 0; n < nnodes; n++)
        ppn = count[n] > ppn ? count[n] : ppn;

    comm->topo.struct_size  = sizeof(comm->topo);
    comm->topo.size         = comm->size;
    comm->topo.nnodes       = nnodes;
    comm->topo.ppn          = ppn;
    comm->topo.node_of_rank = comm->node_of_rank;
    comm->topo.cpu_of_rank  = comm->cpu_of_rank;
    /* Who takes turns with this rank on its CPU: once, for the waiting
     * policy (wait.h) and for algorithms (topo->mates). */
    comm->topo.nmates =
        braid_cpu_mates(&comm->topo, comm->rank, comm->cpu_mate);
    comm->topo.mates  = comm->cpu_mate;
    comm->machine_ppn = ranks_per_machine(all, comm->size);
    if ((st = decide_kind(comm)) != BRAID_OK)
        goto out;
    if (comm->rank == 0 && braid_log_level() >= BRAID_LOG_INFO) {
        char line[sizeof(comm->topo_why) + 96];
        braid_topo_describe(comm, line, sizeof(line));
        braid_log(BRAID_LOG_INFO, LOG_COMP, "%s", line);
    }
out:
    free(all);
    free(count);
    return st;
}

void braid_topo_describe(const braid_comm_t *comm, char *buf, size_t n)
{
    const braid_topo_t *t    = &comm->topo;
    const char         *kind = t->kind == BRAID_TOPO_RING     ? "ring"
                               : t->kind == BRAID_TOPO_SWITCH ? "switch"
                                                              : "single host";
    if (t->kind == BRAID_TOPO_SINGLE_HOST)
        snprintf(buf, n, "single host, %d rank%s (%s)", comm->size,
                 comm->size == 1 ? "" : "s", comm->topo_why);
    else
        snprintf(buf, n, "%s of %d hosts, up to %d rank%s per host (%s)", kind,
                 t->nnodes, t->ppn, t->ppn == 1 ? "" : "s", comm->topo_why);
}

BRAID_API braid_status_t braid_comm_topology(const braid_comm_t *comm,
                                             char *buf, size_t len)
{
    braid_error_clear();
    if (comm == NULL || buf == NULL || len == 0)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_comm_topology: %s",
                           comm == NULL ? "comm is NULL"
                                        : "no buffer to write to");
    braid_topo_describe(comm, buf, len);
    return BRAID_OK;
}
