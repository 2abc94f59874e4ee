/* Building and removing an emulated cluster (see netns.h). */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netns.h"

#define NS_LEN 64

void braid_netns_name(char *buf, size_t n, pid_t owner, int host)
{
    if (host < 0)
        snprintf(buf, n, "%s%ld-sw", BRAID_NETNS_PREFIX, (long)owner);
    else
        snprintf(buf, n, "%s%ld-h%d", BRAID_NETNS_PREFIX, (long)owner, host);
}

void braid_netns_path(char *buf, size_t n, pid_t owner, int host)
{
    char name[NS_LEN];
    braid_netns_name(name, sizeof(name), owner, host);
    snprintf(buf, n, "%s/%s", BRAID_NETNS_DIR, name);
}

/* 10.77.0.<h+1>: every cluster has its own namespaces, so clusters of
 * several braidruns never see each other's addresses. */
void braid_netns_host_ip(char *buf, size_t n, int h)
{
    snprintf(buf, n, "10.77.0.%d", h + 1);
}

/* 1 when the interface is running (up with carrier), 0 when not yet, -1
 * when it cannot be asked.  The socket must be made inside the namespace. */
static int if_running(int sock, const char *dev)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0)
        return -1;
    return (ifr.ifr_flags & IFF_RUNNING) != 0;
}

typedef struct {
    const braid_netns_t *net;
    int                  host;
} host_arg_t;

/* Inside a host: waits for its links (the socket must be made inside). */
static int wait_host(void *arg, char *err, size_t n)
{
    static const char *ring_devs[] = {"eth0", "left", "right"};
    const host_arg_t  *a           = arg;
    int                ring        = a->net->o.kind == BRAID_NETNS_RING;
    int                ndev        = ring && a->net->nhosts > 1 ? 3 : 1;
    int                sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int                rc   = 0;
    for (int d = 0; d < ndev && rc == 0; d++) {
        int waited_ms = 0, up;
        while ((up = if_running(sock, ring_devs[d])) == 0 &&
               waited_ms < 5000) {
            usleep(10000);
            waited_ms += 10;
        }
        if (up != 1) {
            snprintf(err, n, "%s of host %d is not running after 5 s%s%s",
                     ring_devs[d], a->host, up < 0 ? ": " : "",
                     up < 0 ? strerror(errno) : "");
            rc = -1;
        }
    }
    if (sock >= 0)
        close(sock);
    return rc;
}

/* The kernel reports a new link's carrier up to a second late (linkwatch),
 * and until then UCX does not list the interface at all: wait for every
 * host's links before any rank starts. */
static int wait_running(const braid_netns_t *net, char *err, size_t n)
{
    for (int h = 0; h < net->nhosts; h++) {
        host_arg_t a = {net, h};
        if (braid_netns_in_host(net, h, wait_host, &a, err, n) != 0)
            return -1;
    }
    return 0;
}

int braid_netns_create(braid_netns_t *net, const braid_netns_opts_t *o,
                       char *err, size_t n)
{
    memset(net, 0, sizeof(*net));
    net->o         = *o;
    net->owner     = getpid();
    net->reaper_fd = -1;
    net->nhosts    = (o->nranks + o->ppn - 1) / o->ppn;
    if (geteuid() != 0) {
        snprintf(err, n,
                 "--netns needs root: it creates network namespaces, "
                 "veth links and qdiscs (CAP_SYS_ADMIN, CAP_NET_ADMIN); run "
                 "braidrun as root, e.g. with sudo");
        return -1;
    }
    if (net->nhosts > BRAID_NETNS_MAX_HOSTS) {
        snprintf(err, n,
                 "--netns: %d hosts (%d ranks, %d per host); at most "
                 "%d",
                 net->nhosts, o->nranks, o->ppn, BRAID_NETNS_MAX_HOSTS);
        return -1;
    }
    braid_netns_remove_stale();
    mkdir(BRAID_NETNS_DIR, 0755); /* `ip netns add` also makes it */
    if (braid_netns_start_reaper(net, err, n) != 0)
        return -1;
    net->created = 1;
    if (braid_netns_build(net, err, n) != 0 || wait_running(net, err, n) != 0)
        goto fail;
    return 0;
fail:
    braid_netns_destroy(net);
    return -1;
}

