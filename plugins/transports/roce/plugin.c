/* The roce plugin: one-sided put-with-signal over RDMA verbs (RoCE v2),
 * for the algorithms written against BRAID_CAP_PUT_SIGNAL (lowhop's).  Its
 * transport probe looks for a usable RDMA device; without one (or in a
 * build without libibverbs-dev, stub.c) the plugin stays loaded and
 * braid-info shows why the transport is unavailable. */
#include "roce.h"

static braid_status_t roce_plugin_probe(const braid_plugin_t   *self,
                                        const braid_services_t *svc, char *why,
                                        size_t why_len)
{
    (void)self, (void)svc, (void)why, (void)why_len;
    return BRAID_OK; /* the transport's own probe looks for a device */
}

static const braid_transport_t *const transports[] = {&braid_roce_transport};

__attribute__((visibility("default"))) const braid_plugin_t braid_plugin_v4 = {
    .abi_version  = BRAID_PLUGIN_ABI_VERSION,
    .struct_size  = sizeof(braid_plugin_t),
    .name         = "roce",
    .version      = "0.1",
    .probe        = roce_plugin_probe,
    .n_transports = 1,
    .transports   = transports,
};
