/* Communicator setup and teardown: device, PD, CQ, one RC QP per peer.
 *
 * comm_create is collective and always makes the same out-of-band calls on
 * every rank, whatever failed locally, so that a rank without a device makes
 * its peers fail (with its rank named) instead of hang:
 *   1. local resources; QPs to INIT with their receives posted;
 *   2. allgather of {ok, address, per-peer QP number and PSN};
 *   3. every QP to RTR and RTS;
 *   4. allgather of ok: the final barrier.  Nobody returns (and posts) before
 *      every QP of every rank is ready to receive, and everyone agrees on the
 *      outcome. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tl_roce.h"

#define WIRE_VERSION 1u

/* RC parameters.  ACK timeout 4.096 us * 2^17 = 0.54 s per try, 6 retries:
 * a dead peer shows as IBV_WC_RETRY_EXC_ERR after about 4 s, and a VM or a
 * loaded host delaying an ACK by tens of ms only causes a harmless resend.
 * Not 7 retries: rxe (Soft-RoCE) takes retry_cnt 7 to mean "forever", like
 * rnr_retry 7, and would never report the dead peer.
 * rnr_retry 7 = retry forever when the target has no receive posted (it is
 * not polling yet); the put then times out in test().  min_rnr_timer 12 =
 * 0.64 ms between those retries. */
#define QP_TIMEOUT       17
#define QP_RETRY_CNT     6
#define QP_RNR_RETRY     7
#define QP_MIN_RNR_TIMER 12
#define QP_HOP_LIMIT     64
#define QP_MAX_INLINE    64

/* What each rank publishes, followed by qp[size]. */
typedef struct ep_header {
    uint32_t ok;
    uint32_t version;
    uint8_t  gid[16];
    int32_t  gid_index; /* -1: no GRH */
    uint16_t lid;
    uint8_t  mtu;
    uint8_t  link_layer;
    uint32_t pad;
    double   alpha_us; /* rank 0's declared link is everyone's */
    double   beta_gbps;
} ep_header_t;

typedef struct ep_qp {
    uint32_t qpn; /* of the QP this rank created for that peer */
    uint32_t psn;
} ep_qp_t;

static size_t ep_size(int nranks)
{
    return sizeof(ep_header_t) + (size_t)nranks * sizeof(ep_qp_t);
}

static ep_header_t *ep_at(void *all, int nranks, int r)
{
    return (ep_header_t *)((uint8_t *)all + (size_t)r * ep_size(nranks));
}

static ep_qp_t *ep_qps(ep_header_t *h) { return (ep_qp_t *)(h + 1); }

static uint32_t random_psn(int rank, int peer)
{
    struct timespec ts;
    uint64_t        x;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20) ^
        ((uint64_t)rank << 40) ^ ((uint64_t)peer << 8);
    x ^= x >> 33; /* splitmix-style finaliser */
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)(x & 0xffffff);
}

/* --------------------------------------------------------------- drain */

braid_status_t braid_roce_drain(braid_roce_comm_t *comm, const char *what)
{
    const braid_services_t *svc = comm->svc;
    double                  t0  = svc->now();
    braid_status_t          st;

    for (;;) {
        int busy = -1;
        for (int r = 0; r < comm->size && busy < 0; r++)
            if (comm->peers[r].sq_used > 0)
                busy = r;
        if (busy < 0)
            return BRAID_OK;
        if ((st = braid_roce_poll(comm)) != BRAID_OK)
            return st;
        if (svc->now() - t0 > svc->timeout_s())
            return svc->error(BRAID_ERR_TIMEOUT,
                              "roce: rank %d: %s: puts to "
                              "rank %d still unacknowledged after %.1f s",
                              comm->rank, what, busy, svc->now() - t0);
    }
}

/* ---------------------------------------------------------- local setup */

