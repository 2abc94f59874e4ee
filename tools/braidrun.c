/* braidrun: start N ranks of a braid program on this host.
 *
 *   braidrun -n N [-t|--timeout SECONDS] [-g|--grace SECONDS] [-b core|none]
 *            [-p|--prefix rank|none]
 *            [--netns switch|ring [--ranks-per-host K] [--link-rate RATE]
 *             [--link-delay US]] [--] prog args...
 *
 * With --netns the ranks run on an emulated cluster: each group of K ranks
 * in a network namespace of its own (an emulated host), the hosts joined
 * by a bridge or cabled as a ring (tools/netns.h).
 *
 * braidrun binds rank 0's listening socket itself (127.0.0.1, ephemeral
 * port) and hands it down as an inherited descriptor, BRAID_LISTEN_FD, so
 * the port is known before any rank starts and no other process can take it
 * in between.  Every rank gets BRAID_RANK, BRAID_SIZE, BRAID_ADDR and a
 * random BRAID_JOB_KEY (and BRAID_TIMEOUT with -t).  Output of every rank is
 * forwarded line by line with a "[rank] " prefix, stdout to stdout and
 * stderr to stderr.  When a rank fails, the others get SIGTERM, then SIGKILL
 * 3 s later.  With --grace, they first get that long to exit on their own:
 * a braid program whose peer died reports the error naming the lost rank and
 * exits, and its report is worth more than a SIGTERM (braid's own waits are
 * bounded by BRAID_TIMEOUT, so a grace longer than that only matters for a
 * program stuck outside braid).  Exit status: 0 only if every rank exited 0;
 * otherwise that of the rank that failed first (a rank killed by a signal
 * before one that exited with an error), which is named last.
 *
 * Every rank also gets the write end of a pipe of its own, BRAID_LAUNCHER_FD,
 * on which libbraid says when it initialised and finalized a communicator
 * and whom a failure inquiry blamed (core/comm/launcher.c).  A rank that
 * exits, whatever its status, while a communicator of its is still open
 * (braid_init without braid_finalize) fails the job, as under mpirun, since
 * its peers cannot finish without it; and when the ranks name a culprit --
 * a rank that was lost, stopped, or called something else -- the summary
 * names that rank as the one that failed first, not the first survivor
 * that gave up.  Stopped ranks get SIGCONT with the SIGTERM, so that it is
 * delivered, and the grace ends early once only stopped ranks are left.
 *
 * Each rank runs in its own process group, so that signals reach the whole
 * tree a rank started (a shell and its children) and a Ctrl-C on the
 * terminal reaches braidrun only, which forwards it exactly once.  Only rank
 * 0 reads braidrun's stdin, and only when it is not a terminal (a rank in a
 * background process group would be stopped reading one). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "netns.h"
#include "util/env.h"
#include "util/log.h"
#include "util/proc.h"

#define MAX_RANKS    1024
#define LINE_CAP     65536 /* longer lines are split */
#define KILL_GRACE_S 3.0
#define DRAIN_MAX    (1 << 20) /* per stream, after every rank exited */

typedef struct {
    int    fd;  /* read end of the rank's pipe, -1 at EOF */
    int    out; /* 1 or 2 */
    size_t len;
    char  *buf;
} stream_t;

typedef struct {
    pid_t    pid;
    int      running;
    int      status;
    int      signalled_by_us;
    int      failed; /* exited non-zero or by a signal on its own */
    int      early;  /* exited with a communicator open */
    stream_t s[2];
    int      ctl; /* read end of its BRAID_LAUNCHER_FD pipe, -1 at EOF */
    char     ctl_buf[1024];
    size_t   ctl_len;
    int      open_comms; /* braid_init minus braid_finalize */
} rank_t;

/* The culprit the ranks named (a "blame" line), first one wins. */
static long blame_pid;
static int  blame_by = -1;
static char blame_text[600];

