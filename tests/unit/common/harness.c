/* See harness.h. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "loader/loader.h"
#include "util/env.h"
#include "util/log.h"

/* ---------------------------------------------------------------- services */

const braid_services_t *tu_svc(void) { return braid_core_services(); }
const char             *tu_last_error(void) { return braid_last_error(); }
void                    tu_clear_error(void) { braid_error_clear(); }
double                  tu_now(void) { return braid_now_s(); }

void tu_set_timeout(double s)
{
    char v[32];
    snprintf(v, sizeof(v), "%g", s);
    setenv("BRAID_TIMEOUT", v, 1);
    braid_env_timeout_reset();
}

void tu_set_sleep_polls(unsigned n)
{
    char v[16];
    snprintf(v, sizeof(v), "%u", n);
    setenv("BRAID_SLEEP_POLLS", v, 1);
}

/* --------------------------------------------------- out-of-band channel */

#define TU_MAX_RANKS 64

typedef struct rank_ctx {
    tu_board_t *b;
    int         rank;
} rank_ctx_t;

struct tu_board {
    pthread_mutex_t mu; /* process-shared, like everything here */
    pthread_cond_t  cv;
    int             n;
    size_t          max_len, map_len;
    int             arrived, departed, draining, aborted;
    unsigned long   gen;
    size_t          len;      /* of the current round */
    unsigned        parrived; /* tu_progress_barrier (atomics) */
    unsigned        pgen;
    rank_ctx_t      ctx[TU_MAX_RANKS];
    char            slots[]; /* n * max_len */
};

tu_board_t *tu_board_new(int n, size_t max_len)
{
    if (n < 1 || n > TU_MAX_RANKS)
        return NULL;
    size_t      len = sizeof(tu_board_t) + (size_t)n * max_len;
    tu_board_t *b   = mmap(NULL, len, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED)
        return NULL;
    pthread_mutexattr_t ma;
    pthread_condattr_t  ca;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&b->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_cond_init(&b->cv, &ca);
    pthread_condattr_destroy(&ca);
    b->n       = n;
    b->max_len = max_len;
    b->map_len = len;
    for (int r = 0; r < n; r++)
        b->ctx[r] = (rank_ctx_t){b, r};
    return b;
}

void tu_board_free(tu_board_t *b)
{
    if (b == NULL)
        return;
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    munmap(b, b->map_len);
}

void tu_board_abort(tu_board_t *b)
{
    pthread_mutex_lock(&b->mu);
    b->aborted = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* Waits on the board until woken; an error once the deadline passed or a
 * rank aborted the board.  Called with the lock held. */
static braid_status_t board_wait(tu_board_t *b, const struct timespec *dl,
                                 int rank, const char *what)
{
    if (b->aborted)
        return braid_error(BRAID_ERR_PEER,
                           "test oob: rank %d: another rank "
                           "aborted during %s",
                           rank, what);
    if (pthread_cond_timedwait(&b->cv, &b->mu, dl) == ETIMEDOUT)
        return braid_error(BRAID_ERR_TIMEOUT,
                           "test oob: rank %d: %s timed "
                           "out",
                           rank, what);
    return BRAID_OK;
}

static braid_status_t board_allgather(void *ctx, const void *sendbuf,
                                      void *recvbuf, size_t len)
{
    rank_ctx_t    *c  = ctx;
    tu_board_t    *b  = c->b;
    braid_status_t st = BRAID_OK;

    if (len > b->max_len)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "test oob: rank %d "
                           "allgathers %zu bytes, the board takes %zu",
                           c->rank, len, b->max_len);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)braid_timeout_s() + 1;
    pthread_mutex_lock(&b->mu);
    /* The previous round's ranks may still be copying out. */
    while (st == BRAID_OK && b->draining)
        st = board_wait(b, &dl, c->rank, "an allgather (drain)");
    if (st != BRAID_OK)
        goto out;
    if (b->arrived == 0) {
        b->len = len;
    } else if (b->len != len) {
        st = braid_error(BRAID_ERR_MISMATCH,
                         "test oob: rank %d allgathers "
                         "%zu bytes, others %zu",
                         c->rank, len, b->len);
        goto out;
    }
    if (len > 0)
        memcpy(b->slots + (size_t)c->rank * b->max_len, sendbuf, len);
    unsigned long gen = b->gen;
    if (++b->arrived == b->n) {
        b->gen++;
        b->draining = 1;
        pthread_cond_broadcast(&b->cv);
    }
    while (st == BRAID_OK && b->gen == gen)
        st = board_wait(b, &dl, c->rank, "an allgather");
    if (st != BRAID_OK)
        goto out;
    for (int r = 0; r < b->n && len > 0; r++)
        memcpy((char *)recvbuf + (size_t)r * len,
               b->slots + (size_t)r * b->max_len, len);
    if (++b->departed == b->n) {
        b->arrived = b->departed = b->draining = 0;
        pthread_cond_broadcast(&b->cv);
    }
