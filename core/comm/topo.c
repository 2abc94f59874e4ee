/* Topology: which ranks share a host, and how the hosts are cabled.
 *
 * Hosts are told apart by hostname, or by BRAID_HOSTNAME where ranks on one
 * machine emulate several (network namespaces).  How hosts are connected
 * cannot be discovered from inside a rank, so BRAID_TOPO says it: "switch"
 * (default for several hosts) or "ring" (hosts cabled in rank order).
 *
 * Each rank also says which CPU it is pinned to, if just one: ranks pinned
 * to one CPU take turns on it, which decides how a rank should wait. */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "util/log.h"

#define HOST_LEN 64

/* What each rank contributes: its host, then its CPU. */
typedef struct {
    char    host[HOST_LEN];
    int32_t cpu;
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
        size_t best = 0;
        for (int w = 0; w < 3; w++) {
            size_t i = 0;
            while (s[i] && s[i] == words[w][i])
                i++;
            if (i > best)
                best = i;
        }
        char ex[80];
        braid_excerpt(ex, sizeof(ex), s, strlen(s), best);
        return braid_error(BRAID_ERR_PARSE, "BRAID_TOPO: %s at position %zu: "
                           "'%s' (expected auto, switch or ring)",
                           s[best] ? "unexpected character" : "value ends early",
                           best, ex);
    }
    if (nnodes == 1)
        *kind = BRAID_TOPO_SINGLE_HOST; /* one host has no cabling to model */
    return BRAID_OK;
}

braid_status_t braid_topo_detect(braid_comm_t *comm)
{
    topo_rec_t  self;
    topo_rec_t *all = NULL;
    int        *count = NULL;
    braid_status_t st;

    memset(&self, 0, sizeof(self));
    const char *env = getenv("BRAID_HOSTNAME");
    if (env != NULL && *env != '\0')
        strncpy(self.host, env, HOST_LEN - 1);
    else if (gethostname(self.host, HOST_LEN - 1) != 0)
        strcpy(self.host, "localhost");
    self.cpu = pinned_cpu();

    all   = calloc((size_t)comm->size, sizeof(*all));
    count = calloc((size_t)comm->size, sizeof(int));
    comm->node_of_rank = calloc((size_t)comm->size, sizeof(int));
    comm->cpu_of_rank  = calloc((size_t)comm->size, sizeof(int));
    if (all == NULL || count == NULL || comm->node_of_rank == NULL ||
        comm->cpu_of_rank == NULL) {
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
            if (strncmp(all[q].host, all[r].host, HOST_LEN) == 0)
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
    st = braid_topo_kind_parse(&comm->topo.kind, getenv("BRAID_TOPO"), nnodes);
out:
    free(all);
    free(count);
    return st;
}