static int     sig_pipe[2] = {-1, -1}; /* signal handler -> main loop */
static int     out_dead[3];            /* our stdout/stderr went away */
static rank_t *ranks;
static int     nranks;
static int     bind_cores = 1; /* --bind: 1 core (round robin), 0 none */
static int prefix_rank    = 1; /* --prefix: 1 "[rank] " before lines, 0 none */
static braid_netns_t netns;    /* --netns: the emulated cluster */
static int           use_netns;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: braidrun -n N [-t|--timeout SECONDS] [-g|--grace "
            "SECONDS] [--] prog [args...]\n"
            "  -n N            number of ranks, 1..%d\n"
            "  -t, --timeout S BRAID_TIMEOUT for the ranks (seconds > 0)\n"
            "  -g, --grace S   when a rank fails, give the others S seconds "
            "to exit on\n"
            "                  their own (reporting the failure) before "
            "SIGTERM (default 0)\n"
            "  -b, --bind B    'core' (default): pin rank r to allowed CPU "
            "r mod ncpu;\n"
            "                  'none': leave placement to the scheduler\n"
            "  -p, --prefix P  'rank' (default): \"[rank] \" before every "
            "line of output;\n"
            "                  'none': the ranks' lines as they are (CSV, "
            "scripts)\n" BRAID_NETNS_USAGE "  -h, --help      this text\n",
            MAX_RANKS);
}

/* An option of two values, `on` or "none": 1, 0, or -1 after saying why. */
static int two_way(const char *opt, const char *value, const char *on)
{
    if (strcmp(value, on) == 0 || strcmp(value, "none") == 0)
        return strcmp(value, on) == 0;
    fprintf(stderr, "braidrun: %s='%s': expected '%s' or 'none'\n", opt, value,
            on);
    return -1;
}

static void on_signal(int sig)
{
    int           saved = errno;
    unsigned char c     = (unsigned char)sig;
    (void)!write(sig_pipe[1], &c, 1);
    errno = saved;
}

/* Whole buffer to our stdout (1) or stderr (2); a closed one is dropped
 * silently so that ranks never block on a full pipe because of it. */