void braid_netns_destroy(braid_netns_t *net)
{
    if (net->created)
        braid_netns_remove_owned(net->owner);
    net->created = 0;
    if (net->reaper_fd >= 0) {
        char lock[64];
        snprintf(lock, sizeof(lock), "/run/braid-netns-%ld.lock",
                 (long)net->owner);
        unlink(lock);
        close(net->reaper_fd); /* the reaper wakes, finds nothing, exits */
        net->reaper_fd = -1;
    }
    if (net->reaper > 0) {
        while (waitpid(net->reaper, NULL, 0) < 0 && errno == EINTR)
            ;
        net->reaper = 0;
    }
}

int braid_netns_in_host(const braid_netns_t *net, int                    h,
                        int (*fn)(void *arg, char *err, size_t n), void *arg,
                        char *err, size_t n)
{
    char path[256];
    braid_netns_path(path, sizeof(path), net->owner, h);
    return braid_netns_within(path, fn, arg, err, n);
}

int braid_netns_enter(const braid_netns_t *net, int rank, char *err, size_t n)
{
    char path[256], host[32];
    int  h = rank / net->o.ppn;
    braid_netns_path(path, sizeof(path), net->owner, h);
    if (braid_netns_setns_path(path) != 0) {
        snprintf(err, n, "cannot enter %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(host, sizeof(host), "host%d", h);
    setenv("BRAID_HOSTNAME", host, 1);
    /* UCX over the emulated network: its TCP transport on eth0 (not lo,
     * which no other host can reach), and nothing through shared memory,
     * which would join emulated hosts behind the network's back. */
    setenv("UCX_NET_DEVICES", "eth0", 0);
    setenv("UCX_TLS", "tcp", 0);
    return 0;
}

/* 1 when a UCX_TLS list may let UCX use shared memory (or a transport
 * that does): everything but a plain list of tcp, self and RDMA names. */
static int tls_may_share_memory(const char *tls)
{
    static const char *net_only[] = {"tcp",  "self", "rc",   "ud",
                                     "dc",   "rc_v", "rc_x", "ud_v",
                                     "ud_x", "dc_x", "ib"};
    char               copy[256];
    if (tls[0] == '^' || strlen(tls) >= sizeof(copy))
        return 1;
    snprintf(copy, sizeof(copy), "%s", tls);
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        int ok = 0;
        for (size_t i = 0; i < sizeof(net_only) / sizeof(net_only[0]); i++)
            ok |= strcmp(t, net_only[i]) == 0;
        if (!ok)
            return 1;
    }
    return 0;
}

void braid_netns_describe(const braid_netns_t *net, char *buf, size_t n)
{
    char        rate[64] = "links not rate-limited", delay[48] = "";
    char        note[200] = "";
    const char *tls       = getenv("UCX_TLS");
    if (net->o.rate_bps > 0)
        snprintf(rate, sizeof(rate), "each host sends at %.6g Mbit/s",
                 (double)net->o.rate_bps / 1e6);
    if (net->o.delay_us > 0)
        snprintf(delay, sizeof(delay), ", %ld us delay", net->o.delay_us);
    if (tls != NULL && tls_may_share_memory(tls))
        snprintf(note, sizeof(note),
                 "; note: your UCX_TLS=%.60s may let UCX "
                 "join emulated hosts through shared memory",
                 tls);
    snprintf(buf, n,
             "emulated %s of %d host%s (%d rank%s each, 10.77.0.1"
             "-%d), %s%s%s",
             net->o.kind == BRAID_NETNS_SWITCH ? "switch" : "ring",
             net->nhosts, net->nhosts == 1 ? "" : "s", net->o.ppn,
             net->o.ppn == 1 ? "" : "s", net->nhosts, rate, delay, note);
}