static braid_status_t alloc_bufs(braid_roce_comm_t *comm)
{
    size_t in =
        (size_t)comm->size * BRAID_ROCE_RQ_DEPTH * sizeof(braid_roce_sig_t);
    size_t out =
        (size_t)comm->size * BRAID_ROCE_SQ_DEPTH * sizeof(braid_roce_sig_t);
    size_t bb =
        (size_t)comm->size * BRAID_ROCE_BOUNCE_SLOTS * BRAID_ROCE_BOUNCE_SIZE;
    void *p;

    comm->bufs_len = in + out + bb;
    p              = mmap(NULL, comm->bufs_len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return comm->svc->error(BRAID_ERR_NO_MEMORY,
                                "roce: rank %d: mmap of "
                                "%zu bytes of signal and bounce buffers "
                                "failed: %s",
                                comm->rank, comm->bufs_len, strerror(errno));
    comm->bufs   = p;
    comm->inbox  = p;
    comm->outbox = (braid_roce_sig_t *)((uint8_t *)p + in);
    comm->bounce = (uint8_t *)p + in + out;
    comm->bufs_mr =
        ibv_reg_mr(comm->pd, p, comm->bufs_len, IBV_ACCESS_LOCAL_WRITE);
    if (comm->bufs_mr == NULL)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: "
                                "ibv_reg_mr of %zu bytes on %s failed: %s "
                                "(locked memory limit, ulimit -l?)",
                                comm->rank, comm->bufs_len, comm->dev.name,
                                strerror(errno));
    return BRAID_OK;
}

static braid_status_t create_qp(braid_roce_comm_t *comm, int peer)
{
    braid_roce_peer_t      *p = &comm->peers[peer];
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr      a;
    int                     rc;

    memset(&ia, 0, sizeof(ia));
    ia.send_cq             = comm->cq;
    ia.recv_cq             = comm->cq;
    ia.qp_type             = IBV_QPT_RC;
    ia.sq_sig_all          = 0; /* only the SEND of each put is signaled */
    ia.cap.max_send_wr     = BRAID_ROCE_SQ_DEPTH;
    ia.cap.max_recv_wr     = BRAID_ROCE_RQ_DEPTH;
    ia.cap.max_send_sge    = 1;
    ia.cap.max_recv_sge    = 1;
    ia.cap.max_inline_data = QP_MAX_INLINE;
    p->qp                  = ibv_create_qp(comm->pd, &ia);
    if (p->qp == NULL) { /* some devices refuse inline data: go without */
        ia.cap.max_inline_data = 0;
        p->qp                  = ibv_create_qp(comm->pd, &ia);
    }
    if (p->qp == NULL)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: "
                                "ibv_create_qp (RC, %u+%u WRs) for rank %d on "
                                "%s failed: %s",
                                comm->rank, BRAID_ROCE_SQ_DEPTH,
                                BRAID_ROCE_RQ_DEPTH, peer, comm->dev.name,
                                strerror(errno));
    if (ia.cap.max_inline_data < comm->max_inline)
        comm->max_inline = ia.cap.max_inline_data;
    p->psn = random_psn(comm->rank, peer);

    memset(&a, 0, sizeof(a));
    a.qp_state        = IBV_QPS_INIT;
    a.pkey_index      = 0;
    a.port_num        = comm->dev.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    rc                = ibv_modify_qp(p->qp, &a,
                                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS);
    if (rc != 0)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: QP "
                                "for rank %d on %s: RESET->INIT failed: %s",
                                comm->rank, peer, comm->dev.name,
                                strerror(rc));
    /* Receives may be posted in INIT: all are there before the peer can
     * send, which only happens after the final agreement. */
    for (uint32_t s = 0; s < BRAID_ROCE_RQ_DEPTH; s++) {
        braid_status_t st = braid_roce_post_recv(comm, peer, s);
        if (st != BRAID_OK)
            return st;
    }
    return BRAID_OK;
}

