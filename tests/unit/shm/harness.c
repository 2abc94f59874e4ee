/* See harness.h. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

struct th_board {
    pthread_barrier_t barrier;
    int               n;
    unsigned          arrived; /* th_progress_barrier */
    unsigned          gen;
    char              slots[]; /* n * TH_SLOT */
};

int         th_failures;
static char last_error[1024];

void th_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    th_failures++;
    fprintf(stderr, "FAIL %s:%d [pid %ld]: ", file, line, (long)getpid());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (last error: %s)\n", last_error);
}

double th_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *th_status_str(braid_status_t st)
{
    static char buf[32];

    switch (st) {
    case BRAID_OK: return "OK";
    case BRAID_INPROGRESS: return "INPROGRESS";
    case BRAID_ERR_INVALID_ARG: return "INVALID_ARG";
    case BRAID_ERR_NO_MEMORY: return "NO_MEMORY";
    case BRAID_ERR_UNAVAILABLE: return "UNAVAILABLE";
    case BRAID_ERR_TIMEOUT: return "TIMEOUT";
    case BRAID_ERR_PEER: return "PEER";
    case BRAID_ERR_MISMATCH: return "MISMATCH";
    default:
        snprintf(buf, sizeof(buf), "status %d", (int)st);
        return buf;
    }
}

/* ---------------------------------------------------------------- services */

