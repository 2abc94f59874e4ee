/* A plugin that crashes in its probe is reported and skipped; braid_init
 * carries on with the other plugins.  Under braidrun -n N:
 *
 *   test_crashprobe --crash-dir DIR [--plugin-dir DIR] [--info BRAID_INFO]
 *                   [--in plugin|transport] [--how
 * segv|bus|fpe|ill|abort|stack]
 *
 * puts the crashing plugin (tests/mp/crash_probe_plugin.c, in DIR) first in
 * BRAID_PLUGIN_PATH and tells it how to crash.  Then on every rank:
 * braid_init succeeds; the log names the plugin (or its transport), the
 * signal and "skipped" (checked on rank 0, which must say it); an
 * all-reduce and an all-gather on the other plugins give the right
 * results; the application's own handlers for the crash signals, and its
 * signal mask, are what they were before braid_init.  Rank 0 also runs
 * braid-info, which probes the plugins again and must list the crash as
 * the reason. */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>

#include "mp_common.h"

#define PROG "test_crashprobe"

static int         failures;
static const char *step = "start";

static void fail(int rank, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG " FAIL rank %d: ", rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
}

/* braid_init with stderr in a file (a pipe could fill up and block the
 * process writing into it); the log lands in log. */
static braid_status_t init_logged(braid_comm_t **comm, char *log, size_t len)
{
    char tmpl[] = "/tmp/braid-test-crashprobe-XXXXXX";
    int  logfd = mkstemp(tmpl), saved = dup(2);
    if (logfd < 0 || saved < 0) {
        perror(PROG ": capturing stderr");
        exit(1);
    }
    unlink(tmpl);
    fflush(stderr);
    dup2(logfd, 2);
    braid_status_t st = braid_init(comm);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    mp_slurp(logfd, log, len);
    close(logfd);
    return st;
}

static void check_collectives(braid_comm_t *c, int rank)
{
    int     n     = braid_comm_size(c);
    int32_t in[5] = {1, 2, 3, 4, rank}, out[5] = {0, 0, 0, 0, 0};

    step              = "allreduce";
    braid_status_t st = braid_allreduce(in, out, 5, BRAID_I32, BRAID_SUM, c);
    if (st != BRAID_OK)
        fail(rank, "allreduce beside the crashed plugin: %s: %s",
             braid_status_str(st), braid_last_error());
    else if (out[0] != n || out[3] != 4 * n || out[4] != n * (n - 1) / 2)
        fail(rank,
             "allreduce beside the crashed plugin: got {%d,..,%d,%d}, "
             "expected {%d,..,%d,%d}",
             out[0], out[3], out[4], n, 4 * n, n * (n - 1) / 2);

    int32_t me = 100 + rank, all[64];
    step       = "allgather";
    st = n <= 64 ? braid_allgather(&me, all, 1, BRAID_I32, c) : BRAID_OK;
    if (st != BRAID_OK) {
        fail(rank, "allgather beside the crashed plugin: %s: %s",
             braid_status_str(st), braid_last_error());
        return;
    }
    for (int r = 0; r < n && r < 64; r++)
        if (all[r] != 100 + r) {
            fail(rank,
                 "allgather beside the crashed plugin: slot %d holds "
                 "%d, expected %d",
                 r, (int)all[r], 100 + r);
            break;
        }
}

/* braid-info probes the plugins itself and must give the crash as the
 * reason: "crashed in probe (SIGSEGV)". */
static void check_braid_info(const char *info, const char *want, int rank)
{
    static char out[1 << 16];
    char        cmd[4200];
    snprintf(cmd, sizeof(cmd), "'%s' 2>/dev/null", info);
    step    = "braid-info";
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        fail(rank, "cannot run '%s'", info);
        return;
    }
    size_t used      = fread(out, 1, sizeof(out) - 1, p);
    out[used]        = '\0';
    int         rc   = pclose(p);
    const char *line = strstr(out, want);
    if (rc != 0 || line == NULL || strstr(out, "crashprobe") == NULL) {
        fail(rank,
             "braid-info (exit status %d) does not list '%s' for "
             "crashprobe; it printed:\n----\n%s----",
             rc, want, out);
        return;
    }
    while (line > out && line[-1] != '\n')
        line--;
    printf("# braid-info: %.*s\n", (int)strcspn(line, "\n"), line);
}

/* The application's handlers: only compared, but should a real crash
 * reach one, it dies of it as it would have without the handler. */
static const int app_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_APP ((int)(sizeof(app_signals) / sizeof(app_signals[0])))

