/* Emulated multi-host clusters for braidrun --netns.
 *
 * Every emulated host is a Linux network namespace with one address,
 * 10.77.0.<h+1>, on an interface named eth0:
 *   switch  each host's eth0 is one end of a veth pair whose other end is a
 *           port of one bridge (in a namespace of its own): every pair of
 *           hosts is one bridge away, as behind an Ethernet switch;
 *   ring    host h is cabled to h-1 and h+1 only (veth pairs "left" and
 *           "right"), its address sits on a port-less bridge eth0, and
 *           every host forwards IP: traffic to a host d links away crosses
 *           the d-1 hosts in between, each decrementing the TTL, along the
 *           shorter way round (clockwise, "right", when both are as long).
 * With a link rate, every direction of every link is shaped by a tbf qdisc
 * on the sending end (so a link is full duplex); with a link delay, by
 * netem, where the kernel has it.
 *
 * Cleanup survives anything that can happen to braidrun: the namespaces are
 * named braid-<braidrun's pid>-*, and every link and qdisc lives inside
 * them, so removing the namespaces removes everything.  braidrun removes
 * them when it ends; a reaper process it forks first removes them when
 * braidrun dies without doing so (SIGKILL); and every braidrun --netns
 * starts by removing those of braidruns that no longer run. */
#ifndef BRAID_TOOLS_NETNS_H
#define BRAID_TOOLS_NETNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BRAID_NETNS_MAX_HOSTS 250
#define BRAID_NETNS_DIR       "/run/netns"
#define BRAID_NETNS_PREFIX    "braid-"

typedef enum { BRAID_NETNS_SWITCH, BRAID_NETNS_RING } braid_netns_kind_t;

typedef struct braid_netns_opts {
    braid_netns_kind_t kind;
    int                nranks;
    int                ppn; /* ranks per host: host of rank r = r / ppn */
    uint64_t rate_bps;      /* bits per second per link direction; 0: none */
    long     delay_us;      /* one-way delay per link; 0: none */
} braid_netns_opts_t;

typedef struct braid_netns {
    braid_netns_opts_t o;
    int                nhosts;
    pid_t              owner;     /* braidrun's pid, in every name */
    pid_t              reaper;    /* 0 when none */
    int                reaper_fd; /* write end; its EOF wakes the reaper */
    int                created;   /* namespaces may exist: remove them */
} braid_netns_t;

/* braidrun's options for the cluster, as getopt_long entries (their
 * values are the codes below). */
enum {
    BRAID_NETNS_OPT_KIND = 1000, /* --netns switch|ring */
    BRAID_NETNS_OPT_PPN,         /* --ranks-per-host K */
    BRAID_NETNS_OPT_RATE,        /* --link-rate RATE */
    BRAID_NETNS_OPT_DELAY,       /* --link-delay US */
};
#define BRAID_NETNS_LONGOPTS                                                  \
    {"netns", required_argument, NULL, BRAID_NETNS_OPT_KIND},                 \
        {"ranks-per-host", required_argument, NULL, BRAID_NETNS_OPT_PPN},     \
        {"link-rate", required_argument, NULL, BRAID_NETNS_OPT_RATE},         \
    {                                                                         \
        "link-delay", required_argument, NULL, BRAID_NETNS_OPT_DELAY          \
    }
#define BRAID_NETNS_USAGE                                                     \
    "  --netns T       run on an emulated cluster of network namespaces "     \
    "(root):\n"                                                               \
    "                  'switch' (hosts on one bridge) or 'ring' (hosts "      \
    "cabled\n"                                                                \
    "                  to their neighbours, forwarding for the others)\n"     \
    "  --ranks-per-host K  ranks per emulated host (default 1)\n"             \
    "  --link-rate R   what each host may send: 100mbit, 1gbit, ...\n"        \
    "  --link-delay US one-way delay per link (needs the kernel's netem)\n"

/* netns_opts.c.  Each returns 0, or -1 with a message in err naming the
 * option, the value and the position of the fault. */