static void emit(int fd, const char *p, size_t n)
{
    while (n > 0 && !out_dead[fd]) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            out_dead[fd] = 1;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* One line with its prefix, in one write so that lines of different ranks
 * never interleave mid-line. */
static void emit_line(int rank, int fd, const char *line, size_t n)
{
    char   stackbuf[512];
    char  *buf = stackbuf;
    size_t cap = n + 24;
    if (!prefix_rank) {
        /* Whole lines still: one write each, lines never interleave. */
        if (n + 1 > sizeof(stackbuf) && (buf = malloc(n + 1)) == NULL) {
            emit(fd, line, n);
            emit(fd, "\n", 1);
            return;
        }
        memcpy(buf, line, n);
        buf[n] = '\n';
        emit(fd, buf, n + 1);
        if (buf != stackbuf)
            free(buf);
        return;
    }
    if (cap > sizeof(stackbuf) && (buf = malloc(cap)) == NULL) {
        char pre[24];
        int  k = snprintf(pre, sizeof(pre), "[%d] ", rank);
        emit(fd, pre, (size_t)k);
        emit(fd, line, n);
        emit(fd, "\n", 1);
        return;
    }
    int k = snprintf(buf, cap, "[%d] ", rank);
    memcpy(buf + k, line, n);
    buf[(size_t)k + n] = '\n';
    emit(fd, buf, (size_t)k + n + 1);
    if (buf != stackbuf)
        free(buf);
}

/* Emits the complete lines in the buffer (all of it when flush). */
static void emit_lines(int rank, stream_t *s, int flush)
{
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->buf[i] == '\n') {
            emit_line(rank, s->out, s->buf + start, i - start);
            start = i + 1;
        }
    }
    if ((flush || s->len == LINE_CAP) && start < s->len) {
        emit_line(rank, s->out, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void stream_close(int rank, stream_t *s)
{
    emit_lines(rank, s, 1);
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

/* Reads what is there; returns bytes read, 0 at EOF (stream closed), -1 if
 * nothing is available now. */
static ssize_t stream_read(int rank, stream_t *s)
{
    ssize_t n;
    do
        n = read(s->fd, s->buf + s->len, LINE_CAP - s->len);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return -1;
    if (n <= 0) {
        stream_close(rank, s);
        return 0;
    }
    s->len += (size_t)n;
    emit_lines(rank, s, 0);
    return n;
}

/* One line from rank r's launcher pipe. */
static void ctl_line(int r, char *line)
{
    if (strcmp(line, "init") == 0) {
        ranks[r].open_comms++;
    } else if (strcmp(line, "finalize") == 0) {
        if (ranks[r].open_comms > 0)
            ranks[r].open_comms--;
    } else if (strncmp(line, "blame ", 6) == 0 && blame_by < 0) {
        char *end;
        long  pid = strtol(line + 6, &end, 10);
        if (pid > 0 && *end == ' ') {
            blame_pid = pid;
            blame_by  = r;
            snprintf(blame_text, sizeof(blame_text), "%s", end + 1);
        }
    }
}

/* Reads what rank r said on its launcher pipe; at EOF the pipe closes. */
static void ctl_read(int r)
{
    rank_t *rk = &ranks[r];
    while (rk->ctl >= 0) {
        ssize_t n;
        do
            n = read(rk->ctl, rk->ctl_buf + rk->ctl_len,
                     sizeof(rk->ctl_buf) - 1 - rk->ctl_len);
        while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            close(rk->ctl);
            rk->ctl = -1;
            return;
        }
        rk->ctl_len += (size_t)n;
        char *start = rk->ctl_buf, *nl;
        while ((nl = memchr(start, '\n',
                            rk->ctl_len - (size_t)(start - rk->ctl_buf)))) {
            *nl = '\0';
            ctl_line(r, start);
            start = nl + 1;
        }
        rk->ctl_len -= (size_t)(start - rk->ctl_buf);
        memmove(rk->ctl_buf, start, rk->ctl_len);
        if (rk->ctl_len == sizeof(rk->ctl_buf) - 1)
            rk->ctl_len = 0; /* a line this long is none of ours */
    }
}

/* The rank whose pid (or whose process group, for a rank that runs its
 * program in a child) is pid; -1 if none. */
static int rank_of_pid(long pid)
{
    for (int r = 0; r < nranks; r++) {
        if ((long)ranks[r].pid == pid ||
            (long)getpgid((pid_t)pid) == (long)ranks[r].pid)
            return r;
    }
    return -1;
}

/* Whether every rank still running is stopped (so none will exit on its
 * own, and a grace period would only be waited out). */
static int only_stopped_left(void)
{
    int any = 0;
    for (int r = 0; r < nranks; r++) {
        if (!ranks[r].running)
            continue;
        char st = braid_proc_state((long)ranks[r].pid);
        if (st != 'T' && st != 't')
            return 0;
        any = 1;
    }
    return any;
}

static void signal_ranks(int sig)
{
    for (int r = 0; r < nranks; r++) {
        if (ranks[r].running) {
            ranks[r].signalled_by_us = 1;
            /* The group: the rank and whatever it started. */
            if (kill(-ranks[r].pid, sig) != 0)
                kill(ranks[r].pid, sig);
            /* A stopped rank acts on the signal only once continued. */
            if (sig == SIGTERM && kill(-ranks[r].pid, SIGCONT) != 0)
                kill(ranks[r].pid, SIGCONT);
        }
    }
}

static const char *sig_name(int sig)
{
    const char *d = sigdescr_np(sig);
    return d ? d : "unknown signal";
}

/* Pins the calling rank to CPU (rank mod ncpu) of those braidrun may use.
 * A waiting rank spins; two unpinned ranks that the scheduler stacks on one
 * CPU then take turns a time slice at a time.  With more ranks than CPUs,
 * fixed run queues keep the hand-offs between the ranks sharing a CPU cheap
 * (no migrations; docs/performance.md has pinned against unpinned). */
static void bind_to_core(int rank)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
        return;
    int ncpu = CPU_COUNT(&allowed);
    if (ncpu <= 0 || bind_cores == 0)
        return;
    int k = rank % ncpu;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed) || k-- > 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof(one), &one);
        return;
    }
}

/* With more ranks than CPUs, ranks hand their CPU to each other several
 * times per small collective, and every switch to a thread that registered
 * restartable sequences costs the kernel an rseq update on the way back to
 * user space.  glibc registers one per thread only to speed up sched_getcpu,
 * which braid does not call, so it is switched off (docs/performance.md
 * has what that gave).  An rseq setting of the user's own is kept. */
