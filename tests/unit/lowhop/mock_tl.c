/* The in-process put-with-signal transport of the lowhop tests (mock_tl.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock_tl.h"

typedef struct mock_op {
    unsigned char  *dst;
    const void     *src;
    size_t          len;
    uint64_t       *flag;
    uint64_t        val;
    int             done;
    struct mock_op *next; /* on the sender's pending list */
} mock_op_t;

struct mock_world {
    int               n;
    int               chaos;
    uint64_t          seed;
    pthread_barrier_t bar;
    void             *areas[MOCK_MAX_RANKS]; /* published by mem_alloc */
    size_t            lens[MOCK_MAX_RANKS];
    long              errors; /* atomic */
};

struct mock_tl {
    mock_world_t *w;
    int           rank;
    uint64_t      rng;
    mock_op_t    *pending; /* puts not delivered yet */
    long          allocs;
    long          live;
};

typedef struct mock_rmem {
    unsigned char *peer[MOCK_MAX_RANKS];
} mock_rmem_t;

static uint64_t rnd(mock_tl_t *t)
{
    uint64_t z = (t->rng += 0x9e3779b97f4a7c15u);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void world_error(mock_world_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void world_error(mock_world_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mock_tl: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    __atomic_add_fetch(&w->errors, 1, __ATOMIC_RELAXED);
}

mock_world_t *mock_world_new(int n, uint64_t seed, int chaos)
{
    if (n < 1 || n > MOCK_MAX_RANKS)
        return NULL;
    mock_world_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    w->n     = n;
    w->seed  = seed;
    w->chaos = chaos;
    pthread_barrier_init(&w->bar, NULL, (unsigned)n);
    return w;
}

void mock_world_free(mock_world_t *w)
{
    if (w == NULL)
        return;
    pthread_barrier_destroy(&w->bar);
    free(w);
}

long mock_world_errors(const mock_world_t *w)
{
    return __atomic_load_n(&w->errors, __ATOMIC_RELAXED);
}

void mock_world_barrier(mock_world_t *w) { pthread_barrier_wait(&w->bar); }

mock_tl_t *mock_tl_new(mock_world_t *w, int rank)
{
    mock_tl_t *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->w    = w;
    t->rank = rank;
    t->rng  = w->seed ^ ((uint64_t)(rank + 1) * 0x2545f4914f6cdd1du);
    return t;
}

static void deliver(mock_tl_t *t, mock_op_t *op)
{
    if (t->w->chaos && rnd(t) % 64 == 0) {
        struct timespec ts = {0, (long)(rnd(t) % 50000)};
        nanosleep(&ts, NULL);
    }
    if (op->len > 0)
        memcpy(op->dst, op->src, op->len);
    __atomic_store_n(op->flag, op->val, __ATOMIC_RELEASE);
    op->done = 1;
}

/* Delivers each pending put with probability 1/2: late and out of order. */
static braid_status_t mock_progress(void *tcomm)
{
    mock_tl_t  *t  = tcomm;
    mock_op_t **pp = &t->pending;
    while (*pp != NULL) {
        mock_op_t *op = *pp;
        if (rnd(t) & 1) {
            *pp = op->next;
            deliver(t, op);
        } else {
            pp = &op->next;
        }
    }
    return BRAID_OK;
}

void mock_tl_free(mock_tl_t *t)
{
    if (t == NULL)
        return;
    if (t->pending != NULL)
        world_error(t->w, "rank %d: put still pending at teardown", t->rank);
    while (t->pending != NULL) {
        mock_op_t *op = t->pending;
        t->pending    = op->next;
        free(op);
    }
    if (t->live != 0)
        world_error(t->w, "rank %d: %ld areas never freed", t->rank, t->live);
    free(t);
}

long mock_tl_allocs(const mock_tl_t *t) { return t->allocs; }
long mock_tl_live_areas(const mock_tl_t *t) { return t->live; }

static braid_status_t mock_comm_create(const braid_transport_t *self,
                                       const braid_services_t  *svc,
                                       const braid_oob_t       *oob,
                                       const braid_topo_t *topo, void **tcomm)
{
    (void)self, (void)svc, (void)oob, (void)topo, (void)tcomm;
    return BRAID_ERR_NOT_SUPPORTED; /* tests make endpoints with mock_tl_new */
}

static void mock_comm_destroy(void *tcomm) { (void)tcomm; }

static void mock_link(void *tcomm, braid_link_t *link)
{
    (void)tcomm;
    link->alpha_us      = 1.0;
    link->beta_gbps     = 10.0;
    link->put_alpha_us  = 1.0;
    link->put_beta_gbps = 10.0;
}

/* Collective, like every mem_alloc: each rank publishes its area, all read
 * the table, and a second barrier keeps the next call from overwriting it
 * before everyone has read it. */
static braid_status_t mock_mem_alloc(void *tcomm, size_t len,
                                     braid_rmem_t *mem)
{
    mock_tl_t     *t    = tcomm;
    mock_world_t  *w    = t->w;
    size_t         alen = (len + 63) / 64 * 64;
    unsigned char *area = aligned_alloc(64, alen ? alen : 64);
    mock_rmem_t   *rm   = calloc(1, sizeof(*rm));

    memset(mem, 0, sizeof(*mem));
    if (area != NULL)
        memset(area, 0, alen);
    w->areas[t->rank] = area;
    w->lens[t->rank]  = len;
    pthread_barrier_wait(&w->bar);
    int ok = 1;
    for (int p = 0; p < w->n; p++) {
        if (w->areas[p] == NULL || w->lens[p] != len)
            ok = 0;
        if (rm != NULL)
            rm->peer[p] = w->areas[p];
    }
    pthread_barrier_wait(&w->bar);
    if (!ok || rm == NULL) {
        if (!ok)
            world_error(w,
                        "rank %d: mem_alloc of %zu bytes: ranks disagree "
                        "on the size or one is out of memory",
                        t->rank, len);
        free(area);
        free(rm);
        return BRAID_ERR_MISMATCH;
    }
    mem->local = area;
    mem->len   = len;
    mem->impl  = rm;
    t->allocs++;
    t->live++;
    return BRAID_OK;
}

static void mock_mem_free(void *tcomm, braid_rmem_t *mem)
{
    mock_tl_t *t = tcomm;
    if (mem->impl == NULL)
        return;
    free(mem->local);
    free(mem->impl);
    memset(mem, 0, sizeof(*mem));
    t->live--;
}

static braid_status_t mock_put_signal(void *tcomm, braid_rmem_t *mem, int peer,
                                      size_t dst_off, const void *src,
                                      size_t len, size_t flag_off,
                                      uint64_t flag_val, braid_treq_t *req)
{
    mock_tl_t   *t  = tcomm;
    mock_rmem_t *rm = mem->impl;

    req->handle = NULL;
    req->active = 0;
    if (rm == NULL || peer < 0 || peer >= t->w->n || peer == t->rank ||
        dst_off > mem->len || len > mem->len - dst_off ||
        flag_off > mem->len || mem->len - flag_off < 8 || flag_off % 8 != 0 ||
        (flag_off < dst_off + len && dst_off < flag_off + 8) ||
        (len > 0 && src == NULL)) {
        world_error(t->w,
                    "rank %d: bad put_signal to %d: %zu bytes at %zu, "
                    "flag at %zu, area %zu",
                    t->rank, peer, len, dst_off, flag_off, mem->len);
        return BRAID_ERR_INVALID_ARG;
    }
    mock_op_t *op = calloc(1, sizeof(*op));
    if (op == NULL)
        return BRAID_ERR_NO_MEMORY;
    op->dst  = rm->peer[peer] + dst_off;
    op->src  = src;
    op->len  = len;
    op->flag = (uint64_t *)(void *)(rm->peer[peer] + flag_off);
    op->val  = flag_val;
    if (!t->w->chaos || rnd(t) % 4 == 0) {
        deliver(t, op);
    } else {
        op->next   = t->pending;
        t->pending = op;
    }
    req->handle = op;
    req->active = 1;
    return BRAID_OK;
}

static braid_status_t mock_test(void *tcomm, braid_treq_t *req)
{
    mock_progress(tcomm);
    mock_op_t *op = req->handle;
    if (op == NULL) {
        req->active = 0;
        return BRAID_OK;
    }
    if (!op->done)
        return BRAID_INPROGRESS;
    free(op);
    req->handle = NULL;
    req->active = 0;
    return BRAID_OK;
}

/* A put not delivered yet leaves the pending list unread; one delivered
 * already only waits for its test. */
static void mock_cancel(void *tcomm, braid_treq_t *req)
{
    mock_tl_t *t  = tcomm;
    mock_op_t *op = req->handle;

    if (!req->active)
        return;
    req->active = 0;
    req->handle = NULL;
    if (op == NULL)
        return;
    for (mock_op_t **pp = &t->pending; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    }
    free(op);
}

const braid_transport_t mock_transport = {
    .struct_size  = sizeof(braid_transport_t),
    .name         = "mock",
    .caps         = BRAID_CAP_PUT_SIGNAL,
    .comm_create  = mock_comm_create,
    .comm_destroy = mock_comm_destroy,
    .link         = mock_link,
    .test         = mock_test,
    .progress     = mock_progress,
    .cancel       = mock_cancel,
    .mem_alloc    = mock_mem_alloc,
    .mem_free     = mock_mem_free,
    .put_signal   = mock_put_signal,
};