/* One of the options above into o. */
int braid_netns_option(braid_netns_opts_t *o, int code, const char *arg,
                       char *err, size_t n);
int braid_netns_parse_kind(braid_netns_kind_t *kind, const char *s, char *err,
                           size_t n);
/* "100mbit", "1gbit", "2.5gbit", "800kbit", "1000000bit" (decimal, bits). */
int braid_netns_parse_rate(uint64_t *bps, const char *s, char *err, size_t n);
/* Microseconds, an integer 0..10 s. */
int braid_netns_parse_delay(long *us, const char *s, char *err, size_t n);

/* netns.c.  Builds the cluster (root only; a clear message otherwise).
 * Returns 0, or -1 with the reason in err (whatever was built is removed). */
int braid_netns_create(braid_netns_t *net, const braid_netns_opts_t *o,
                       char *err, size_t n);
/* Removes the cluster and stops the reaper.  Idempotent. */
void braid_netns_destroy(braid_netns_t *net);
/* Runs fn inside host h's namespace (braid_netns_within): rank 0's
 * listener is made in host 0, on the address braid_netns_host_ip gives. */
int braid_netns_in_host(const braid_netns_t *net, int                    h,
                        int (*fn)(void *arg, char *err, size_t n), void *arg,
                        char *err, size_t n);
/* Host h's address, "10.77.0.<h+1>". */
void braid_netns_host_ip(char *buf, size_t n, int h);
/* In a rank's child before exec: moves it into its host's namespace and
 * sets what its environment needs (BRAID_HOSTNAME, UCX_NET_DEVICES,
 * UCX_TLS).  Returns 0 or -1 (err says why). */
int braid_netns_enter(const braid_netns_t *net, int rank, char *err, size_t n);
/* One line for braidrun to print: what was built. */
void braid_netns_describe(const braid_netns_t *net, char *buf, size_t n);

/* netns.c: "braid-<owner>-h<host>", or "braid-<owner>-sw" for host -1 (the
 * switch). */
void braid_netns_name(char *buf, size_t n, pid_t owner, int host);
/* The same under /run/netns. */
void braid_netns_path(char *buf, size_t n, pid_t owner, int host);

/* netns_links.c: namespaces, links, addresses, routes, forwarding and
 * qdiscs of the cluster net describes.  0 or -1 (err). */
int braid_netns_build(const braid_netns_t *net, char *err, size_t n);

/* netns_cmd.c: namespaces by name, and the iproute2 tools. */
/* Runs `tool -n ns -batch -` (ns NULL: no -n) feeding it script; 0 on exit
 * status 0, else -1 with the tool's first error line in err. */
int braid_netns_batch(const char *tool, const char *ns, const char *script,
                      char *err, size_t n);
/* Enters the namespace at path (setns); 0 or -1 with errno set. */
int braid_netns_setns_path(const char *path);
/* Runs fn inside the namespace at path, then returns to the caller's
 * (sockets made meanwhile stay in the namespace they were made in).
 * fn's result, or -1 with err when the namespace cannot be entered or
 * left. */
int braid_netns_within(const char *path,
                       int (*fn)(void *arg, char *err, size_t n), void *arg,
                       char *err, size_t n);
/* Writes value to /proc/sys/<key> inside namespace path, returning to the
 * caller's namespace after; 0 or -1 (err). */
int braid_netns_sysctl(const char *path, const char *key, const char *value,
                       char *err, size_t n);

/* netns_reaper.c */
/* Removes every namespace braid-<owner>-*; returns how many. */
int braid_netns_remove_owned(pid_t owner);
/* Removes namespaces of braidruns that are no longer running. */
int braid_netns_remove_stale(void);
/* Forks the reaper: it waits for braidrun to end and then removes what
 * braidrun left.  0 or -1 (err). */
int braid_netns_start_reaper(braid_netns_t *net, char *err, size_t n);

#endif
