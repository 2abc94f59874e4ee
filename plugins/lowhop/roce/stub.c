/* The roce transport of a build without libibverbs-dev: always unavailable,
 * so that the lowhop algorithms still load and run over other transports. */
#include <stdio.h>

#include "roce.h"

static braid_status_t roce_stub_probe(const braid_services_v2_t *svc,
                                      char *why, size_t why_len)
{
    (void)svc;
    snprintf(why, why_len, "built without libibverbs (install "
             "libibverbs-dev and reconfigure)");
    return BRAID_ERR_UNAVAILABLE;
}

const braid_transport_v2_t braid_lowhop_roce_transport = {
    .name  = "roce",
    .caps  = BRAID_CAP_PUT_SIGNAL,
    .probe = roce_stub_probe,
};
