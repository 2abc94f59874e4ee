/* The links, addresses, routes and qdiscs of an emulated cluster (see
 * netns.h), made by iproute2 in batch mode: one `ip` run for every
 * namespace and veth pair, one per namespace for its addresses and routes,
 * one `tc` run per namespace for its qdiscs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netns.h"

#define NS_LEN 64

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
        braid_netns_name(a, sizeof(a), net->owner, -1);
        fprintf(s.f, "netns add %s\n", a);
    }
    for (int h = 0; h < net->nhosts; h++) {
        braid_netns_name(a, sizeof(a), net->owner, h);
        fprintf(s.f, "netns add %s\n", a);
    }
    for (int h = 0; h < net->nhosts; h++) {
        braid_netns_name(a, sizeof(a), net->owner, h);
        if (net->o.kind == BRAID_NETNS_SWITCH) {
            braid_netns_name(b, sizeof(b), net->owner, -1);
            fprintf(s.f,
                    "link add eth0 netns %s type veth peer name p%d "
                    "netns %s\n",
                    a, h, b);
        } else if (net->nhosts > 1) {
            /* h's right end to h+1's left end; two hosts get two cables. */
            braid_netns_name(b, sizeof(b), net->owner, (h + 1) % net->nhosts);
            fprintf(s.f,
                    "link add right netns %s type veth peer name left "
                    "netns %s\n",
                    a, b);
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
    braid_netns_name(ns, sizeof(ns), net->owner, -1);
    return run_script(&s, "ip", ns, err, n);
}

/* Ring routes: each other host by the shorter way round, clockwise
 * ("right") when both ways are as long, with this host's address as
 * source, so that every packet carries host addresses only. */
static void ring_routes(FILE *f, const braid_netns_t *net, int h)
{
    int  nh = net->nhosts;
    char self[32], to[32], via[32];
    braid_netns_host_ip(self, sizeof(self), h);
    for (int j = 0; j < nh; j++) {
        if (j == h)
            continue;
        int d     = (j - h + nh) % nh;
        int right = 2 * d <= nh;
        braid_netns_host_ip(to, sizeof(to), j);
        braid_netns_host_ip(via, sizeof(via),
                            right ? (h + 1) % nh : (h - 1 + nh) % nh);
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
    braid_netns_host_ip(addr, sizeof(addr), h);
    fprintf(s.f, "link set lo up\n");
    if (net->o.kind == BRAID_NETNS_SWITCH) {
        fprintf(s.f, "addr add %s/24 dev eth0\nlink set eth0 up\n", addr);
    } else {
        /* A bridge without ports is an always-up interface that holds the
         * host's address (this kernel has no dummy links), and whose name
         * UCX_NET_DEVICES can give. */
        fprintf(s.f,
                "link add eth0 type bridge\nlink set eth0 up\n"
                "addr add %s/32 dev eth0\n",
                addr);
        if (net->nhosts > 1) {
            fprintf(s.f, "link set left up\nlink set right up\n");
            ring_routes(s.f, net, h);
        }
    }
    braid_netns_name(ns, sizeof(ns), net->owner, h);
    return run_script(&s, "ip", ns, err, n);
}

/* Forwarding on every ring host; reverse-path filtering off, since the
 * two directions between hosts half the ring apart take different ways. */
static int ring_sysctls(const braid_netns_t *net, int h, char *err, size_t n)
{
    static const char *keys[] = {"net/ipv4/ip_forward",
                                 "net/ipv4/conf/all/rp_filter",
                                 "net/ipv4/conf/default/rp_filter",
                                 "net/ipv4/conf/left/rp_filter",
                                 "net/ipv4/conf/right/rp_filter",
                                 "net/ipv4/conf/eth0/rp_filter"};
    static const char *vals[] = {"1", "0", "0", "0", "0", "0"};
    char               path[256];
    braid_netns_path(path, sizeof(path), net->owner, h);
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
        fprintf(f, "qdisc add dev %s root netem delay %ldus limit 100000", dev,
                net->o.delay_us);
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
    fprintf(f,
            "qdisc add dev %s root tbf rate %llubit burst %llu latency "
            "20ms\n",
            dev, (unsigned long long)r, (unsigned long long)burst);
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
        braid_netns_name(ns, sizeof(ns), net->owner, h);
        if (run_script(&s, "tc", ns, err, n) != 0) {
            if (net->o.delay_us > 0 && strstr(err, "qdisc kind is unknown"))
                snprintf(err, n,
                         "--link-delay needs the kernel's netem "
                         "qdisc (sch_netem), which this kernel does not "
                         "have, and no other qdisc can delay packets: run "
                         "without --link-delay, or on a kernel with "
                         "CONFIG_NET_SCH_NETEM");
            return -1;
        }
    }
    return 0;
}

int braid_netns_build(const braid_netns_t *net, char *err, size_t n)
{
    if (make_namespaces(net, err, n) != 0)
        return -1;
    if (net->o.kind == BRAID_NETNS_SWITCH && setup_switch_ns(net, err, n) != 0)
        return -1;
    for (int h = 0; h < net->nhosts; h++) {
        if (setup_host_ns(net, h, err, n) != 0)
            return -1;
        if (net->o.kind == BRAID_NETNS_RING &&
            ring_sysctls(net, h, err, n) != 0)
            return -1;
    }
    return shape_links(net, err, n);
}
