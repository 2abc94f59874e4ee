/* Building and removing an emulated cluster (see netns.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netns.h"

#define NS_LEN 64

static void ns_name(char *buf, size_t n, pid_t owner, int host)
{
    if (host < 0)
        snprintf(buf, n, "%s%ld-sw", BRAID_NETNS_PREFIX, (long)owner);
    else
        snprintf(buf, n, "%s%ld-h%d", BRAID_NETNS_PREFIX, (long)owner, host);
}

/* 10.77.0.<h+1>: every cluster has its own namespaces, so clusters of
 * several braidruns never see each other's addresses. */
static void host_addr(char *buf, size_t n, int host)
{
    snprintf(buf, n, "10.77.0.%d", host + 1);
}

/* A growing script; a failed allocation leaves it NULL, which the caller
 * reports. */
typedef struct {
    char  *text;
    size_t len;
    FILE  *f;
} script_t;

static int script_open(script_t *s)
{
    s->text = NULL;
    s->len  = 0;
    s->f    = open_memstream(&s->text, &s->len);
    return s->f != NULL ? 0 : -1;
}

static char *script_close(script_t *s)
{
    if (s->f != NULL && fclose(s->f) != 0) {
        free(s->text);
        s->text = NULL;
    }
    s->f = NULL;
    return s->text;
}

static int run_script(script_t *s, const char *tool, const char *ns, char *err,
                      size_t n)
{
    char *text = script_close(s);
    if (text == NULL) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    int rc = text[0] ? braid_netns_batch(tool, ns, text, err, n) : 0;
    free(text);
    return rc;
}

/* Namespaces, and the veth pairs between them (created straight into
 * their namespaces, so that no name is ever taken in braidrun's). */
static int make_namespaces(const braid_netns_t *net, char *err, size_t n)
{
    script_t s;
    char     a[NS_LEN], b[NS_LEN];
    if (script_open(&s) != 0)
        goto oom;
    if (net->o.kind == BRAID_NETNS_SWITCH) {
        ns_name(a, sizeof(a), net->owner, -1);
        fprintf(s.f, "netns add %s\n", a);
    }
    for (int h = 0; h < net->nhosts; h++) {
        ns_name(a, sizeof(a), net->owner, h);
        fprintf(s.f, "netns add %s\n", a);
    }
    for (int h = 0; h < net->nhosts; h++) {
        ns_name(a, sizeof(a), net->owner, h);
        if (net->o.kind == BRAID_NETNS_SWITCH) {
            ns_name(b, sizeof(b), net->owner, -1);
            fprintf(s.f, "link add eth0 netns %s type veth peer name p%d "
                    "netns %s\n", a, h, b);
        } else if (net->nhosts > 1) {
            /* h's right end to h+1's left end; two hosts get two cables. */
            ns_name(b, sizeof(b), net->owner, (h + 1) % net->nhosts);
            fprintf(s.f, "link add right netns %s type veth peer name left "
                    "netns %s\n", a, b);
        }
    }
    return run_script(&s, "ip", NULL, err, n);
oom:
    snprintf(err, n, "out of memory");
    return -1;
}

static int setup_switch_ns(const braid_netns_t *net, char *err, size_t n)
{
    script_t s;
    char     ns[NS_LEN];
    if (script_open(&s) != 0) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    fprintf(s.f, "link set lo up\nlink add br0 type bridge\nlink set br0 "
            "up\n");
    for (int h = 0; h < net->nhosts; h++)
        fprintf(s.f, "link set p%d master br0\nlink set p%d up\n", h, h);
    ns_name(ns, sizeof(ns), net->owner, -1);
    return run_script(&s, "ip", ns, err, n);
}

/* Ring routes: each other host by the shorter way round, clockwise
 * ("right") when both ways are as long, with this host's address as
 * source, so that every packet carries host addresses only. */
static void ring_routes(FILE *f, const braid_netns_t *net, int h)
{
    int  nh = net->nhosts;
    char self[32], to[32], via[32];
    host_addr(self, sizeof(self), h);
    for (int j = 0; j < nh; j++) {
        if (j == h)
            continue;
        int d     = (j - h + nh) % nh;
        int right = 2 * d <= nh;
        host_addr(to, sizeof(to), j);
        host_addr(via, sizeof(via), right ? (h + 1) % nh : (h - 1 + nh) % nh);
        fprintf(f, "route add %s/32 via %s dev %s onlink src %s\n", to, via,
                right ? "right" : "left", self);
    }
}

