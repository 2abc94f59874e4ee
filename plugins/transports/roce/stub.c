/* The roce transport of a build without libibverbs-dev: always unavailable
 * (braid-info says why), never opened. */
#include <stdio.h>

#include "roce.h"

static braid_status_t roce_stub_probe(const braid_services_v3_t *svc,
                                      char *why, size_t why_len)
{
    (void)svc;
    snprintf(why, why_len, "built without libibverbs (install "
             "libibverbs-dev and reconfigure)");
    return BRAID_ERR_UNAVAILABLE;
}

/* Never reached (no communicator opens), but every transport has one. */
static void roce_stub_cancel(void *tcomm, braid_treq_t *req)
{
    (void)tcomm;
    req->active = 0;
    req->handle = NULL;
}

const braid_transport_v3_t braid_roce_transport = {
    .name   = "roce",
    .caps   = BRAID_CAP_PUT_SIGNAL,
    .probe  = roce_stub_probe,
    .cancel = roce_stub_cancel,
};
