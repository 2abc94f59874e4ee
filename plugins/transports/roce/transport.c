/* The "roce" transport: one-sided put-with-signal over RDMA verbs (RC QPs),
 * for the lowhop algorithms.
 *
 * Linking: the plugin links libibverbs.so.1 directly (libibverbs1 is a
 * package dependency), so libbraid-roce.so does not load on a machine
 * without it.  Loading it with dlopen instead would take a table of the
 * ~25 ibv_* entry points we call, filled by dlsym at probe time (failure ->
 * "libibverbs.so.1 not found"), and care with the static inline wrappers in
 * <infiniband/verbs.h> (ibv_post_send, ibv_poll_cq, ibv_query_port,
 * ibv_query_gid_ex, ibv_reg_mr) which call through the context's ops or
 * versioned symbols (ibv_reg_mr_iova2, _ibv_query_gid_ex, ibv_query_port's
 * compat path) that would have to be resolved by name as well.
 *
 * Two-sided send/receive (BRAID_CAP_SENDRECV) is not offered: tagged
 * matching with unexpected messages and rendezvous for large ones is a
 * protocol of its own, and the algorithms this transport serves need only
 * puts.  `test` is still provided: it completes put requests. */
#include "tl_roce.h"

static braid_status_t roce_probe(const braid_transport_t *self,
                                 const braid_services_t *svc, char *why,
                                 size_t why_len)
{
    braid_roce_dev_t dev;
    braid_link_t     link;
    size_t           max_write;
    braid_status_t   st = braid_roce_dev_open(svc, &dev, why, why_len);

    (void)self;
    if (st != BRAID_OK)
        return st;
    svc->log(BRAID_LOG_DEBUG, BRAID_ROCE_LOG, "%s port %u, GID %s", dev.name,
             (unsigned)dev.port, dev.gid_desc);
    braid_roce_dev_close(&dev);
    /* A malformed override is reported here too, so that braid-info shows
     * it, rather than only when a communicator opens. */
    st = braid_roce_env_link(svc, &link, why, why_len);
    if (st == BRAID_OK)
        st = braid_roce_env_max_write(svc, &max_write, why, why_len);
    return st;
}

/* Declared, not measured: a 200 Gb/s RoCE NIC (ConnectX-6/7 class) behind
 * one switch.
 *   alpha 3 us: ~1.5-2 us one-way for a small RDMA WRITE through a switch,
 *     plus the signal SEND behind it and the target's CQ poll before the
 *     flag is visible.
 *   beta 20 GB/s: 200 Gb/s is 25 GB/s on the wire; RoCE v2 headers
 *     (~70 bytes per 4 KiB MTU packet), PCIe Gen4 x16 and flow control leave
 *     about 20 GB/s of payload in practice.
 * BRAID_ROCE_ALPHA_US and BRAID_ROCE_GBPS override them (rank 0's values
 * are used on every rank, see connect.c), e.g. for a 100 Gb/s NIC or for
 * Soft-RoCE, which is far slower. */
static void roce_link(void *tcomm, braid_link_t *link)
{
    const braid_link_t *mine = &((braid_roce_comm_t *)tcomm)->link;
    link->alpha_us           = mine->alpha_us;
    link->beta_gbps          = mine->beta_gbps;
    link->put_alpha_us       = mine->put_alpha_us;
    link->put_beta_gbps      = mine->put_beta_gbps;
}

static braid_status_t roce_progress(void *tcomm)
{
    return braid_roce_poll(tcomm);
}

const braid_transport_t braid_roce_transport = {
    .struct_size  = sizeof(braid_transport_t),
    .name         = "roce",
    .caps         = BRAID_CAP_PUT_SIGNAL,
    .mem_types    = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .probe        = roce_probe,
    .comm_create  = braid_roce_comm_create,
    .comm_destroy = braid_roce_comm_destroy,
    .link         = roce_link,
    .test         = braid_roce_test,
    .progress     = roce_progress,
    .cancel       = braid_roce_cancel,
    .mem_alloc    = braid_roce_mem_alloc,
    .mem_free     = braid_roce_mem_free,
    .put_signal   = braid_roce_put_signal,
};