static braid_status_t setup_local(braid_roce_comm_t *comm, char *why,
                                  size_t why_len)
{
    struct ibv_device_attr da;
    braid_status_t         st;
    int                    cqe;

    st = braid_roce_env_link(comm->svc, &comm->link, why, why_len);
    if (st == BRAID_OK)
        st = braid_roce_env_max_write(comm->svc, &comm->max_write, why,
                                      why_len);
    if (st != BRAID_OK)
        return st;
    st = braid_roce_dev_open(comm->svc, &comm->dev, why, why_len);
    if (st != BRAID_OK)
        return comm->svc->error(st, "roce: rank %d: %s", comm->rank, why);
    if (ibv_query_device(comm->dev.ctx, &da) != 0)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: "
                                "ibv_query_device on %s failed: %s",
                                comm->rank, comm->dev.name, strerror(errno));
    /* Every WR of every QP may complete on the one CQ (unsignaled ones too,
     * when they fail), so it can never overflow. */
    cqe = (comm->size - 1) * (int)(BRAID_ROCE_SQ_DEPTH + BRAID_ROCE_RQ_DEPTH);
    if (cqe < 1)
        cqe = 1;
    if ((uint32_t)da.max_qp_wr < BRAID_ROCE_SQ_DEPTH || cqe > da.max_cqe)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: %s "
                                "allows %d WRs per QP and %d CQ entries; %d "
                                "ranks need %u and %d",
                                comm->rank, comm->dev.name, da.max_qp_wr,
                                da.max_cqe, comm->size, BRAID_ROCE_SQ_DEPTH,
                                cqe);
    if (comm->max_write == 0 || comm->max_write > BRAID_ROCE_MAX_WRITE)
        comm->max_write = BRAID_ROCE_MAX_WRITE;
    if (comm->dev.max_msg_sz > 0 && comm->max_write > comm->dev.max_msg_sz)
        comm->max_write = comm->dev.max_msg_sz;
    comm->pd = ibv_alloc_pd(comm->dev.ctx);
    if (comm->pd == NULL)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: "
                                "ibv_alloc_pd on %s failed: %s",
                                comm->rank, comm->dev.name, strerror(errno));
    comm->cq = ibv_create_cq(comm->dev.ctx, cqe, NULL, NULL, 0);
    if (comm->cq == NULL)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: "
                                "ibv_create_cq (%d entries) on %s failed: %s",
                                comm->rank, cqe, comm->dev.name,
                                strerror(errno));
    if ((st = alloc_bufs(comm)) != BRAID_OK)
        return st;
    comm->max_inline = QP_MAX_INLINE;
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank && (st = create_qp(comm, r)) != BRAID_OK)
            return st;
    return BRAID_OK;
}

/* ------------------------------------------------------------- connect */

static braid_status_t connect_qp(braid_roce_comm_t *comm, int peer,
                                 ep_header_t *them)
{
    braid_roce_peer_t *p  = &comm->peers[peer];
    ep_qp_t           *tq = &ep_qps(them)[comm->rank];
    struct ibv_qp_attr a;
    int                rc;

    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu =
        them->mtu < comm->dev.mtu ? (enum ibv_mtu)them->mtu : comm->dev.mtu;
    a.dest_qp_num        = tq->qpn;
    a.rq_psn             = tq->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer      = QP_MIN_RNR_TIMER;
    a.ah_attr.port_num   = comm->dev.port;
    a.ah_attr.dlid       = them->lid;
    if (comm->dev.gid_index >= 0) {
        a.ah_attr.is_global      = 1;
        a.ah_attr.grh.sgid_index = (uint8_t)comm->dev.gid_index;
        a.ah_attr.grh.hop_limit  = QP_HOP_LIMIT;
        memcpy(a.ah_attr.grh.dgid.raw, them->gid, sizeof(them->gid));
    }
    rc = ibv_modify_qp(p->qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                           IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: QP "
                                "to rank %d (remote QPN %u) on %s: INIT->RTR "
                                "failed: %s",
                                comm->rank, peer, tq->qpn, comm->dev.name,
                                strerror(rc));
    memset(&a, 0, sizeof(a));
    a.qp_state      = IBV_QPS_RTS;
    a.timeout       = QP_TIMEOUT;
    a.retry_cnt     = QP_RETRY_CNT;
    a.rnr_retry     = QP_RNR_RETRY;
    a.sq_psn        = p->psn;
    a.max_rd_atomic = 1;
    rc              = ibv_modify_qp(p->qp, &a,
                                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                        IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0)
        return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                "roce: rank %d: QP "
                                "to rank %d on %s: RTR->RTS failed: %s",
                                comm->rank, peer, comm->dev.name,
                                strerror(rc));
    return BRAID_OK;
}

