/* The roce transport of a build without libibverbs-dev: always unavailable
 * (braid-info says why), never opened. */
#include <stdio.h>

#include "roce.h"

static braid_status_t roce_stub_probe(const braid_transport_t *self,
                                      const braid_services_t *svc, char *why,
                                      size_t why_len)
{
    (void)self, (void)svc;
    snprintf(why, why_len,
             "built without libibverbs (install "
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

/* Never reached either; the loader wants them. */
static braid_status_t roce_stub_comm_create(const braid_transport_t *self,
                                            const braid_services_t  *svc,
                                            const braid_oob_t       *oob,
                                            const braid_topo_t      *topo,
                                            void                   **tcomm)
{
    (void)self, (void)oob, (void)topo, (void)tcomm;
    return svc->error(BRAID_ERR_UNAVAILABLE, "roce: built without "
                                             "libibverbs");
}

static void roce_stub_comm_destroy(void *tcomm) { (void)tcomm; }

static void roce_stub_link(void *tcomm, braid_link_t *link)
{
    (void)tcomm, (void)link;
}

const braid_transport_t braid_roce_transport = {
    .struct_size  = sizeof(braid_transport_t),
    .comm_create  = roce_stub_comm_create,
    .comm_destroy = roce_stub_comm_destroy,
    .link         = roce_stub_link,
    .name         = "roce",
    .caps         = BRAID_CAP_PUT_SIGNAL,
    .probe        = roce_stub_probe,
    .cancel       = roce_stub_cancel,
};
