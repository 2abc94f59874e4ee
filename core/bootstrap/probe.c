/* Hop counts between hosts from the IP TTL of UDP probes.
 *
 * Every router (and every host that forwards, as on a cabled ring)
 * decrements the TTL of a packet it passes on; a switch does not.  So a
 * probe sent with TTL 64 that arrives with 62 crossed two forwarding hops.
 * That is what tells a cabled ring from a switch, it needs one datagram per
 * pair of hosts, and unlike a latency it does not depend on load.
 *
 * The lowest rank of each host (its leader) binds a UDP socket to the
 * address of its bootstrap connection, so probes take the network the
 * channel takes.  The addresses travel over the (authenticated) bootstrap
 * channel with a nonce of rank 0's, and a datagram without that nonce is
 * ignored.  Datagrams can be lost: probing goes in rounds, and after each
 * round every rank learns through the channel which leaders still miss
 * whose probe, and those are sent again (at most ROUNDS rounds). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/channel.h"
#include "bootstrap/probe.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "topo"
#define TTL_SENT 64
#define ROUNDS   12
#define ROUND_MS 40
#define MAGIC    "braidttl"

/* Where each rank's leader socket is (leaders only; ok = 0 elsewhere). */
typedef struct probe_addr {
    uint8_t  ok;
    uint8_t  family;
    uint16_t port; /* network order */
    uint8_t  addr[16];
} probe_addr_t;

typedef struct probe_msg {
    char     magic[8];
    uint8_t  nonce[8];
    uint32_t from, to; /* host numbers */
} probe_msg_t;

typedef struct probe {
    int           fd;
    int           node;
    int           nnodes;
    int           family;
    uint8_t       nonce[8];
    int16_t      *row;     /* [nnodes] hops of the probe from each host, -1 */
    probe_addr_t *leaders; /* [nnodes] */
} probe_t;

static void to_sockaddr(const probe_addr_t *a, struct sockaddr_storage *ss,
                        socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (a->family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family         = AF_INET;
        s4->sin_port           = a->port;
        memcpy(&s4->sin_addr, a->addr, 4);
        *len = sizeof(*s4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family         = AF_INET6;
        s6->sin6_port           = a->port;
        memcpy(&s6->sin6_addr, a->addr, 16);
        *len = sizeof(*s6);
    }
}

/* A leader's socket, on the address of the bootstrap connection. */
static int open_socket(probe_t *p, int via, probe_addr_t *me)
{
    struct sockaddr_storage ss;
    socklen_t               len = sizeof(ss);
    int                     on = 1, ttl = TTL_SENT;
    if (getsockname(via, (struct sockaddr *)&ss, &len) != 0 ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
        return -1;
    p->family = ss.ss_family;
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    int fd =
        socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    /* IPv4 options also apply to v4-mapped traffic on an IPv6 socket. */
    (void)setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &on, sizeof(on));
    (void)setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
    if (ss.ss_family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &on, sizeof(on));
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl,
                         sizeof(ttl));
    }
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd);
        return -1;
    }
    me->ok     = 1;
    me->family = (uint8_t)ss.ss_family;
    if (ss.ss_family == AF_INET) {
        me->port = ((struct sockaddr_in *)&ss)->sin_port;
        memcpy(me->addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    } else {
        me->port = ((struct sockaddr_in6 *)&ss)->sin6_port;
        memcpy(me->addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    }
    return fd;
}

static void send_probe(const probe_t *p, int to)
{
    struct sockaddr_storage ss;
    socklen_t               len;
    probe_msg_t             m;
    memcpy(m.magic, MAGIC, sizeof(m.magic));
    memcpy(m.nonce, p->nonce, sizeof(m.nonce));
    m.from = (uint32_t)p->node;
    m.to   = (uint32_t)to;
    to_sockaddr(&p->leaders[to], &ss, &len);
    /* A lost datagram is sent again next round. */
    (void)!sendto(p->fd, &m, sizeof(m), MSG_DONTWAIT, (struct sockaddr *)&ss,
                  len);
}

/* The TTL a datagram arrived with, or -1. */
static int arrived_ttl(struct msghdr *mh)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL;
         c                 = CMSG_NXTHDR(mh, c)) {
        int v;
        if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) ||
            (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT)) {
            memcpy(&v, CMSG_DATA(c), sizeof(v));
            return v;
        }
    }
    return -1;
}

