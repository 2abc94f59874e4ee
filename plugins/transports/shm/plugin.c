/* The shm plugin: one transport for the ranks of one host, no algorithms of
 * its own (the p2p and lowhop algorithms run on it through braid_tl_t). */
#include "shm.h"

static braid_status_t shm_plugin_probe(const braid_plugin_t   *self,
                                       const braid_services_t *svc, char *why,
                                       size_t why_len)
{
    (void)self, (void)svc, (void)why, (void)why_len;
    return BRAID_OK; /* the transport's own probe looks at /dev/shm */
}

static const braid_transport_t *const transports[] = {&braid_shm_transport};

__attribute__((visibility("default"))) const braid_plugin_t braid_plugin_v4 = {
    .abi_version  = BRAID_PLUGIN_ABI_VERSION,
    .struct_size  = sizeof(braid_plugin_t),
    .name         = "shm",
    .version      = "0.2",
    .probe        = shm_plugin_probe,
    .n_transports = 1,
    .transports   = transports,
};