static int setup_host_ns(const braid_netns_t *net, int h, char *err, size_t n)
{
    script_t s;
    char     ns[NS_LEN], addr[32];
    if (script_open(&s) != 0) {
        snprintf(err, n, "out of memory");
        return -1;
    }
    host_addr(addr, sizeof(addr), h);
    fprintf(s.f, "link set lo up\n");
    if (net->o.kind == BRAID_NETNS_SWITCH) {
        fprintf(s.f, "addr add %s/24 dev eth0\nlink set eth0 up\n", addr);
    } else {
        /* A bridge without ports is an always-up interface that holds the
         * host's address (this kernel has no dummy links), and whose name
         * UCX_NET_DEVICES can give. */
        fprintf(s.f, "link add eth0 type bridge\nlink set eth0 up\n"
                "addr add %s/32 dev eth0\n", addr);
        if (net->nhosts > 1) {
            fprintf(s.f, "link set left up\nlink set right up\n");
            ring_routes(s.f, net, h);
        }
    }
    ns_name(ns, sizeof(ns), net->owner, h);
    return run_script(&s, "ip", ns, err, n);
}

/* Forwarding on every ring host; reverse-path filtering off, since the
 * two directions between hosts half the ring apart take different ways. */
static int ring_sysctls(const braid_netns_t *net, int h, char *err, size_t n)
{
    static const char *keys[] = {
        "net/ipv4/ip_forward", "net/ipv4/conf/all/rp_filter",
        "net/ipv4/conf/default/rp_filter", "net/ipv4/conf/left/rp_filter",
        "net/ipv4/conf/right/rp_filter", "net/ipv4/conf/eth0/rp_filter"};
    static const char *vals[] = {"1", "0", "0", "0", "0", "0"};
    char ns[NS_LEN], path[256];
    ns_name(ns, sizeof(ns), net->owner, h);
    snprintf(path, sizeof(path), "%s/%s", BRAID_NETNS_DIR, ns);
    int nkeys = net->nhosts > 1 ? 6 : 1;
    for (int k = 0; k < nkeys; k++)
        if (braid_netns_sysctl(path, keys[k], vals[k], err, n) != 0)
            return -1;
    return 0;
}

/* The qdisc of one link end: tbf for a rate; netem for a delay (and then
 * its own rate). */
static void qdisc_line(FILE *f, const braid_netns_t *net, const char *dev)
{
    uint64_t r = net->o.rate_bps;
    if (net->o.delay_us > 0) {
        fprintf(f, "qdisc add dev %s root netem delay %ldus limit 100000",
                dev, net->o.delay_us);
        if (r > 0)
            fprintf(f, " rate %llubit", (unsigned long long)r);
        fprintf(f, "\n");
        return;
    }
    /* A bucket of at least 64 KiB passes a whole GSO packet of veth in one
     * piece (a smaller one makes tbf cut it up), and of a millisecond's
     * worth at high rates, so that the timer need not fire per packet. */
    uint64_t burst = r / 8 / 1000;
    if (burst < 65536)
        burst = 65536;
    fprintf(f, "qdisc add dev %s root tbf rate %llubit burst %llu latency "
            "20ms\n", dev, (unsigned long long)r, (unsigned long long)burst);
}