static void app_handler(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_app_handlers(sigset_t *mask)
{
    struct sigaction act;
    memset(&act, 0, sizeof(act));
    act.sa_handler = app_handler;
    sigemptyset(&act.sa_mask);
    for (int i = 0; i < N_APP; i++)
        sigaction(app_signals[i], &act, NULL);
    /* A mask with something in it, to see that it comes back unchanged. */
    sigemptyset(mask);
    sigaddset(mask, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, mask, NULL);
    pthread_sigmask(SIG_BLOCK, NULL, mask);
}

static void check_app_handlers(const sigset_t *before, int rank)
{
    for (int i = 0; i < N_APP; i++) {
        struct sigaction now;
        if (sigaction(app_signals[i], NULL, &now) != 0 ||
            (now.sa_flags & SA_SIGINFO) || now.sa_handler != app_handler)
            fail(rank,
                 "the handler of signal %d is not the application's "
                 "after braid_init",
                 app_signals[i]);
    }
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    for (int sig = 1; sig < 32; sig++)
        if (sigismember(&mask, sig) != sigismember(before, sig))
            fail(rank, "signal %d is %s after braid_init", sig,
                 sigismember(&mask, sig) ? "blocked" : "unblocked");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " --crash-dir DIR [--plugin-dir DIR] "
               "[--info BRAID_INFO] [--in plugin|transport] "
               "[--how segv|bus|fpe|ill|abort|stack]\n");
}

static const char *signal_of(const char *how)
{
    static const char *const map[][2] = {
        {"segv", "SIGSEGV"}, {"bus", "SIGBUS"},    {"fpe", "SIGFPE"},
        {"ill", "SIGILL"},   {"abort", "SIGABRT"}, {"stack", "SIGSEGV"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(how, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

int main(int argc, char **argv)
{
    const char *crash_dir = NULL, *plugin_dir = NULL, *info = NULL;
    const char *in = "plugin", *how = "segv";

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v != NULL && strcmp(a, "--crash-dir") == 0)
            crash_dir = argv[++i];
        else if (v != NULL && strcmp(a, "--plugin-dir") == 0)
            plugin_dir = argv[++i];
        else if (v != NULL && strcmp(a, "--info") == 0)
            info = argv[++i];
        else if (v != NULL && strcmp(a, "--in") == 0)
            in = argv[++i];
        else if (v != NULL && strcmp(a, "--how") == 0)
            how = argv[++i];
        else {
            usage(stderr);
            return 2;
        }
    }
    const char *sig = signal_of(how);
    if (crash_dir == NULL || sig == NULL ||
        (strcmp(in, "plugin") != 0 && strcmp(in, "transport") != 0)) {
        usage(stderr);
        return 2;
    }
    mp_watchdog(PROG, 120, &step);

    /* The crashing plugin first, so that the ones after it still load. */
    char        path[8192];
    const char *rest = plugin_dir ? plugin_dir : getenv("BRAID_PLUGIN_PATH");
    snprintf(path, sizeof(path), "%s%s%s", crash_dir, rest ? ":" : "",
             rest ? rest : "");
    setenv("BRAID_PLUGIN_PATH", path, 1);
    setenv("BRAID_TEST_CRASH_IN", in, 1);
    setenv("BRAID_TEST_CRASH", how, 1);
    setenv("BRAID_DEBUG", "warn", 1);
    /* UCX replaces the handlers of SIGILL, SIGSEGV, SIGBUS and SIGFPE with
     * its own error reports unless told not to; the check that braid puts
     * back the application's handlers needs UCX to leave them alone. */
    setenv("UCX_ERROR_SIGNALS", "", 1);

    char want[160];
    if (strcmp(in, "plugin") == 0)
        snprintf(want, sizeof(want),
                 "plugin 'crashprobe' crashed in probe "
                 "(%s): skipped",
                 sig);
    else
        snprintf(want, sizeof(want),
                 "transport 'crashtl' of plugin "
                 "'crashprobe' crashed in probe (%s): skipped",
                 sig);

    static char   log[1 << 18];
    braid_comm_t *c = NULL;
    sigset_t      mask;
    install_app_handlers(&mask);
    step              = "braid_init";
    braid_status_t st = init_logged(&c, log, sizeof(log));
    if (st != BRAID_OK) {
        fprintf(stderr,
                PROG " FAIL: braid_init with a plugin that crashes "
                     "in its %s probe (%s): %s: %s\nlog:\n%s",
                in, how, braid_status_str(st), braid_last_error(), log);
        return 1;
    }
    int         rank = braid_comm_rank(c);
    const char *line = strstr(log, want);
    if (line == NULL) {
        /* Every process probes, but only rank 0 must say so. */
        if (rank == 0)
            fail(rank, "the log does not say \"%s\"; it was:\n----\n%s----",
                 want, log);
    } else {
        while (line > log && line[-1] != '\n')
            line--;
        printf("# rank %d: %.*s\n", rank, (int)strcspn(line, "\n"), line);
    }

    check_app_handlers(&mask, rank);
    check_collectives(c, rank);
    if (rank == 0 && info != NULL) {
        char reason[64];
        snprintf(reason, sizeof(reason), "crashed in probe (%s)", sig);
        check_braid_info(info, reason, rank);
    }

    step = "braid_finalize";
    braid_finalize(c);
    printf(PROG " rank %d: %s: %s probe, %s\n", rank,
           failures ? "FAIL" : "PASS", in, how);
    return failures ? 1 : 0;
}
