/* Device, port and GID selection.
 *
 * Device: BRAID_ROCE_DEV (NAME or NAME:PORT), else the first device, in
 * ibv_get_device_list order, with an ACTIVE port.
 *
 * GID (RoCE only; an InfiniBand port is LID routed): BRAID_ROCE_GID_INDEX,
 * else a RoCE v2 entry, because v2 (UDP/IP) crosses L3 switches and is what
 * RoCE fabrics configure PFC/ECN for, where v1 is a raw Ethernet frame.
 * Among v2 entries we prefer an IPv4-mapped address (the routable one on
 * typical clusters), then a global IPv6 address, then the link-local
 * fe80:: entry that exists on every RoCE port (the only one on a netdev
 * without an IP address, as in our Soft-RoCE test VM).  Every rank applies
 * the same rule, so ranks on alike-configured hosts pick the same kind. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tl_roce.h"

typedef enum {
    GID_EMPTY = 0,
    GID_UNKNOWN, /* in use, type not readable */
    GID_IB,
    GID_ROCE_V1,
    GID_ROCE_V2,
} gid_kind_t;

static const char *gid_kind_str(gid_kind_t k)
{
    switch (k) {
    case GID_IB: return "IB";
    case GID_ROCE_V1: return "RoCE v1";
    case GID_ROCE_V2: return "RoCE v2";
    case GID_UNKNOWN: return "type unknown";
    default: return "empty";
    }
}

static int gid_is_zero(const union ibv_gid *g)
{
    static const uint8_t zero[16];
    return memcmp(g->raw, zero, sizeof(zero)) == 0;
}

/* Kind from sysfs, for kernels or libraries without ibv_query_gid_ex. */
static gid_kind_t gid_kind_sysfs(const braid_roce_dev_t *dev, int index)
{
    char  path[256], line[32] = "";
    FILE *f;

    snprintf(path, sizeof(path),
             "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d", dev->name,
             (unsigned)dev->port, index);
    f = fopen(path, "r");
    if (f == NULL)
        return GID_UNKNOWN;
    if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0'; /* an unused entry reads as an error */
    fclose(f);
    if (strncmp(line, "RoCE v2", 7) == 0)
        return GID_ROCE_V2;
    if (strncmp(line, "IB/RoCE v1", 10) == 0)
        return dev->link_layer == IBV_LINK_LAYER_ETHERNET ? GID_ROCE_V1
                                                          : GID_IB;
    return GID_UNKNOWN;
}

static gid_kind_t gid_query(const braid_roce_dev_t *dev, int index,
                            union ibv_gid *gid)
{
#ifdef BRAID_ROCE_HAVE_GID_EX
    struct ibv_gid_entry e;
    int rc = ibv_query_gid_ex(dev->ctx, dev->port, (uint32_t)index, &e, 0);
    if (rc == 0) {
        *gid = e.gid;
        switch (e.gid_type) {
        case IBV_GID_TYPE_ROCE_V2: return GID_ROCE_V2;
        case IBV_GID_TYPE_ROCE_V1: return GID_ROCE_V1;
        default: return GID_IB;
        }
    }
    if (rc == ENODATA)
        return GID_EMPTY;
        /* Older kernel without the GID table ioctl: ask sysfs below. */
#endif
    if (ibv_query_gid(dev->ctx, dev->port, index, gid) != 0 ||
        gid_is_zero(gid))
        return GID_EMPTY;
    return gid_kind_sysfs(dev, index);
}

/* Higher is better; 0: not usable without an explicit index. */
static int gid_score(gid_kind_t kind, const union ibv_gid *g)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0,    0,
                                         0, 0, 0, 0, 0xff, 0xff};
    if (kind != GID_ROCE_V2)
        return 0;
    if (memcmp(g->raw, v4mapped, sizeof(v4mapped)) == 0)
        return 3;
    if (g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80)
        return 1; /* fe80::/10 link-local */
    return 2;
}