static void publish(braid_roce_comm_t *comm, braid_status_t local,
                    ep_header_t *me)
{
    me->ok        = local == BRAID_OK;
    me->version   = WIRE_VERSION;
    me->alpha_us  = comm->link.alpha_us;
    me->beta_gbps = comm->link.beta_gbps;
    if (local != BRAID_OK)
        return;
    memcpy(me->gid, comm->dev.gid.raw, sizeof(me->gid));
    me->gid_index  = comm->dev.gid_index;
    me->lid        = comm->dev.lid;
    me->mtu        = (uint8_t)comm->dev.mtu;
    me->link_layer = comm->dev.link_layer;
    for (int r = 0; r < comm->size; r++)
        if (r != comm->rank) {
            ep_qps(me)[r].qpn = comm->peers[r].qp->qp_num;
            ep_qps(me)[r].psn = comm->peers[r].psn;
        }
}

/* Whether every rank set up; the same verdict everywhere. */
static braid_status_t check_peers(braid_roce_comm_t *comm, void *all)
{
    ep_header_t *me = ep_at(all, comm->size, comm->rank);

    for (int r = 0; r < comm->size; r++) {
        ep_header_t *h = ep_at(all, comm->size, r);
        if (!h->ok)
            return comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                    "roce: rank %d "
                                    "could not set up its RDMA device (its "
                                    "log says why)",
                                    r);
        if (h->version != WIRE_VERSION)
            return comm->svc->error(BRAID_ERR_MISMATCH,
                                    "roce: rank %d "
                                    "speaks wire version %u, rank %d %u",
                                    r, h->version, comm->rank, WIRE_VERSION);
        if (h->link_layer != me->link_layer ||
            (h->gid_index < 0) != (me->gid_index < 0))
            return comm->svc->error(
                BRAID_ERR_UNAVAILABLE,
                "roce: rank %d "
                "is on a %s port, rank %d on a %s port",
                r,
                h->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE"
                                                         : "InfiniBand",
                comm->rank,
                me->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE"
                                                          : "InfiniBand");
    }
    return BRAID_OK;
}

/* Rank 0's link parameters, so that every rank's cost model agrees. */
static void adopt_link(braid_roce_comm_t *comm, void *all)
{
    ep_header_t *h0 = ep_at(all, comm->size, 0);

    if (h0->alpha_us != comm->link.alpha_us ||
        h0->beta_gbps != comm->link.beta_gbps)
        comm->svc->log(BRAID_LOG_WARN, BRAID_ROCE_LOG,
                       "rank %d: "
                       "BRAID_ROCE_ALPHA_US/BRAID_ROCE_GBPS differ from rank "
                       "0's; using rank 0's %.3g us, %.3g GB/s",
                       comm->rank, h0->alpha_us, h0->beta_gbps);
    comm->link.alpha_us  = h0->alpha_us;
    comm->link.beta_gbps = h0->beta_gbps;
}

static braid_status_t agree(braid_roce_comm_t *comm, braid_status_t local)
{
    uint32_t       ok  = local == BRAID_OK;
    uint32_t      *oks = calloc((size_t)comm->size, sizeof(*oks));
    braid_status_t st;

    if (oks == NULL)
        return comm->svc->error(BRAID_ERR_NO_MEMORY, "roce: out of memory");
    st = comm->oob.allgather(comm->oob.ctx, &ok, oks, sizeof(ok));
    for (int r = 0; st == BRAID_OK && local == BRAID_OK && r < comm->size; r++)
        if (!oks[r])
            st = comm->svc->error(BRAID_ERR_UNAVAILABLE,
                                  "roce: rank %d could "
                                  "not connect its queue pairs (its log says "
                                  "why)",
                                  r);
    free(oks);
    return st != BRAID_OK ? st : local;
}