static void tune_oversubscribed(void)
{
    cpu_set_t   allowed;
    const char *cur = getenv("GLIBC_TUNABLES");
    char        buf[4096];

    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
        nranks <= CPU_COUNT(&allowed))
        return;
    if (cur != NULL && strstr(cur, "glibc.pthread.rseq") != NULL)
        return;
    if (cur == NULL || cur[0] == '\0')
        snprintf(buf, sizeof(buf), "glibc.pthread.rseq=0");
    else if ((size_t)snprintf(buf, sizeof(buf), "%s:glibc.pthread.rseq=0",
                              cur) >= sizeof(buf))
        return; /* leave a tunables string this long alone */
    setenv("GLIBC_TUNABLES", buf, 1);
}

static void child_exec(int rank, int lfd, int out_w, int err_w, int ctl_w,
                       char **argv, const char *addr, const char *key,
                       const char *timeout, pid_t parent,
                       const sigset_t *oldmask)
{
    char num[32];
    setpgid(0, 0);
    /* If braidrun dies (even by SIGKILL), the ranks should not live on. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL); /* ignored dispositions survive exec */
    sigprocmask(SIG_SETMASK, oldmask, NULL);

    if (dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        _exit(127);
    if (rank != 0 || isatty(0)) {
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull >= 0)
            dup2(devnull, 0);
    }
    if (rank == 0 && lfd >= 0) {
        /* F_DUPFD leaves close-on-exec off: this copy survives exec. */
        int fd = fcntl(lfd, F_DUPFD, 3);
        if (fd < 0)
            _exit(127);
        snprintf(num, sizeof(num), "%d", fd);
        setenv("BRAID_LISTEN_FD", num, 1);
    } else {
        unsetenv("BRAID_LISTEN_FD");
    }
    int cfd = fcntl(ctl_w, F_DUPFD, 3); /* without close-on-exec */
    if (cfd >= 0) {
        snprintf(num, sizeof(num), "%d", cfd);
        setenv("BRAID_LAUNCHER_FD", num, 1);
    } else {
        unsetenv("BRAID_LAUNCHER_FD");
    }
    if (use_netns) {
        char err[512];
        if (braid_netns_enter(&netns, rank, err, sizeof(err)) != 0) {
            fprintf(stderr, "braidrun: rank %d: %s\n", rank, err);
            _exit(127);
        }
    }
    snprintf(num, sizeof(num), "%d", rank);
    setenv("BRAID_RANK", num, 1);
    snprintf(num, sizeof(num), "%d", nranks);
    setenv("BRAID_SIZE", num, 1);
    setenv("BRAID_ADDR", addr, 1);
    setenv("BRAID_JOB_KEY", key, 1);
    if (timeout != NULL)
        setenv("BRAID_TIMEOUT", timeout, 1);
    tune_oversubscribed(); /* before pinning narrows the affinity */
    bind_to_core(rank);
    execvp(argv[0], argv);
    fprintf(stderr, "braidrun: cannot execute '%s': %s\n", argv[0],
            strerror(errno));
    _exit(127);
}

/* Rank 0's listening socket on arg->ip (127.0.0.1, or host 0's address
 * inside its namespace with --netns), ephemeral port. */
typedef struct {
    const char *ip;
    char       *addr; /* "ip:port" */
    size_t      n;
    int         fd;
} listener_t;