static void describe_gid(braid_roce_dev_t *dev, gid_kind_t kind)
{
    char addr[INET6_ADDRSTRLEN] = "?";

    inet_ntop(AF_INET6, dev->gid.raw, addr, sizeof(addr));
    snprintf(dev->gid_desc, sizeof(dev->gid_desc), "%d (%s, %s)",
             dev->gid_index, gid_kind_str(kind), addr);
}

static braid_status_t pick_gid(const braid_services_t *svc,
                               braid_roce_dev_t *dev, int table_len, char *why,
                               size_t why_len)
{
    int            forced, best = -1, best_score = 0;
    gid_kind_t     kind, best_kind = GID_EMPTY;
    union ibv_gid  gid;
    braid_status_t st = braid_roce_env_gid_index(svc, &forced, why, why_len);

    if (st != BRAID_OK)
        return st;
    if (forced >= 0) {
        if (forced >= table_len) {
            snprintf(why, why_len,
                     "BRAID_ROCE_GID_INDEX=%d: %s:%u has only "
                     "%d GID entries",
                     forced, dev->name, (unsigned)dev->port, table_len);
            return BRAID_ERR_UNAVAILABLE;
        }
        kind = gid_query(dev, forced, &gid);
        if (kind == GID_EMPTY) {
            snprintf(why, why_len,
                     "BRAID_ROCE_GID_INDEX=%d: that GID entry "
                     "of %s:%u is empty",
                     forced, dev->name, (unsigned)dev->port);
            return BRAID_ERR_UNAVAILABLE;
        }
        dev->gid_index = forced;
        dev->gid       = gid;
        describe_gid(dev, kind);
        return BRAID_OK;
    }
    if (dev->link_layer != IBV_LINK_LAYER_ETHERNET) {
        dev->gid_index = -1; /* InfiniBand: LID routed, no GRH */
        snprintf(dev->gid_desc, sizeof(dev->gid_desc), "none (LID %u)",
                 (unsigned)dev->lid);
        return BRAID_OK;
    }
    for (int i = 0; i < table_len; i++) {
        kind      = gid_query(dev, i, &gid);
        int score = gid_score(kind, &gid);
        if (score > best_score) {
            best       = i;
            best_score = score;
            best_kind  = kind;
            dev->gid   = gid;
        }
    }
    if (best < 0) {
        snprintf(why, why_len,
                 "%s:%u has no RoCE v2 GID (RoCE v1 only, or "
                 "no address on its netdev); set BRAID_ROCE_GID_INDEX to use "
                 "another entry",
                 dev->name, (unsigned)dev->port);
        return BRAID_ERR_UNAVAILABLE;
    }
    dev->gid_index = best;
    describe_gid(dev, best_kind);
    return BRAID_OK;
}

/* The wanted port (or the first active one) of an open device. */
static braid_status_t pick_port(braid_roce_dev_t *dev, int want_port,
                                struct ibv_port_attr *pa, char *why,
                                size_t why_len)
{
    struct ibv_device_attr da;
    int                    first, last;

    if (ibv_query_device(dev->ctx, &da) != 0) {
        snprintf(why, why_len, "%s: ibv_query_device failed: %s", dev->name,
                 strerror(errno));
        return BRAID_ERR_UNAVAILABLE;
    }
    if (want_port > da.phys_port_cnt) {
        snprintf(why, why_len,
                 "BRAID_ROCE_DEV=%s:%d: the device has %u "
                 "port(s)",
                 dev->name, want_port, (unsigned)da.phys_port_cnt);
        return BRAID_ERR_UNAVAILABLE;
    }
    first = want_port > 0 ? want_port : 1;
    last  = want_port > 0 ? want_port : da.phys_port_cnt;
    snprintf(why, why_len, "%s has no port", dev->name);
    for (int p = first; p <= last; p++) {
        if (ibv_query_port(dev->ctx, (uint8_t)p, pa) != 0) {
            snprintf(why, why_len, "%s:%d: ibv_query_port failed: %s",
                     dev->name, p, strerror(errno));
            continue;
        }
        if (pa->state == IBV_PORT_ACTIVE) {
            dev->port = (uint8_t)p;
            return BRAID_OK;
        }
        snprintf(why, why_len, "%s:%d is %s, not ACTIVE", dev->name, p,
                 ibv_port_state_str(pa->state));
    }
    return BRAID_ERR_UNAVAILABLE;
}

