#include "mp_common.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *coll_names[BRAID_COLL_COUNT] = {
    [BRAID_COLL_ALLREDUCE]      = "allreduce",
    [BRAID_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [BRAID_COLL_ALLGATHER]      = "allgather",
    [BRAID_COLL_BROADCAST]      = "broadcast",
    [BRAID_COLL_BARRIER]        = "barrier",
};

void mp_fatal(const char *prog, int rank, braid_status_t st, const char *fmt,
              ...)
{
    char    what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s rank %d: FATAL %s: status %d (%s): %s\n", prog, rank,
            what, (int)st, braid_status_str(st), braid_last_error());
    fflush(stderr);
    fflush(stdout);
    exit(1);
}

double mp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char        *wd_prog;
static const char *const *wd_what;

/* Only async-signal-safe calls here: write and _exit. */
static void watchdog_fire(int sig)
{
    (void)sig;
    static const char head[] = ": TIMEOUT (watchdog) while in: ";
    if (write(2, wd_prog, strlen(wd_prog)) < 0 ||
        write(2, head, sizeof(head) - 1) < 0)
        _exit(1);
    const char *w = (wd_what && *wd_what) ? *wd_what : "?";
    if (write(2, w, strlen(w)) < 0 || write(2, "\n", 1) < 0)
        _exit(1);
    _exit(1);
}

void mp_watchdog(const char *prog, unsigned seconds, const char *const *what)
{
    wd_prog = prog;
    wd_what = what;
    signal(SIGALRM, watchdog_fire);
    alarm(seconds);
}

void mp_watchdog_name(const char *name) { wd_prog = name; }

int mp_parse_coll(const char *name)
{
    for (int c = 0; c < BRAID_COLL_COUNT; c++)
        if (strcmp(name, coll_names[c]) == 0)
            return c;
    return -1;
}

int mp_algo_string(const char *cand, const char *colls, char *out,
                   size_t out_len)
{
    char   list[256];
    size_t used = 0;
    if (strlen(colls) >= sizeof(list))
        return -1;
    strcpy(list, colls);
    out[0]     = '\0';
    char *save = NULL;
    for (char *c = strtok_r(list, ",", &save); c != NULL;
         c       = strtok_r(NULL, ",", &save)) {
        if (mp_parse_coll(c) < 0)
            return -1;
        int n = snprintf(out + used, out_len - used, "%s%s:%s",
                         used ? ";" : "", c, cand);
        if (n < 0 || (size_t)n >= out_len - used)
            return -1;
        used += (size_t)n;
    }
    return used ? 0 : -1;
}

void mp_slurp(int fd, char *buf, size_t len)
{
    size_t  used = 0;
    ssize_t got;
    lseek(fd, 0, SEEK_SET);
    while (used < len - 1 && (got = read(fd, buf + used, len - 1 - used)) > 0)
        used += (size_t)got;
    buf[used] = '\0';
}
