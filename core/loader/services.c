/* The services the core hands to plugins: logging, errors, kernels, clock,
 * who shares a CPU, the sleep setting of the core's waiting policy, the
 * machinery algorithms share (core/algo), and the allocations peers can map
 * (core/mem). */
#include <string.h>

#include "algo/res.h"
#include "kernels/reduce.h"
#include "loader/loader.h"
#include "mem/mem.h"
#include "util/env.h"
#include "util/log.h"

braid_status_t braid_services_error(braid_status_t status, const char *fmt,
                                    ...)
{
    va_list ap;
    va_start(ap, fmt);
    braid_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

void braid_services_log(braid_log_level_t level, const char *component,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    braid_vlog(level, component, fmt, ap);
    va_end(ap);
}

int braid_cpu_mates(const braid_topo_t *topo, int rank, unsigned char *mate)
{
    int n     = topo != NULL ? topo->size : 0;
    int count = 0;
    int cpu =
        topo != NULL && topo->cpu_of_rank != NULL && rank >= 0 && rank < n
            ? topo->cpu_of_rank[rank]
            : -1;

    if (n > 0)
        memset(mate, 0, (size_t)n);
    if (cpu < 0)
        return -1;
    for (int r = 0; r < n; r++) {
        mate[r] = r != rank && topo->cpu_of_rank[r] == cpu &&
                  topo->node_of_rank != NULL &&
                  topo->node_of_rank[r] == topo->node_of_rank[rank];
        count += mate[r];
    }
    return count;
}

/* BRAID_SLEEP_POLLS, as the communicators read it (they refuse a malformed
 * value, and ranks that disagree, at creation). */
static unsigned services_sleep_polls(void)
{
    long long v = 0;
    if (braid_env_int("BRAID_SLEEP_POLLS", 0, 0, 1000000000, &v) != BRAID_OK)
        return 0;
    return (unsigned)v;
}

const braid_services_t braid_services = {
    .struct_size     = sizeof(braid_services_t),
    .log             = braid_services_log,
    .error           = braid_services_error,
    .reduce          = braid_kernel_reduce,
    .reduce2         = braid_kernel_reduce2,
    .finish_avg      = braid_kernel_finish_avg,
    .timeout_s       = braid_timeout_s,
    .now             = braid_now_s,
    .cpu_mates       = braid_cpu_mates,
    .sleep_polls     = services_sleep_polls,
    .state_get       = braid_state_get,
    .state_put       = braid_state_put,
    .scratch_get     = braid_scratch_get,
    .scratch_put     = braid_scratch_put,
    .area_get        = braid_area_get,
    .reqs_test       = braid_reqs_test,
    .reqs_cancel     = braid_reqs_cancel,
    .mem_shared_find = braid_mem_shared_find,
    .copy            = braid_kernel_copy,
};

const braid_services_t *braid_core_services(void) { return &braid_services; }