out:
    pthread_mutex_unlock(&b->mu);
    return st;
}

static braid_status_t board_barrier(void *ctx)
{
    return board_allgather(ctx, NULL, NULL, 0);
}

void tu_oob(braid_oob_t *oob, tu_board_t *b, int rank)
{
    memset(oob, 0, sizeof(*oob));
    oob->struct_size = sizeof(*oob);
    oob->rank        = rank;
    oob->size        = b->n;
    oob->ctx         = &b->ctx[rank];
    oob->allgather   = board_allgather;
    oob->barrier     = board_barrier;
}

braid_status_t tu_barrier(tu_board_t *b, int rank)
{
    return board_barrier(&b->ctx[rank]);
}

braid_status_t tu_progress_barrier(tu_board_t *b, int rank,
                                   const braid_transport_t *tl, void *tcomm)
{
    unsigned gen = __atomic_load_n(&b->pgen, __ATOMIC_ACQUIRE);
    double   t0  = tu_now();

    if (__atomic_fetch_add(&b->parrived, 1, __ATOMIC_ACQ_REL) ==
        (unsigned)b->n - 1) {
        __atomic_store_n(&b->parrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->pgen, gen + 1, __ATOMIC_RELEASE);
        return BRAID_OK;
    }
    for (unsigned polls = 0;
         __atomic_load_n(&b->pgen, __ATOMIC_ACQUIRE) == gen; polls++) {
        if (tl->progress != NULL)
            tl->progress(tcomm);
        if ((polls & 15) == 15)
            sched_yield(); /* ranks share cores */
        if (__atomic_load_n(&b->aborted, __ATOMIC_RELAXED) ||
            tu_now() - t0 > braid_timeout_s())
            return braid_error(BRAID_ERR_TIMEOUT,
                               "test oob: rank %d: "
                               "progress barrier %s",
                               rank, b->aborted ? "aborted" : "timed out");
    }
    return BRAID_OK;
}

/* ---------------------------------------------------------------- plugins */

const braid_plugin_t *tu_plugin_open(const char *path, void **dl)
{
    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (*dl == NULL) {
        fprintf(stderr, "cannot dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    const braid_plugin_t *p = dlsym(*dl, BRAID_PLUGIN_SYMBOL);
    if (p == NULL || p->abi_version != BRAID_PLUGIN_ABI_VERSION ||
        p->struct_size < sizeof(*p)) {
        fprintf(stderr, "%s: not a braid ABI-%u plugin\n", path,
                BRAID_PLUGIN_ABI_VERSION);
        exit(1);
    }
    return p;
}

void tu_plugin_close(const braid_plugin_t *p, void *dl)
{
    if (p != NULL && p->unload != NULL)
        p->unload(p);
    if (dl != NULL)
        dlclose(dl);
}

const braid_transport_t *tu_transport(const braid_plugin_t *p,
                                      const char           *name)
{
    for (int i = 0; i < p->n_transports; i++)
        if (strcmp(p->transports[i]->name, name) == 0)
            return p->transports[i];
    return NULL;
}

const braid_algo_t *tu_algo(const braid_plugin_t *p, braid_coll_t coll,
                            const char *name)
{
    for (int i = 0; i < p->n_algos; i++)
        if (p->algos[i]->coll == coll && strcmp(p->algos[i]->name, name) == 0)
            return p->algos[i];
    return NULL;
}

/* ------------------------------------------------------------------ ranks */

int tu_shm_names(long pid, int and_unlink)
{
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;
    char           prefix[64], path[320];
    int            n = 0;

    if (d == NULL) {
        return 0;
    }
    snprintf(prefix, sizeof(prefix), "braid-shm-%u-%ld-", (unsigned)getuid(),
             pid);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof(path), "/%s", e->d_name);
        n += !and_unlink || shm_unlink(path) == 0;
    }
    closedir(d);
    return n;
}