static int shape_links(const braid_netns_t *net, char *err, size_t n)
{
    char ns[NS_LEN];
    if (net->o.rate_bps == 0 && net->o.delay_us == 0)
        return 0;
    for (int h = -1; h < net->nhosts; h++) {
        script_t s;
        if (h < 0 && net->o.kind != BRAID_NETNS_SWITCH)
            continue;
        if (script_open(&s) != 0) {
            snprintf(err, n, "out of memory");
            return -1;
        }
        if (h < 0) {
            for (int p = 0; p < net->nhosts; p++) {
                char dev[16];
                snprintf(dev, sizeof(dev), "p%d", p);
                qdisc_line(s.f, net, dev);
            }
        } else if (net->o.kind == BRAID_NETNS_SWITCH) {
            qdisc_line(s.f, net, "eth0");
        } else if (net->nhosts > 1) {
            qdisc_line(s.f, net, "left");
            qdisc_line(s.f, net, "right");
        }
        ns_name(ns, sizeof(ns), net->owner, h);
        if (run_script(&s, "tc", ns, err, n) != 0) {
            if (net->o.delay_us > 0 && strstr(err, "qdisc kind is unknown"))
                snprintf(err, n, "--link-delay needs the kernel's netem "
                         "qdisc (sch_netem), which this kernel does not "
                         "have, and no other qdisc can delay packets: run "
                         "without --link-delay, or on a kernel with "
                         "CONFIG_NET_SCH_NETEM");
            return -1;
        }
    }
    return 0;
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

/* The kernel reports a new link's carrier up to a second late (linkwatch),
 * and until then UCX does not list the interface at all: wait for every
 * host's links before any rank starts. */
static int wait_running(const braid_netns_t *net, char *err, size_t n)
{
    static const char *ring_devs[] = {"eth0", "left", "right"};
    static const char *sw_devs[]   = {"eth0"};
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int rc   = 0;
    if (home < 0) {
        snprintf(err, n, "open /proc/self/ns/net: %s", strerror(errno));
        return -1;
    }
    for (int h = 0; h < net->nhosts && rc == 0; h++) {
        char ns[NS_LEN], path[256];
        ns_name(ns, sizeof(ns), net->owner, h);
        snprintf(path, sizeof(path), "%s/%s", BRAID_NETNS_DIR, ns);
        if (braid_netns_setns_path(path) != 0) {
            snprintf(err, n, "cannot enter %s: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int ndev = net->o.kind == BRAID_NETNS_SWITCH ? 1
                   : net->nhosts > 1                 ? 3
                                                     : 1;
        for (int d = 0; d < ndev && rc == 0; d++) {
            const char *dev = net->o.kind == BRAID_NETNS_SWITCH ? sw_devs[d]
                                                               : ring_devs[d];
            int waited_ms = 0, up;
            while ((up = if_running(sock, dev)) == 0 && waited_ms < 5000) {
                usleep(10000);
                waited_ms += 10;
            }
            if (up != 1) {
                snprintf(err, n, "%s of %s is not running after 5 s%s%s",
                         dev, ns, up < 0 ? ": " : "",
                         up < 0 ? strerror(errno) : "");
                rc = -1;
            }
        }
        if (sock >= 0)
            close(sock);
    }
    if (setns(home, CLONE_NEWNET) != 0 && rc == 0) {
        snprintf(err, n, "cannot return to braidrun's namespace: %s",
                 strerror(errno));
        rc = -1;
    }
    close(home);
    return rc;
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
        snprintf(err, n, "--netns needs root: it creates network namespaces, "
                 "veth links and qdiscs (CAP_SYS_ADMIN, CAP_NET_ADMIN); run "
                 "braidrun as root, e.g. with sudo");
        return -1;
    }
    if (net->nhosts > BRAID_NETNS_MAX_HOSTS) {
        snprintf(err, n, "--netns: %d hosts (%d ranks, %d per host); at most "
                 "%d", net->nhosts, o->nranks, o->ppn, BRAID_NETNS_MAX_HOSTS);
        return -1;
    }
    braid_netns_remove_stale();
    mkdir(BRAID_NETNS_DIR, 0755); /* `ip netns add` also makes it */
    if (braid_netns_start_reaper(net, err, n) != 0)
        return -1;
    net->created = 1;
    if (make_namespaces(net, err, n) != 0)
        goto fail;
    if (o->kind == BRAID_NETNS_SWITCH && setup_switch_ns(net, err, n) != 0)
        goto fail;
    for (int h = 0; h < net->nhosts; h++) {
        if (setup_host_ns(net, h, err, n) != 0)
            goto fail;
        if (o->kind == BRAID_NETNS_RING && ring_sysctls(net, h, err, n) != 0)
            goto fail;
    }
    if (shape_links(net, err, n) != 0 || wait_running(net, err, n) != 0)
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

int braid_netns_listener(const braid_netns_t *net, char *addr, size_t n,
                         char *err, size_t errn)
{
    char ns[NS_LEN], path[256], ip[32];
    ns_name(ns, sizeof(ns), net->owner, 0);
    snprintf(path, sizeof(path), "%s/%s", BRAID_NETNS_DIR, ns);
    host_addr(ip, sizeof(ip), 0);
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0 || braid_netns_setns_path(path) != 0) {
        snprintf(err, errn, "cannot enter %s: %s", path, strerror(errno));
        if (home >= 0)
            close(home);
        return -1;
    }
    /* A socket stays in the namespace it was made in. */
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t          len = sizeof(sa);
    int                one = 1;
    inet_pton(AF_INET, ip, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        snprintf(err, errn, "cannot listen on %s in %s: %s", ip, ns,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    if (setns(home, CLONE_NEWNET) != 0 && fd >= 0) {
        snprintf(err, errn, "cannot return to braidrun's namespace: %s",
                 strerror(errno));
        close(fd);
        fd = -1;
    }
    close(home);
    if (fd >= 0)
        snprintf(addr, n, "%s:%d", ip, ntohs(sa.sin_port));
    return fd;
}

int braid_netns_enter(const braid_netns_t *net, int rank, char *err, size_t n)
{
    char ns[NS_LEN], path[256], host[32];
    int  h = rank / net->o.ppn;
    ns_name(ns, sizeof(ns), net->owner, h);
    snprintf(path, sizeof(path), "%s/%s", BRAID_NETNS_DIR, ns);
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

void braid_netns_describe(const braid_netns_t *net, char *buf, size_t n)
{
    char rate[64] = "not rate-limited", delay[48] = "";
    if (net->o.rate_bps > 0)
        snprintf(rate, sizeof(rate), "links %.6g Mbit/s each way",
                 (double)net->o.rate_bps / 1e6);
    if (net->o.delay_us > 0)
        snprintf(delay, sizeof(delay), ", %ld us delay", net->o.delay_us);
    snprintf(buf, n, "emulated %s of %d host%s (%d rank%s each, 10.77.0.1"
             "-%d), %s%s", net->o.kind == BRAID_NETNS_SWITCH ? "switch"
                                                             : "ring",
             net->nhosts, net->nhosts == 1 ? "" : "s", net->o.ppn,
             net->o.ppn == 1 ? "" : "s", net->nhosts, rate, delay);
}