braid_status_t braid_roce_comm_create(const braid_transport_t *self,
                                      const braid_services_t  *svc,
                                      const braid_oob_t       *oob,
                                      const braid_topo_t *topo, void **tcomm)
{
    braid_roce_comm_t *comm;
    void              *all      = NULL;
    char               why[256] = "";
    braid_status_t     local, st;

    (void)self, (void)topo;
    *tcomm = NULL;
    if (oob->size > BRAID_ROCE_MAX_RANKS)
        return svc->error(BRAID_ERR_UNAVAILABLE, "roce: %d ranks; at most %d",
                          oob->size, BRAID_ROCE_MAX_RANKS);
    comm = calloc(1, sizeof(*comm));
    all  = calloc((size_t)oob->size, ep_size(oob->size));
    if (comm == NULL || all == NULL) {
        free(comm);
        free(all);
        return svc->error(BRAID_ERR_NO_MEMORY,
                          "roce: out of memory for "
                          "%d peers",
                          oob->size);
    }
    comm->svc   = svc;
    comm->oob   = *oob;
    comm->rank  = oob->rank;
    comm->size  = oob->size;
    comm->peers = calloc((size_t)oob->size, sizeof(*comm->peers));
    local       = comm->peers != NULL ? setup_local(comm, why, sizeof(why))
                                      : svc->error(BRAID_ERR_NO_MEMORY,
                                                   "roce: out "
                                                         "of memory for %d peers",
                                                   oob->size);

    publish(comm, local, ep_at(all, comm->size, comm->rank));
    st = oob->allgather(oob->ctx, ep_at(all, comm->size, comm->rank), all,
                        ep_size(comm->size));
    if (st != BRAID_OK)
        goto fail;
    if (local != BRAID_OK) {
        st = local; /* our own reason, not "rank N failed" */
        goto fail;
    }
    if ((st = check_peers(comm, all)) != BRAID_OK)
        goto fail;
    adopt_link(comm, all);
    for (int r = 0; r < comm->size && local == BRAID_OK; r++)
        if (r != comm->rank)
            local = connect_qp(comm, r, ep_at(all, comm->size, r));
    if ((st = agree(comm, local)) != BRAID_OK)
        goto fail;

    svc->log(BRAID_LOG_INFO, BRAID_ROCE_LOG,
             "rank %d: %s port %u, GID %s, "
             "MTU %d, %d QPs, inline %u",
             comm->rank, comm->dev.name, (unsigned)comm->dev.port,
             comm->dev.gid_desc, 128 << comm->dev.mtu, comm->size - 1,
             comm->max_inline);
    free(all);
    *tcomm = comm;
    return BRAID_OK;

fail:
    free(all);
    comm->failed = BRAID_ERR_STATE; /* no draining on this path */
    braid_roce_comm_destroy(comm);
    return st;
}

/* ------------------------------------------------------------- destroy */

void braid_roce_comm_destroy(void *tcomm)
{
    braid_roce_comm_t *comm = tcomm;
    int                rc;

    if (comm == NULL)
        return;
    /* Our last puts must be acknowledged before their QPs go; bounded. */
    if (comm->failed == BRAID_OK && comm->cq != NULL &&
        braid_roce_drain(comm, "comm_destroy") != BRAID_OK)
        comm->svc->log(BRAID_LOG_WARN, BRAID_ROCE_LOG,
                       "rank %d: closing "
                       "with puts in flight",
                       comm->rank);
    for (int r = 0; comm->peers != NULL && r < comm->size; r++) {
        braid_roce_peer_t *p = &comm->peers[r];
        if (p->qp != NULL && (rc = ibv_destroy_qp(p->qp)) != 0)
            comm->svc->log(BRAID_LOG_WARN, BRAID_ROCE_LOG,
                           "rank %d: "
                           "ibv_destroy_qp (rank %d) failed: %s",
                           comm->rank, r, strerror(rc));
        for (uint32_t i = 0; i < BRAID_ROCE_SQ_DEPTH; i++)
            if (p->ops[i].tmp_mr != NULL)
                ibv_dereg_mr(p->ops[i].tmp_mr);
    }
    for (uint32_t i = 0; i < comm->nareas; i++)
        braid_roce_area_release(comm->areas[i]); /* never mem_free'd */
    free(comm->areas);
    if (comm->bufs_mr != NULL)
        ibv_dereg_mr(comm->bufs_mr);
    if (comm->bufs != NULL)
        munmap(comm->bufs, comm->bufs_len);
    if (comm->cq != NULL && (rc = ibv_destroy_cq(comm->cq)) != 0)
        comm->svc->log(BRAID_LOG_WARN, BRAID_ROCE_LOG,
                       "rank %d: "
                       "ibv_destroy_cq failed: %s",
                       comm->rank, strerror(rc));
    if (comm->pd != NULL && (rc = ibv_dealloc_pd(comm->pd)) != 0)
        comm->svc->log(BRAID_LOG_WARN, BRAID_ROCE_LOG,
                       "rank %d: "
                       "ibv_dealloc_pd failed: %s",
                       comm->rank, strerror(rc));
    braid_roce_dev_close(&comm->dev);
    free(comm->peers);
    free(comm);
}
