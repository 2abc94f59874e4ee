/* See harness.h. */
#include <dirent.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define OOB_MAX 4096 /* largest oob contribution of the transport */

int             th_failures;
static unsigned sleep_polls;

void th_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    th_failures++;
    fprintf(stderr, "FAIL %s:%d [pid %ld]: ", file, line, (long)getpid());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (last error: %s)\n", tu_last_error());
}

const braid_transport_t *th_load(const char *path)
{
    void                    *dl;
    const braid_plugin_t    *p  = tu_plugin_open(path, &dl);
    const braid_transport_t *tl = tu_transport(p, "shm");
    if (tl == NULL) {
        fprintf(stderr, "%s: no transport named shm\n", path);
        exit(1);
    }
    tu_set_timeout(20.0);
    return tl; /* stays loaded for the process */
}

void th_set_sleep_polls(unsigned n)
{
    sleep_polls = n;
    tu_set_sleep_polls(n);
}

void th_barrier(th_rank_t *r)
{
    braid_status_t st = tu_barrier(r->board, r->rank);
    TH_CHECK(st == BRAID_OK, "barrier: %s", tu_last_error());
}

void th_progress_barrier(th_rank_t *r, void *tcomm)
{
    braid_status_t st = tu_progress_barrier(r->board, r->rank, r->tl, tcomm);
    TH_CHECK(st == BRAID_OK, "progress barrier: %s", tu_last_error());
}

void th_relax(th_rank_t *r, unsigned *polls)
{
    if (r->oversub || (++*polls & 255) == 0) {
        sched_yield();
    }
}

/* ------------------------------------------------------------------ ranks */

typedef struct run_arg {
    const braid_transport_t *tl;
    tu_board_t              *board;
    th_body_fn               body;
    void                    *arg;
} run_arg_t;

static int run_rank(int rank, int n, void *p)
{
    run_arg_t *ra   = p;
    long       ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    th_rank_t  r    = {.rank    = rank,
                       .size    = n,
                       .board   = ra->board,
                       .oversub = n > (ncpu > 0 ? ncpu : 1),
                       .svc     = tu_svc(),
                       .tl      = ra->tl};
    tu_oob(&r.oob, ra->board, rank);
    th_failures = 0;
    int f       = ra->body(&r, ra->arg) + th_failures;
    if (f != 0)
        tu_board_abort(ra->board); /* peers fail instead of waiting */
    return f;
}

int th_run(const braid_transport_t *tl, int n, th_body_fn body, void *arg,
           int timeout_s, const char *label)
{
    run_arg_t ra = {tl, tu_board_new(n, OOB_MAX), body, arg};
    if (ra.board == NULL) {
        perror("board");
        exit(1);
    }
    long *pids = calloc((size_t)n, sizeof(long));
    if (pids == NULL)
        exit(1);
    int failed = tu_fork(n, run_rank, &ra, (unsigned)timeout_s, label, pids);
    for (int i = 0; i < n; i++) {
        if (th_count_shm_names(pids[i]) != 0) {
            failed++;
            fprintf(stderr,
                    "FAIL %s n=%d: rank %d (pid %ld) left segments "
                    "in /dev/shm\n",
                    label, n, i, pids[i]);
        }
    }
    free(pids);
    tu_board_free(ra.board);
    return failed;
}

/* ---------------------------------------------------------------- checks */

int th_count_fds(void)
{
    DIR           *d = opendir("/proc/self/fd");
    struct dirent *e;
    int            n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

int th_count_shm_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char  line[1024];
    int   n = 0;

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, "/dev/shm/braid-shm-") != NULL;
    }
    fclose(f);
    return n;
}

int th_count_shm_names(long pid) { return tu_shm_names(pid, 0); }

braid_status_t th_wait(th_rank_t *r, void *tcomm, braid_treq_t *reqs, int n)
{
    double   deadline = th_now() + 15.0;
    unsigned polls = 0, idle = 0;

    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (!reqs[i].active) {
                continue;
            }
            braid_status_t st = r->tl->test(tcomm, &reqs[i]);
            if (st == BRAID_INPROGRESS) {
                pending++;
            } else if (st != BRAID_OK) {
                return st;
            }
        }
        if (pending == 0) {
            return BRAID_OK;
        }
        if (th_now() > deadline) {
            return BRAID_ERR_TIMEOUT;
        }
        /* As the core's policy does: sleep in the transport's wait hook
         * after sleep_polls idle polls, on an oversubscribed host. */
        if (sleep_polls > 0 && r->oversub && ++idle >= sleep_polls &&
            r->tl->wait != NULL) {
            idle = 0;
            r->tl->wait(tcomm, 1e-3);
            continue;
        }
        th_relax(r, &polls);
    }
}