int tu_clear_stale_shm_names(void)
{
    int n = tu_shm_names((long)getpid(), 1);
    if (n > 0) {
        fprintf(stderr,
                "note: pid %ld: removed %d stale segment name(s) of "
                "an earlier process with this id\n",
                (long)getpid(), n);
    }
    return n;
}

int tu_fork(int n, tu_rank_fn fn, void *arg, unsigned timeout_s,
            const char *label, long *pids_out)
{
    pid_t *pids   = calloc((size_t)n, sizeof(pid_t));
    int    failed = 0;

    if (pids == NULL) {
        perror("tu_fork");
        exit(1);
    }
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        if ((pids[i] = fork()) < 0) {
            perror("fork");
            exit(1);
        }
        if (pids[i] == 0) {
            alarm(timeout_s);
            tu_clear_stale_shm_names();
            int f = fn(i, n, arg);
            fflush(NULL);
            exit(f ? 1 : 0); /* not _exit: LeakSanitizer checks here */
        }
    }
    for (int i = 0; i < n; i++) {
        int status = 0;
        if (pids_out != NULL)
            pids_out[i] = (long)pids[i];
        waitpid(pids[i], &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        failed++;
        if (WIFSIGNALED(status))
            fprintf(stderr, "FAIL %s n=%d: rank %d killed by signal %d%s\n",
                    label, n, i, WTERMSIG(status),
                    WTERMSIG(status) == SIGALRM ? " (watchdog: hung)" : "");
        else
            fprintf(stderr, "FAIL %s n=%d: rank %d exited with %d\n", label, n,
                    i, WEXITSTATUS(status));
    }
    free(pids);
    return failed;
}

typedef struct thread_arg {
    tu_rank_fn fn;
    void      *arg;
    int        rank, n, result;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *t = p;
    t->result       = t->fn(t->rank, t->n, t->arg);
    return NULL;
}

int tu_threads(int n, tu_rank_fn fn, void *arg)
{
    pthread_t    *th  = calloc((size_t)n, sizeof(pthread_t));
    thread_arg_t *ta  = calloc((size_t)n, sizeof(thread_arg_t));
    int           sum = 0;

    if (th == NULL || ta == NULL) {
        perror("tu_threads");
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        ta[i] = (thread_arg_t){fn, arg, i, n, 0};
        if (pthread_create(&th[i], NULL, thread_main, &ta[i]) != 0) {
            perror("pthread_create");
            exit(1);
        }
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        sum += ta[i].result;
    }
    free(th);
    free(ta);
    return sum;
}

braid_topo_t tu_topo(int n, int *nodes)
{
    for (int i = 0; i < n; i++)
        nodes[i] = 0;
    return (braid_topo_t){.struct_size  = sizeof(braid_topo_t),
                          .size         = n,
                          .kind         = BRAID_TOPO_SINGLE_HOST,
                          .nnodes       = 1,
                          .ppn          = n,
                          .node_of_rank = nodes,
                          .nmates       = -1};
}

/* ---------------------------------------------------------------- a call */

braid_status_t tu_drive(const braid_algo_t *algo, braid_task_t *task,
                        double limit_s)
{
    double         deadline = tu_now() + limit_s;
    braid_wait_t   wait     = BRAID_WAIT_LOCAL;
    braid_status_t st;

    task->priv = NULL;
    st         = algo->start(task, &wait);
    while (st == BRAID_OK || st == BRAID_INPROGRESS) {
        wait = BRAID_WAIT_LOCAL;
        if ((st = algo->progress(task, &wait)) != BRAID_INPROGRESS)
            break;
        if (tu_now() > deadline) {
            st = braid_error(BRAID_ERR_TIMEOUT,
                             "test: %s did not finish in "
                             "%.0f s",
                             algo->name, limit_s);
            break;
        }
        sched_yield(); /* rank threads share the cores */
    }
    algo->finish(task); /* after a failed start too */
    return st;
}