/* Reads every datagram waiting; returns how many hosts are still unheard. */
static int drain(probe_t *p)
{
    for (;;) {
        probe_msg_t   m;
        char          ctl[256];
        struct iovec  iov = {.iov_base = &m, .iov_len = sizeof(m)};
        struct msghdr mh  = {.msg_iov        = &iov,
                             .msg_iovlen     = 1,
                             .msg_control    = ctl,
                             .msg_controllen = sizeof(ctl)};
        ssize_t       n   = recvmsg(p->fd, &mh, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        int ttl = arrived_ttl(&mh);
        if (n != (ssize_t)sizeof(m) || memcmp(m.magic, MAGIC, 8) != 0 ||
            memcmp(m.nonce, p->nonce, 8) != 0 || m.to != (uint32_t)p->node ||
            m.from >= (uint32_t)p->nnodes || ttl < 0 || ttl > TTL_SENT)
            continue;
        int16_t hops = (int16_t)(TTL_SENT - ttl);
        if (p->row[m.from] < 0 || hops < p->row[m.from])
            p->row[m.from] = hops;
    }
    int missing = 0;
    for (int j = 0; j < p->nnodes; j++)
        missing += p->row[j] < 0;
    return missing;
}

static void wait_round(probe_t *p, double until)
{
    while (drain(p) > 0) {
        double left = until - braid_now_s();
        if (left <= 0)
            return;
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        (void)poll(&pfd, 1, (int)(left * 1000.0) + 1);
    }
}

braid_status_t braid_bootstrap_hops(braid_bootstrap_t *bs,
                                    const int *node_of_rank, int nnodes,
                                    int *hops, int *probed)
{
    int size = braid_bootstrap_size(bs), rank = braid_bootstrap_rank(bs);
    braid_status_t st = BRAID_OK;
    probe_t       p = {.fd = -1, .node = node_of_rank[rank], .nnodes = nnodes};
    probe_addr_t  me;
    probe_addr_t *all   = NULL;
    int16_t      *rows  = NULL;
    uint8_t      *heard = NULL, *mine = NULL;

    *probed = 0;
    for (int i = 0; i < nnodes * nnodes; i++)
        hops[i] = i / nnodes == i % nnodes ? 0 : -1;
    if (nnodes <= 1 || nnodes > BRAID_PROBE_MAX_NODES)
        return BRAID_OK;
    int leader = 1;
    for (int r = 0; r < rank; r++)
        leader &= node_of_rank[r] != p.node;

    memset(&me, 0, sizeof(me));
    all       = calloc((size_t)size, sizeof(*all));
    p.leaders = calloc((size_t)nnodes, sizeof(*p.leaders));
    p.row     = malloc((size_t)nnodes * sizeof(*p.row));
    rows      = malloc((size_t)size * (size_t)nnodes * sizeof(*rows));
    heard     = malloc((size_t)size * (size_t)nnodes);
    mine      = malloc((size_t)nnodes);
    if (all == NULL || p.leaders == NULL || p.row == NULL || rows == NULL ||
        heard == NULL || mine == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "topology probe: out of memory");
        goto out;
    }
    for (int j = 0; j < nnodes; j++)
        p.row[j] = j == p.node ? 0 : -1;
    if (leader && (p.fd = open_socket(&p, braid_bs_any_fd(bs), &me)) < 0)
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "rank %d: no probe socket: %s",
                  rank, strerror(errno));
    if (rank == 0 && (st = braid_random_bytes(p.nonce, 8)) != BRAID_OK)
        goto out;
    if ((st = braid_bootstrap_bcast(bs, p.nonce, 8, 0)) != BRAID_OK ||
        (st = braid_bootstrap_allgather(bs, &me, all, sizeof(me))) != BRAID_OK)
        goto out;
    for (int r = 0; r < size; r++)
        if (all[r].ok)
            p.leaders[node_of_rank[r]] = all[r];

    /* heard[r * nnodes + j]: rank r (a leader) got host j's probe. */
    memset(heard, 0, (size_t)size * (size_t)nnodes);
    for (int round = 0; round < ROUNDS; round++) {
        int done = 1;
        for (int j = 0; j < nnodes && p.fd >= 0; j++) {
            int rj = -1; /* host j's leader */
            for (int r = 0; r < size && rj < 0; r++)
                if (node_of_rank[r] == j)
                    rj = r;
            if (j != p.node && p.leaders[j].ok && !heard[rj * nnodes + p.node])
                send_probe(&p, j);
        }
        if (p.fd >= 0)
            wait_round(&p, braid_now_s() + ROUND_MS / 1000.0);
        for (int j = 0; j < nnodes; j++)
            mine[j] = p.fd < 0 || p.row[j] >= 0 || !p.leaders[j].ok;
        if ((st = braid_bootstrap_allgather(bs, mine, heard,
                                            (size_t)nnodes)) != BRAID_OK)
            goto out;
        for (int i = 0; i < size * nnodes; i++)
            done &= heard[i] != 0;
        if (done)
            break;
    }
    if (p.fd < 0)
        for (int j = 0; j < nnodes; j++)
            p.row[j] = -1;
    if ((st = braid_bootstrap_allgather(
             bs, p.row, rows, (size_t)nnodes * sizeof(*rows))) != BRAID_OK)
        goto out;
    for (int r = 0; r < size; r++) {
        int b = node_of_rank[r];
        if (!all[r].ok)
            continue;
        for (int a = 0; a < nnodes; a++)
            if (a != b)
                hops[a * nnodes + b] =
                    rows[(size_t)r * (size_t)nnodes + (size_t)a];
    }
    *probed = 1;
out:
    if (p.fd >= 0)
        close(p.fd);
    free(all);
    free(p.leaders);
    free(p.row);
    free(rows);
    free(heard);
    free(mine);
    return st;
}