static int make_listener(void *arg, char *err, size_t errn)
{
    listener_t        *l   = arg;
    struct sockaddr_in sa  = {.sin_family = AF_INET};
    socklen_t          len = sizeof(sa);
    int                one = 1;
    inet_pton(AF_INET, l->ip, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* SO_REUSEADDR is inherited by the accepted connections: a rank 0 that
     * initializes again can then bind the port while those linger in
     * TIME_WAIT. */
    if (fd >= 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        snprintf(err, errn, "cannot listen on %s: %s", l->ip, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(l->addr, l->n, "%s:%d", l->ip, ntohs(sa.sin_port));
    l->fd = fd;
    return 0;
}

static void netns_cleanup(void) { braid_netns_destroy(&netns); }

static int any_running(void)
{
    for (int r = 0; r < nranks; r++) {
        if (ranks[r].running)
            return 1;
    }
    return 0;
}

/* Records exited ranks.  Every rank that failed on its own (not after our
 * signal) is reported; the first goes to *first_fail and starts the
 * shutdown: *term_at (now + grace) is when the others get SIGTERM.
 * A rank killed by a signal (a crash, kill -9, the OOM killer) counts as
 * first over ranks that exited with an error status before it was seen:
 * those are usually reporting its death -- with --grace they exit on their
 * own as soon as they notice it, and they can notice it (its sockets close)
 * before the kernel has finished tearing the dead process down and tells
 * us, all the more on a loaded machine. */
/* How much a rank's end says about the cause of a failure: killed by a
 * signal, or gone with a communicator open (2), over an error status (1),
 * which is usually a survivor reporting the first. */
static int cause_weight(const rank_t *rk)
{
    return WIFSIGNALED(rk->status) || rk->early ? 2 : 1;
}

static void reap(int *first_fail, int *shutdown, double *term_at, double grace)
{
    int   status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int r;
        for (r = 0; r < nranks && ranks[r].pid != pid; r++)
            ;
        if (r == nranks)
            continue;
        ranks[r].running = 0;
        ranks[r].status  = status;
        ctl_read(r); /* its last words: did it finalize? */
        ranks[r].early = ranks[r].open_comms > 0 && !ranks[r].signalled_by_us;
        int ok =
            WIFEXITED(status) && WEXITSTATUS(status) == 0 && !ranks[r].early;
        if (ok || ranks[r].signalled_by_us)
            continue;
        char msg[240];
        int  k;
        ranks[r].failed = 1;
        if (WIFSIGNALED(status))
            k = snprintf(msg, sizeof(msg),
                         "braidrun: rank %d killed by "
                         "signal %d (%s), pid %ld\n",
                         r, WTERMSIG(status), sig_name(WTERMSIG(status)),
                         (long)pid);
        else if (ranks[r].early)
            k = snprintf(msg, sizeof(msg),
                         "braidrun: rank %d exited with "
                         "status %d without braid_finalize (pid %ld): its "
                         "peers cannot complete without it\n",
                         r, WEXITSTATUS(status), (long)pid);
        else
            k = snprintf(msg, sizeof(msg),
                         "braidrun: rank %d exited with "
                         "status %d, pid %ld\n",
                         r, WEXITSTATUS(status), (long)pid);
        emit(2, msg, (size_t)k);
        if (*first_fail < 0 ||
            cause_weight(&ranks[r]) > cause_weight(&ranks[*first_fail]))
            *first_fail = r;
        if (!*shutdown) {
            *shutdown = 1;
            *term_at  = braid_now_s() + grace;
            if (grace > 0.0 && any_running()) {
                k = snprintf(msg, sizeof(msg),
                             "braidrun: giving the other "
                             "ranks %g s to exit on their own\n",
                             grace);
                emit(2, msg, (size_t)k);
            }
        }
    }
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"timeout", required_argument, NULL, 't'},
        {"grace", required_argument, NULL, 'g'},
        {"bind", required_argument, NULL, 'b'},
        {"prefix", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        BRAID_NETNS_LONGOPTS,
        {NULL, 0, NULL, 0}};
    braid_netns_opts_t nso      = {.ppn = 1};
    int                ns_extra = 0; /* a --netns-only option was given */
    long long          n        = -1;
    const char        *timeout  = NULL;
    double             grace    = 0.0;
    int                opt;

    opterr = 0;
    /* '+': options end at the program name, whose own options are its. */
    while ((opt = getopt_long(argc, argv, "+n:t:g:b:p:h", longopts, NULL)) !=
           -1) {
        switch (opt) {
        case 'n':
            if (braid_parse_int("-n", optarg, 1, MAX_RANKS, &n) != BRAID_OK) {
                fprintf(stderr, "braidrun: %s\n", braid_last_error());
                usage(stderr);
                return 2;
            }
            break;
        case 't': {
            double t = 0.0;
            if (braid_parse_double("--timeout", optarg, 0.0, 365.0 * 86400,
                                   &t) != BRAID_OK) {
                fprintf(stderr, "braidrun: %s\n", braid_last_error());
                usage(stderr);
                return 2;
            }
            if (t <= 0.0) {
                fprintf(stderr,
                        "braidrun: --timeout='%s': must be > 0 "
                        "seconds\n",
                        optarg);
                usage(stderr);
                return 2;
            }
            timeout = optarg;
            break;
        }
        case 'g':
            if (braid_parse_double("--grace", optarg, 0.0, 86400.0, &grace) !=
                BRAID_OK) {
                fprintf(stderr, "braidrun: %s\n", braid_last_error());
                usage(stderr);
                return 2;
            }
            break;
        case 'b':
        case 'p': {
            int *flag = opt == 'b' ? &bind_cores : &prefix_rank;
            if ((*flag = two_way(opt == 'b' ? "--bind" : "--prefix", optarg,
                                 opt == 'b' ? "core" : "rank")) < 0) {
                usage(stderr);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        case BRAID_NETNS_OPT_KIND:
        case BRAID_NETNS_OPT_PPN:
        case BRAID_NETNS_OPT_RATE:
        case BRAID_NETNS_OPT_DELAY: {
            char err[256];
            if (braid_netns_option(&nso, opt, optarg, err, sizeof(err))) {
                fprintf(stderr, "braidrun: %s\n", err);
                usage(stderr);
                return 2;
            }
            use_netns |= opt == BRAID_NETNS_OPT_KIND;
            ns_extra |= opt != BRAID_NETNS_OPT_KIND;
            break;
        }
        default:
            if (optopt == 'n' || optopt == 't' || optopt == 'g' ||
                optopt == 'b' || optopt == 'p')
                fprintf(stderr, "braidrun: option -%c needs a value\n",
                        optopt);
            else if (optopt >= BRAID_NETNS_OPT_KIND &&
                     optopt <= BRAID_NETNS_OPT_DELAY)
                fprintf(stderr, "braidrun: option %s needs a value\n",
                        argv[optind - 1]);
            else if (optopt != 0)
                fprintf(stderr, "braidrun: unknown option -%c\n", optopt);
            else
                fprintf(stderr, "braidrun: unknown option '%s'\n",
                        argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (n < 0) {
        fprintf(stderr, "braidrun: the number of ranks (-n N) is missing\n");
        usage(stderr);
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "braidrun: no program to run\n");
        usage(stderr);
        return 2;
    }
    char **prog = argv + optind;
    nranks      = (int)n;
    if (ns_extra && !use_netns) {
        fprintf(stderr, "braidrun: --ranks-per-host, --link-rate and "
                        "--link-delay need --netns switch|ring\n");
        usage(stderr);
        return 2;
    }

    char    addr[64], keyhex[33];
    uint8_t key[16];
    if (braid_random_bytes(key, sizeof(key)) != BRAID_OK) {
        fprintf(stderr, "braidrun: %s\n", braid_last_error());
        return 1;
    }
    braid_format_job_key(key, keyhex);
    char       err[512], ip[32] = "127.0.0.1";
    listener_t lis = {ip, addr, sizeof(addr), -1};
    int        rc;
    if (use_netns) {
        nso.nranks = nranks;
        if (braid_netns_create(&netns, &nso, err, sizeof(err)) != 0) {
            fprintf(stderr, "braidrun: %s\n", err);
            return 1;
        }
        atexit(netns_cleanup); /* on every way out of main */
        braid_netns_describe(&netns, err, sizeof(err));
        fprintf(stderr, "braidrun: %s\n", err);
        braid_netns_host_ip(ip, sizeof(ip), 0);
        rc = braid_netns_in_host(&netns, 0, make_listener, &lis, err,
                                 sizeof(err));
    } else {
        rc = make_listener(&lis, err, sizeof(err));
    }
    if (rc != 0) {
        fprintf(stderr, "braidrun: %s\n", err);
        return 1;
    }
    int lfd = lis.fd;

    ranks = calloc((size_t)nranks, sizeof(*ranks));
    if (ranks == NULL || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "braidrun: %s\n", strerror(errno));
        return 1;
    }

    /* Signals are blocked across fork so that a child never runs our
     * handlers; each child resets them before unblocking. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags   = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigset_t block, oldmask;
    sigemptyset(&block);
    int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++) {
        sigaction(handled[i], &sa, NULL);
        sigaddset(&block, handled[i]);
    }
    signal(SIGPIPE, SIG_IGN);
    sigprocmask(SIG_BLOCK, &block, &oldmask);

    pid_t self       = getpid();
    int   spawned_ok = 1;
    for (int r = 0; r < nranks; r++)
        ranks[r].ctl = -1;
    for (int r = 0; r < nranks; r++) {
        int p[3][2];
        if (pipe2(p[0], O_CLOEXEC) != 0 || pipe2(p[1], O_CLOEXEC) != 0 ||
            pipe2(p[2], O_CLOEXEC) != 0) {
            fprintf(stderr, "braidrun: pipe: %s\n", strerror(errno));
            spawned_ok = 0;
            break;
        }
        pid_t pid = fork();
        if (pid == 0)
            child_exec(r, lfd, p[0][1], p[1][1], p[2][1], prog, addr, keyhex,
                       timeout, self, &oldmask);
        close(p[0][1]);
        close(p[1][1]);
        close(p[2][1]);
        if (pid < 0) {
            fprintf(stderr, "braidrun: fork: %s\n", strerror(errno));
            close(p[0][0]);
            close(p[1][0]);
            close(p[2][0]);
            spawned_ok = 0;
            break;
        }
        ranks[r].ctl = p[2][0];
        fcntl(p[2][0], F_SETFL, O_NONBLOCK);
        setpgid(pid, pid); /* also here: no race with our first kill() */
        ranks[r].pid     = pid;
        ranks[r].running = 1;
        for (int k = 0; k < 2; k++) {
            ranks[r].s[k].fd  = p[k][0];
            ranks[r].s[k].out = k + 1;
            ranks[r].s[k].buf = malloc(LINE_CAP);
            if (ranks[r].s[k].buf == NULL) {
                fprintf(stderr, "braidrun: out of memory\n");
                return 1;
            }
            fcntl(p[k][0], F_SETFL, O_NONBLOCK);
        }
    }
    close(lfd); /* rank 0 has its own copy */
    for (int r = 0; r < nranks; r++) {
        if (ranks[r].pid == 0)
            ranks[r].s[0].fd = ranks[r].s[1].fd = -1;
    }
    sigprocmask(SIG_SETMASK, &oldmask, NULL);

    /* shutdown: a rank failed, the others get SIGTERM at term_at (after the
     * grace); terminating: SIGTERM sent, SIGKILL at kill_at. */
    int    first_fail = -1, shutdown = 0, terminating = 0, got_sig = 0;
    int    killed  = 0;
    double term_at = 0.0, kill_at = 0.0;
    if (!spawned_ok) {
        shutdown = terminating = 1;
        kill_at                = braid_now_s() + KILL_GRACE_S;
        signal_ranks(SIGTERM);
    }

    struct pollfd *pfd = calloc(1 + 3 * (size_t)nranks, sizeof(*pfd));
    int           *map = calloc(1 + 3 * (size_t)nranks, sizeof(*map));
    if (pfd == NULL || map == NULL) {
        fprintf(stderr, "braidrun: out of memory\n");
        return 1;
    }
    while (any_running()) {
        int np    = 0;
        pfd[np++] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
        for (int r = 0; r < nranks; r++) {
            for (int k = 0; k < 2; k++) {
                if (ranks[r].s[k].fd >= 0) {
                    map[np]   = 3 * r + k;
                    pfd[np++] = (struct pollfd){.fd     = ranks[r].s[k].fd,
                                                .events = POLLIN};
                }
            }
            if (ranks[r].ctl >= 0) {
                map[np] = 3 * r + 2;
                pfd[np++] =
                    (struct pollfd){.fd = ranks[r].ctl, .events = POLLIN};
            }
        }
        int wait_ms = -1;
        if ((shutdown && !terminating) || (terminating && !killed)) {
            double left = (terminating ? kill_at : term_at) - braid_now_s();
            wait_ms     = left > 0 ? (int)(left * 1000.0) + 1 : 0;
        }
        int rc = poll(pfd, (nfds_t)np, wait_ms);
        if (rc < 0 && errno != EINTR) {
            fprintf(stderr, "braidrun: poll: %s\n", strerror(errno));
            signal_ranks(SIGKILL);
            break;
        }
        for (int i = 1; rc > 0 && i < np; i++) {
            if (pfd[i].revents == 0)
                continue;
            if (map[i] % 3 == 2)
                ctl_read(map[i] / 3);
            else
                stream_read(map[i] / 3, &ranks[map[i] / 3].s[map[i] % 3]);
        }
        if (rc > 0 && pfd[0].revents != 0) {
            unsigned char sigs[64];
            ssize_t       k;
            while ((k = read(sig_pipe[0], sigs, sizeof(sigs))) > 0) {
                for (ssize_t i = 0; i < k; i++) {
                    if (sigs[i] == SIGCHLD)
                        continue;
                    got_sig = sigs[i];
                    char msg[96];
                    int  m = snprintf(msg, sizeof(msg),
                                      "braidrun: got %s, "
                                       "forwarding it to the ranks\n",
                                      sig_name(got_sig));
                    emit(2, msg, (size_t)m);
                    signal_ranks(got_sig);
                    if (!terminating) {
                        shutdown = terminating = 1;
                        kill_at                = braid_now_s() + KILL_GRACE_S;
                    }
                }
            }
        }
        reap(&first_fail, &shutdown, &term_at, grace);
        /* A stopped rank will not exit on its own: no grace for it. */
        int stopped = shutdown && !terminating && braid_now_s() < term_at &&
                      only_stopped_left();
        if (stopped) {
            static const char m[] = "braidrun: only stopped ranks are left; "
                                    "terminating them\n";
            emit(2, m, sizeof(m) - 1);
            term_at = braid_now_s();
        }
        if (shutdown && !terminating && braid_now_s() >= term_at &&
            any_running()) {
            if (grace > 0.0 && !stopped) {
                char msg[96];
                int  m = snprintf(msg, sizeof(msg),
                                  "braidrun: grace of %g s "
                                   "over, terminating the ranks left\n",
                                  grace);
                emit(2, msg, (size_t)m);
            }
            terminating = 1;
            kill_at     = braid_now_s() + KILL_GRACE_S;
            signal_ranks(SIGTERM);
        }
        if (terminating && !killed && braid_now_s() >= kill_at &&
            any_running()) {
            signal_ranks(SIGKILL);
            killed = 1;
        }
    }

    /* Every rank has exited: take what is left in the pipes, but do not wait
     * for EOF, which a leftover grandchild could hold off forever. */
    for (int r = 0; r < nranks; r++) {
        for (int k = 0; k < 2; k++) {
            stream_t *s    = &ranks[r].s[k];
            size_t    took = 0;
            if (s->buf == NULL)
                continue; /* never spawned */
            while (s->fd >= 0 && took < DRAIN_MAX) {
                ssize_t got = stream_read(r, s);
                if (got <= 0)
                    break;
                took += (size_t)got;
            }
            if (s->fd >= 0)
                stream_close(r, s);
            free(s->buf);
            s->buf = NULL;
        }
    }
    free(pfd);
    free(map);

    for (int r = 0; r < nranks; r++) {
        ctl_read(r);
        if (ranks[r].ctl >= 0)
            close(ranks[r].ctl);
    }

    int code = 0;
    if (got_sig != 0) {
        code = 128 + got_sig;
    } else if (first_fail >= 0) {
        int st      = ranks[first_fail].status;
        int nfailed = 0;
        code        = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code == 0)
            code = 1; /* exited 0 with a communicator open */
        for (int r = 0; r < nranks; r++)
            nfailed += ranks[r].failed;
        /* Several ranks may have reported errors by now (each naming the
         * rank it lost); say which one started it, last, where it is seen.
         * The ranks' own verdict knows best: a stopped rank fails nothing
         * itself, and its survivors give up in no particular order. */
        char msg[900];
        int  m, blamed = blame_by >= 0 ? rank_of_pid(blame_pid) : -1;
        if (blamed >= 0)
            m = snprintf(msg, sizeof(msg),
                         "braidrun: rank %d failed first "
                         "(pid %ld), as rank %d reports: %s; %d of %d ranks "
                         "failed\n",
                         blamed, (long)ranks[blamed].pid, blame_by, blame_text,
                         nfailed, nranks);
        else
            m = snprintf(msg, sizeof(msg),
                         "braidrun: rank %d failed first "
                         "(pid %ld, %s %d%s); %d of %d ranks failed\n",
                         first_fail, (long)ranks[first_fail].pid,
                         WIFEXITED(st) ? "exit status" : "signal",
                         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                         ranks[first_fail].early ? ", without braid_finalize"
                                                 : "",
                         nfailed, nranks);
        emit(2, msg,
             (size_t)(m < (int)sizeof(msg) ? m : (int)sizeof(msg) - 1));
    } else if (!spawned_ok) {
        code = 1;
    }
    free(ranks);
    return code;
}