static void svc_log(braid_log_level_t level, const char *component,
                    const char *fmt, ...)
{
    va_list ap;

    if (getenv("TEST_SHM_VERBOSE") == NULL) {
        return;
    }
    fprintf(stderr, "[%d %s] ", (int)level, component);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

static braid_status_t svc_error(braid_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    if (getenv("TEST_SHM_VERBOSE") != NULL) {
        fprintf(stderr, "[error %d] %s\n", (int)status, last_error);
    }
    return status;
}

static void svc_reduce(void *inout, const void *in, size_t count,
                       braid_dtype_t dtype, braid_op_t op)
{
    (void)inout, (void)in, (void)count, (void)dtype, (void)op;
}

static void svc_reduce2(void *dst, const void *a, const void *b, size_t count,
                        braid_dtype_t dtype, braid_op_t op)
{
    (void)dst, (void)a, (void)b, (void)count, (void)dtype, (void)op;
}

static void svc_finish_avg(void *buf, size_t count, braid_dtype_t dtype,
                           braid_op_t op, int n)
{
    (void)buf, (void)count, (void)dtype, (void)op, (void)n;
}

static double svc_timeout(void) { return 20.0; }

static int svc_cpu_mates(const braid_topo_t *topo, int rank,
                         unsigned char *mate)
{
    (void)rank;
    memset(mate, 0, (size_t)topo->size);
    return -1;
}

unsigned th_sleep_polls;

static unsigned svc_sleep_polls(void) { return th_sleep_polls; }

static const braid_services_t services = {
    .struct_size = sizeof(braid_services_t),
    .cpu_mates  = svc_cpu_mates,
    .sleep_polls = svc_sleep_polls,
    .log        = svc_log,
    .error      = svc_error,
    .reduce     = svc_reduce,
    .reduce2    = svc_reduce2,
    .finish_avg = svc_finish_avg,
    .timeout_s  = svc_timeout,
    .now        = th_now,
};

const braid_services_t *th_services(void) { return &services; }
const char *th_last_error(void) { return last_error; }

const braid_transport_t *th_load(const char *path)
{
    void                    *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const braid_plugin_t *p;

    if (h == NULL) {
        fprintf(stderr, "cannot dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    p = dlsym(h, BRAID_PLUGIN_SYMBOL);
    if (p == NULL || p->abi_version != BRAID_PLUGIN_ABI_VERSION ||
        p->struct_size != sizeof(*p) || strcmp(p->name, "shm") != 0) {
        fprintf(stderr, "%s: not a braid ABI-%u plugin named shm\n", path,
                BRAID_PLUGIN_ABI_VERSION);
        exit(1);
    }
    for (int t = 0; t < p->n_transports; t++) {
        if (strcmp(p->transports[t]->name, "shm") == 0) {
            return p->transports[t];
        }
    }
    fprintf(stderr, "%s: no transport named shm\n", path);
    exit(1);
}

/* --------------------------------------------------------------------- oob */

void th_barrier(th_rank_t *r)
{
    pthread_barrier_wait(&r->board->barrier);
}

void th_relax(th_rank_t *r, unsigned *polls)
{
    if (r->oversub || (++*polls & 255) == 0) {
        sched_yield();
    }
}

void th_progress_barrier(th_rank_t *r, void *tcomm)
{
    unsigned gen = __atomic_load_n(&r->board->gen, __ATOMIC_ACQUIRE);

    if (__atomic_fetch_add(&r->board->arrived, 1, __ATOMIC_ACQ_REL) ==
        (unsigned)r->size - 1) {
        __atomic_store_n(&r->board->arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&r->board->gen, gen + 1, __ATOMIC_RELEASE);
        return;
    }
    unsigned polls = 0;
    while (__atomic_load_n(&r->board->gen, __ATOMIC_ACQUIRE) == gen) {
        r->tl->progress(tcomm);
        th_relax(r, &polls);
    }
}

static braid_status_t oob_allgather(void *ctx, const void *sendbuf,
                                    void *recvbuf, size_t len)
{
    th_rank_t *r = ctx;

    if (len > TH_SLOT) {
        fprintf(stderr, "oob allgather of %zu bytes > %d\n", len, TH_SLOT);
        abort();
    }
    memcpy(r->board->slots + (size_t)r->rank * TH_SLOT, sendbuf, len);
    th_barrier(r);
    for (int i = 0; i < r->size; i++) {
        memcpy((char *)recvbuf + (size_t)i * len,
               r->board->slots + (size_t)i * TH_SLOT, len);
    }
    th_barrier(r); /* nobody overwrites a slot before all have read it */
    return BRAID_OK;
}

static braid_status_t oob_barrier(void *ctx)
{
    th_barrier(ctx);
    return BRAID_OK;
}

/* ------------------------------------------------------------------ ranks */

int th_run(const braid_transport_t *tl, int n, th_body_fn body, void *arg,
           int timeout_s, const char *label)
{
    size_t               bytes = sizeof(th_board_t) + (size_t)n * TH_SLOT;
    th_board_t          *board;
    pthread_barrierattr_t attr;
    pid_t               *pids = calloc((size_t)n, sizeof(pid_t));
    int                  failed = 0;
    long                 ncpu   = sysconf(_SC_NPROCESSORS_ONLN);

    board = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (board == MAP_FAILED || pids == NULL) {
        perror("board");
        exit(1);
    }
    board->n = n;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&board->barrier, &attr, (unsigned)n);
    pthread_barrierattr_destroy(&attr);

    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            exit(1);
        }
        if (pids[i] == 0) {
            th_rank_t r = {.rank = i, .size = n, .board = board,
                           .oversub = n > (ncpu > 0 ? ncpu : 1),
                           .svc = &services, .tl = tl};
            r.oob = (braid_oob_t){sizeof(braid_oob_t), i, n, &r,
                                  oob_allgather, oob_barrier};
            alarm((unsigned)timeout_s); /* a hung rank dies loudly */
            th_failures = 0;
            int f = body(&r, arg) + th_failures;
            fflush(NULL);
            exit(f ? 1 : 0); /* not _exit: LeakSanitizer checks here */
        }
    }
    for (int i = 0; i < n; i++) {
        int status = 0;
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
            if (WIFSIGNALED(status)) {
                fprintf(stderr, "FAIL %s n=%d: rank %d killed by signal %d%s\n",
                        label, n, i, WTERMSIG(status),
                        WTERMSIG(status) == SIGALRM ? " (watchdog: hung)" : "");
            } else {
                fprintf(stderr, "FAIL %s n=%d: rank %d exited with %d\n", label,
                        n, i, WEXITSTATUS(status));
            }
        }
        if (th_count_shm_names(pids[i]) != 0) {
            failed++;
            fprintf(stderr, "FAIL %s n=%d: rank %d (pid %ld) left segments in "
                    "/dev/shm\n", label, n, i, (long)pids[i]);
        }
    }
    pthread_barrier_destroy(&board->barrier);
    munmap(board, bytes);
    free(pids);
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

int th_count_shm_names(long pid)
{
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;
    char           prefix[64];
    int            n = 0;

    if (d == NULL) {
        return 0;
    }
    snprintf(prefix, sizeof(prefix), "braid-shm-%u-%ld-", (unsigned)getuid(),
             pid);
    while ((e = readdir(d)) != NULL) {
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
    closedir(d);
    return n;
}

braid_status_t th_wait(th_rank_t *r, void *tcomm, braid_treq_t *reqs, int n)
{
    double   deadline = th_now() + 15.0;
    unsigned polls    = 0, idle = 0;

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
         * after th_sleep_polls idle polls, on an oversubscribed host. */
        if (th_sleep_polls > 0 && r->oversub && ++idle >= th_sleep_polls &&
            r->tl->wait != NULL) {
            idle = 0;
            r->tl->wait(tcomm, 1e-3);
            continue;
        }
        th_relax(r, &polls);
    }
}
