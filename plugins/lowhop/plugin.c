/* The lowhop plugin: low-hop all-reduce algorithms and the RoCE transport. */
#include <braid/plugin.h>

#include "roce/roce.h"

static braid_status_t lowhop_probe(const braid_services_v1_t *svc, char *why,
                                   size_t why_len)
{
    (void)svc, (void)why, (void)why_len;
    return BRAID_OK; /* the algorithms run on any put-with-signal transport */
}

static const braid_transport_v1_t *const transports[] = {
    &braid_lowhop_roce_transport};

__attribute__((visibility("default")))
const braid_plugin_v1_t braid_plugin_v1 = {
    .abi_version  = BRAID_PLUGIN_ABI_VERSION,
    .struct_size  = sizeof(braid_plugin_v1_t),
    .name         = "lowhop",
    .version      = "0.1",
    .probe        = lowhop_probe,
    .n_transports = 1,
    .transports   = transports,
};
