/* The ucx plugin: the transport that runs wherever UCX runs (TCP, shared
 * memory or RDMA underneath), with both two-sided send/receive and
 * put-with-signal.  It brings no algorithms: the p2p and lowhop plugins'
 * algorithms run over it through braid_tl_t. */
#include <pthread.h>
#include <stdio.h>

#include "tl_ucx.h"

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int             probe_held;

/* A successful probe keeps its context reference until unload, so the
 * communicators that follow reuse the context instead of initialising UCX a
 * second time. */
static braid_status_t ucx_probe(const braid_plugin_t   *self,
                                const braid_services_t *svc, char *why,
                                size_t why_len)
{
    ucp_context_h  ctx;
    ucs_status_t   ust;
    braid_status_t st;

    (void)self;
    st = braid_ucx_context_acquire(&ctx, svc, &ust);
    if (svc != NULL) {
        svc->log(BRAID_LOG_DEBUG, BRAID_UCX_COMPONENT, "UCX %s: ucp_init %s",
                 ucp_get_version_string(), ucs_status_string(ust));
    }
    if (st != BRAID_OK) {
        if (why != NULL && why_len > 0) {
            snprintf(why, why_len, "ucp_init failed: %s",
                     ucs_status_string(ust));
        }
        return BRAID_ERR_UNAVAILABLE;
    }
    pthread_mutex_lock(&probe_lock);
    if (probe_held) {
        braid_ucx_context_release();
    } else {
        probe_held = 1;
    }
    pthread_mutex_unlock(&probe_lock);
    return BRAID_OK;
}

static void ucx_unload(const braid_plugin_t *self)
{
    (void)self;
    pthread_mutex_lock(&probe_lock);
    if (probe_held) {
        probe_held = 0;
        braid_ucx_context_release();
    }
    pthread_mutex_unlock(&probe_lock);
}

static const braid_transport_t *const transports[] = {
    &braid_ucx_transport,
};

__attribute__((visibility("default"))) const braid_plugin_t braid_plugin_v4 = {
    .abi_version  = BRAID_PLUGIN_ABI_VERSION,
    .struct_size  = sizeof(braid_plugin_t),
    .name         = "ucx",
    .version      = "0.1.0",
    .probe        = ucx_probe,
    .n_transports = (int)(sizeof(transports) / sizeof(transports[0])),
    .transports   = transports,
    .unload       = ucx_unload,
};