static void list_names(struct ibv_device **list, int n, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                         ibv_get_device_name(list[i]));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Opens list[i] and picks a port; on failure why says why. */
static braid_status_t try_device(struct ibv_device *d, int want_port,
                                 braid_roce_dev_t     *dev,
                                 struct ibv_port_attr *pa, char *why,
                                 size_t why_len)
{
    snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(d));
    dev->ctx = ibv_open_device(d);
    if (dev->ctx == NULL) {
        snprintf(why, why_len, "%s: ibv_open_device failed: %s", dev->name,
                 strerror(errno));
        return BRAID_ERR_UNAVAILABLE;
    }
    if (pick_port(dev, want_port, pa, why, why_len) == BRAID_OK)
        return BRAID_OK;
    ibv_close_device(dev->ctx);
    dev->ctx = NULL;
    return BRAID_ERR_UNAVAILABLE;
}

braid_status_t braid_roce_dev_open(const braid_services_t *svc,
                                   braid_roce_dev_t *dev, char *why,
                                   size_t why_len)
{
    struct ibv_device  **list = NULL;
    struct ibv_port_attr pa;
    char                 want[IBV_SYSFS_NAME_MAX], names[256];
    int                  n = 0, want_port = 0, found = 0;
    braid_status_t       st;

    memset(dev, 0, sizeof(*dev));
    dev->gid_index = -1;
    st = braid_roce_env_dev(svc, want, sizeof(want), &want_port, why, why_len);
    if (st != BRAID_OK)
        return st;
    errno = 0;
    list  = ibv_get_device_list(&n);
    if (list == NULL || n == 0) {
        /* ENOSYS: no kernel verbs at all (no /sys/class/infiniband). */
        snprintf(why, why_len,
                 "no RDMA device (ibv_get_device_list found "
                 "none%s%s; is rdma_rxe/mlx5 loaded?)",
                 list == NULL && errno ? ": " : "",
                 list == NULL && errno ? strerror(errno) : "");
        st = BRAID_ERR_UNAVAILABLE;
        goto out;
    }
    st = BRAID_ERR_UNAVAILABLE;
    for (int i = 0; i < n && st != BRAID_OK; i++) {
        if (want[0] && strcmp(ibv_get_device_name(list[i]), want) != 0)
            continue;
        found = 1;
        st    = try_device(list[i], want_port, dev, &pa, why, why_len);
    }
    if (want[0] && !found) {
        list_names(list, n, names, sizeof(names));
        snprintf(why, why_len,
                 "BRAID_ROCE_DEV=%s: no such RDMA device "
                 "(found: %s)",
                 want, names);
    } else if (st != BRAID_OK && !want[0] && n > 1) {
        char last[160];
        snprintf(last, sizeof(last), "%s", why);
        snprintf(why, why_len,
                 "no RDMA device with an active port (last: "
                 "%s)",
                 last);
    }
    if (st != BRAID_OK)
        goto out;

    dev->link_layer = pa.link_layer;
    dev->lid        = pa.lid;
    dev->mtu        = pa.active_mtu;
    dev->max_msg_sz = pa.max_msg_sz;
    if (dev->link_layer != IBV_LINK_LAYER_ETHERNET && dev->lid == 0) {
        snprintf(why, why_len,
                 "%s:%u is InfiniBand but has no LID (is a "
                 "subnet manager running?)",
                 dev->name, (unsigned)dev->port);
        st = BRAID_ERR_UNAVAILABLE;
        goto out;
    }
    st = pick_gid(svc, dev, pa.gid_tbl_len, why, why_len);
out:
    if (list != NULL)
        ibv_free_device_list(list);
    if (st != BRAID_OK)
        braid_roce_dev_close(dev);
    return st;
}

void braid_roce_dev_close(braid_roce_dev_t *dev)
{
    if (dev->ctx != NULL)
        ibv_close_device(dev->ctx);
    dev->ctx = NULL;
}
