#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "scalar.h"

/* ------------------------------------------------------------- services */

static __thread char last_error[1024];

const char *th_last_error(void)
{
    return last_error;
}

double th_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void svc_log(braid_log_level_t level, const char *component,
                    const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
    const char        *env     = getenv("UCX_TEST_VERBOSE");
    va_list            ap;

    if (level > BRAID_LOG_WARN && (env == NULL || env[0] == '0')) {
        return;
    }
    fprintf(stderr, "[%s %s] ", names[level], component);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static braid_status_t svc_error(braid_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return status;
}

static double svc_timeout(void)
{
    return TH_TIMEOUT_S;
}

/* Who shares a CPU is unknown here (threads are not pinned). */
static int svc_cpu_mates(const braid_topo_t *topo, int rank,
                         unsigned char *mate)
{
    (void)rank;
    memset(mate, 0, (size_t)topo->size);
    return -1;
}

static unsigned svc_sleep_polls(void) { return 0; }

const braid_services_t th_svc = {
    .struct_size = sizeof(braid_services_t),
    .cpu_mates  = svc_cpu_mates,
    .sleep_polls = svc_sleep_polls,
    .log        = svc_log,
    .error      = svc_error,
    .reduce     = ts_reduce,
    .reduce2    = ts_reduce2,
    .finish_avg = ts_finish_avg,
    .timeout_s  = svc_timeout,
    .now        = th_now,
};

/* ------------------------------------------------------------ the board */

void th_board_init(th_board_t *b, int n)
{
    memset(b, 0, sizeof(*b));
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->n = n;
}

void th_board_destroy(th_board_t *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->buf);
}

/* Waits on the board's condition variable until *pred holds or the timeout;
 * returns 0 on timeout. */
static int board_wait(th_board_t *b, const struct timespec *deadline)
{
    int rc = pthread_cond_timedwait(&b->cv, &b->mu, deadline);
    return rc != ETIMEDOUT;
}

static braid_status_t board_allgather(void *ctx, const void *sendbuf,
                                      void *recvbuf, size_t len)
{
    th_oob_ctx_t   *c = ctx;
    th_board_t     *b = c->board;
    struct timespec deadline;
    unsigned long   gen;
    braid_status_t  st = BRAID_OK;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)TH_TIMEOUT_S;
    pthread_mutex_lock(&b->mu);
    /* The previous round's ranks may still be copying out. */
    while (b->draining) {
        if (!board_wait(b, &deadline)) {
            st = svc_error(BRAID_ERR_TIMEOUT, "test oob: drain timeout");
            goto out;
        }
    }
    if (b->arrived == 0) {
        if (b->cap < len * (size_t)b->n) {
            free(b->buf);
            b->cap = len * (size_t)b->n;
            b->buf = malloc(b->cap);
        }
        b->len = len;
    } else if (b->len != len) {
        st = svc_error(BRAID_ERR_MISMATCH, "test oob: rank %d allgathers %zu "
                       "bytes, others %zu", c->rank, len, b->len);
        goto out;
    }
    if (len > 0) {
        memcpy(b->buf + (size_t)c->rank * len, sendbuf, len);
    }
    gen = b->gen;
    if (++b->arrived == b->n) {
        b->gen++;
        b->draining = 1;
        pthread_cond_broadcast(&b->cv);
    } else {
        while (b->gen == gen) {
            if (!board_wait(b, &deadline)) {
                st = svc_error(BRAID_ERR_TIMEOUT, "test oob: rank %d: "
                               "allgather timeout", c->rank);
                goto out;
            }
        }
    }
    if (len > 0) {
        memcpy(recvbuf, b->buf, len * (size_t)b->n);
    }
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
    char one = 1, all[64];
    th_oob_ctx_t *c = ctx;

    if (c->board->n > (int)sizeof(all)) {
        return BRAID_ERR_INTERNAL;
    }
    return board_allgather(ctx, &one, all, 1);
}

void th_oob(braid_oob_t *oob, th_oob_ctx_t *ctx, th_board_t *b, int rank)
{
    ctx->board     = b;
    ctx->rank      = rank;
    oob->struct_size = sizeof(*oob);
    oob->rank      = rank;
    oob->size      = b->n;
    oob->ctx       = ctx;
    oob->allgather = board_allgather;
    oob->barrier   = board_barrier;
}

/* ------------------------------------------------------------- plugin */

static const braid_plugin_t *open_desc(void **dl, const char *path)
{
    const braid_plugin_t *d;

    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (*dl == NULL) {
        fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
        return NULL;
    }
    d = dlsym(*dl, BRAID_PLUGIN_SYMBOL);
    if (d == NULL) {
        fprintf(stderr, "%s: no symbol %s\n", path, BRAID_PLUGIN_SYMBOL);
        return NULL;
    }
    if (d->abi_version != BRAID_PLUGIN_ABI_VERSION ||
        d->struct_size != sizeof(braid_plugin_t)) {
        fprintf(stderr, "%s: ABI %u/%u, expected %u/%zu\n", path,
                d->abi_version, d->struct_size, BRAID_PLUGIN_ABI_VERSION,
                sizeof(braid_plugin_t));
        return NULL;
    }
    return d;
}

int th_plugin_load(th_plugin_t *p, const char *path, const char *algo_path)
{
    memset(p, 0, sizeof(*p));
    if ((p->desc = open_desc(&p->dl, path)) == NULL ||
        (p->adesc = open_desc(&p->adl, algo_path)) == NULL) {
        return -1;
    }
    for (int i = 0; i < p->desc->n_transports; i++) {
        if (strcmp(p->desc->transports[i]->name, "ucx") == 0) {
            p->tl = p->desc->transports[i];
        }
    }
    if (p->tl == NULL) {
        fprintf(stderr, "%s: no transport \"ucx\"\n", path);
        return -1;
    }
    return 0;
}

void th_plugin_unload(th_plugin_t *p)
{
    if (p->desc != NULL && p->desc->unload != NULL) {
        p->desc->unload(p->desc);
    }
    if (p->adl != NULL) {
        dlclose(p->adl);
    }
    if (p->dl != NULL) {
        dlclose(p->dl);
    }
    memset(p, 0, sizeof(*p));
}

const braid_algo_t *th_find_algo(const th_plugin_t *p, braid_coll_t coll,
                                    const char *name)
{
    for (int i = 0; i < p->adesc->n_algos; i++) {
        const braid_algo_t *a = p->adesc->algos[i];
        if (a->coll == coll && strcmp(a->name, name) == 0) {
            return a;
        }
    }
    return NULL;
}

braid_status_t th_drive(const braid_algo_t *algo, braid_task_t *task)
{
    double         deadline = th_now() + 2 * TH_TIMEOUT_S;
    braid_status_t st;

    braid_wait_t   wait;

    task->priv = NULL;
    st = algo->start(task, &wait);
    while (st == BRAID_OK || st == BRAID_INPROGRESS) {
        if ((st = algo->progress(task, &wait)) != BRAID_INPROGRESS)
            break;
        if (th_now() > deadline) {
            st = svc_error(BRAID_ERR_TIMEOUT, "test: %s did not finish",
                           algo->name);
            break;
        }
        sched_yield(); /* 8 rank threads share 2 cores */
    }
    algo->finish(task); /* after a failed start too */
    return st;
}
