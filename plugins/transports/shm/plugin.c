/* The shm plugin: one transport for the ranks of one host, no algorithms of
 * its own (the p2p and lowhop algorithms run on it through braid_tl_t). */
#include <stdio.h>

#include "shm.h"

static braid_status_t shm_plugin_probe(const braid_plugin_t   *self,
                                       const braid_services_t *svc, char *why,
                                       size_t why_len)
{
    (void)self;
    /* Puts and cells move their data through svc->copy (kernels/copy.c:
     * vector moves between cores, not memcpy's rep movsb). */
    if (!BRAID_HAS(svc, braid_services_t, copy)) {
        snprintf(why, why_len,
                 "this libbraid lacks svc->copy (plugin ABI 4 revision 3)");
        return BRAID_ERR_UNAVAILABLE;
    }
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
