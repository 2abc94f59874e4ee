/* The thread model (braid.h, Threads), under braidrun -n N (N >= 2), clean
 * under ThreadSanitizer:
 *
 *   1. several communicators per process, one thread each, all at once:
 *      every result checked;
 *   2. several threads per communicator taking turns (a mutex and a turn
 *      counter order them the same on every rank), a request issued on one
 *      thread and completed on another;
 *   3. a second thread that enters a communicator while the first is
 *      inside a call: refused with BRAID_ERR_STATE naming both threads,
 *      nothing done (a request stays pending, the communicator usable);
 *      braid_test answers "not done", braid_wait waits for the first to
 *      leave.
 *
 * Step 3 is deterministic: rank 0's thread A sits in a blocking all-reduce
 * that cannot complete until the other ranks join it, and they join only
 * after rank 0's thread B has finished probing (a broadcast on another
 * communicator releases them).  B knows A is inside once a probe is
 * refused; a probe that got in first is an ordinary call of the same
 * shape, which the other ranks are told to match. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <braid/braid.h>

#define NCOMMS     3
#define ITERS      150
#define TURN_CALLS 60
#define PROBE_N    64

static int rank, size, failures;

#define EXPECT(cond, ...)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);               \
            fprintf(stderr, "test_threads rank %d: FAIL line %d: ", rank,     \
                    __LINE__);                                                \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
        }                                                                     \
    } while (0)

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------ 1. one thread per comm */

typedef struct {
    braid_comm_t *comm;
    int           id;
} comm_job_t;

static void *comm_worker(void *arg)
{
    comm_job_t *job = arg;
    float *a = malloc(4096 * sizeof(float)), *b = malloc(4096 * sizeof(float));
    for (int it = 0; it < ITERS && a && b; it++) {
        size_t n = 1 + (size_t)((it * 37 + job->id * 11) % 4096);
        for (size_t i = 0; i < n; i++)
            a[i] = (float)(rank + 1 + job->id);
        braid_status_t st =
            braid_allreduce(a, b, n, BRAID_F32, BRAID_SUM, job->comm);
        /* sum over ranks of (r + 1 + id) */
        float want = (float)(size * (size + 1) / 2 + size * job->id);
        EXPECT(st == BRAID_OK && b[0] == want && b[n - 1] == want,
               "comm %d iter %d: %s, got %g want %g", job->id, it,
               braid_last_error(), (double)b[0], (double)want);
        if (it % 25 == 0) {
            int root = it % size;
            int v    = rank == root ? 1000 + it : -1;
            st       = braid_broadcast(&v, 1, BRAID_I32, root, job->comm);
            EXPECT(st == BRAID_OK && v == 1000 + it, "comm %d broadcast: %s",
                   job->id, braid_last_error());
            EXPECT(braid_barrier(job->comm) == BRAID_OK, "comm %d barrier: %s",
                   job->id, braid_last_error());
        }
        if (failures > 0)
            break;
    }
    free(a);
    free(b);
    return NULL;
}

static void test_comm_per_thread(braid_comm_t **comms)
{
    pthread_t  th[NCOMMS];
    comm_job_t jobs[NCOMMS];
    for (int c = 0; c < NCOMMS; c++) {
        jobs[c] = (comm_job_t){comms[c], c};
        pthread_create(&th[c], NULL, comm_worker, &jobs[c]);
    }
    for (int c = 0; c < NCOMMS; c++)
        pthread_join(th[c], NULL);
}

/* ------------------------------------------- 2. threads taking turns */

typedef struct {
    braid_comm_t    *comm;
    pthread_mutex_t  lock;
    pthread_cond_t   cond;
    int              turn;    /* call number whose turn it is */
    braid_request_t *pending; /* issued by one thread, completed by the next */
    float            in, out;
} turns_t;

typedef struct {
    turns_t *t;
    int      id, nthreads;
} turn_job_t;

static void *turn_worker(void *arg)
{
    turn_job_t *job = arg;
    turns_t    *t   = job->t;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        while (t->turn < TURN_CALLS && t->turn % job->nthreads != job->id)
            pthread_cond_wait(&t->cond, &t->lock);
        int k = t->turn;
        if (k >= TURN_CALLS) {
            pthread_mutex_unlock(&t->lock);
            return NULL;
        }
        /* Even turns issue, odd turns complete what the previous thread
         * issued. */
        if (k % 2 == 0) {
            t->in = (float)(k + rank);
            braid_status_t st =
                braid_iallreduce(&t->in, &t->out, 1, BRAID_F32, BRAID_SUM,
                                 t->comm, &t->pending);
            EXPECT(st == BRAID_OK, "turn %d: iallreduce: %s", k,
                   braid_last_error());
        } else {
            braid_status_t st = braid_wait(t->pending);
            float want = (float)(size * (k - 1) + size * (size - 1) / 2);
            EXPECT(st == BRAID_OK && t->out == want,
                   "turn %d: wait: %s, got "
                   "%g want %g",
                   k, braid_last_error(), (double)t->out, (double)want);
            t->pending = NULL;
        }
        t->turn++;
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(&t->lock);
    }
}

static void test_turns(braid_comm_t *comm)
{
    enum { NT = 3 };
    turns_t    t = {.comm = comm};
    pthread_t  th[NT];
    turn_job_t jobs[NT];
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    for (int i = 0; i < NT; i++) {
        jobs[i] = (turn_job_t){&t, i, NT};
        pthread_create(&th[i], NULL, turn_worker, &jobs[i]);
    }
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    EXPECT(t.turn == TURN_CALLS, "turns ended at %d", t.turn);
    pthread_mutex_destroy(&t.lock);
    pthread_cond_destroy(&t.cond);
}

/* ------------------------------------------ 3. concurrent entry refused */

typedef struct {
    braid_comm_t *w, *side;
    atomic_int    entering; /* A is about to call */
    float         a_in[PROBE_N], a_out[PROBE_N];
} probe_t;

static void *thread_a(void *arg)
{
    probe_t *p = arg;
    for (int i = 0; i < PROBE_N; i++)
        p->a_in[i] = 1.0f;
    atomic_store(&p->entering, 1);
    braid_status_t st = braid_allreduce(p->a_in, p->a_out, PROBE_N, BRAID_F32,
                                        BRAID_SUM, p->w);
    EXPECT(st == BRAID_OK && p->a_out[0] == (float)size &&
               p->a_out[PROBE_N - 1] == (float)size,
           "thread A's all-reduce: %s", braid_last_error());
    return NULL;
}

/* "refused: thread X called it while thread Y is inside braid_allreduce". */
static int names_both(const char *msg, const char *fn)
{
    return strstr(msg, fn) != NULL && strstr(msg, "refused: thread ") &&
           strstr(msg, "while thread ") &&
           strstr(msg, "is inside braid_allreduce");
}

static void test_refused(braid_comm_t *w, braid_comm_t *side)
{
    static probe_t p;
    memset(&p, 0, sizeof(p));
    p.w       = w;
    p.side    = side;
    int extra = 0; /* probes that got in before A: calls to match */

    if (rank == 0) {
        pthread_t        a;
        float            in[PROBE_N], out[8][PROBE_N];
        braid_request_t *early[8];
        for (int i = 0; i < PROBE_N; i++)
            in[i] = 1.0f;
        pthread_create(&a, NULL, thread_a, &p);
        while (!atomic_load(&p.entering))
            sleep_ms(1);
        /* Until a probe is refused, A may not be inside yet. */
        braid_request_t *req = NULL;
        braid_status_t   st;
        for (;;) {
            st = braid_iallreduce(in, out[extra], PROBE_N, BRAID_F32,
                                  BRAID_SUM, w, &req);
            if (st != BRAID_OK)
                break;
            early[extra++] = req;
            if (extra == 8)
                break;
            sleep_ms(20);
        }
        EXPECT(st == BRAID_ERR_STATE && req == NULL &&
                   names_both(braid_last_error(), "braid_iallreduce"),
               "iallreduce while A is inside: %s: %s (after %d accepted)",
               braid_status_str(st), braid_last_error(), extra);
        if (st == BRAID_ERR_STATE) {
            /* A is inside, and stays there until the others are released
             * below: these are refused for certain. */
            float         x  = 0;
            braid_comm_t *nc = NULL;
            st               = braid_barrier(w);
            EXPECT(st == BRAID_ERR_STATE &&
                       names_both(braid_last_error(), "braid_barrier"),
                   "barrier: %s", braid_last_error());
            st = braid_broadcast(&x, 1, BRAID_F32, 0, w);
            EXPECT(st == BRAID_ERR_STATE &&
                       names_both(braid_last_error(), "braid_broadcast"),
                   "broadcast: %s", braid_last_error());
            st = braid_comm_split(w, 0, 0, &nc);
            EXPECT(st == BRAID_ERR_STATE && nc == NULL &&
                       names_both(braid_last_error(), "braid_comm_split"),
                   "split: %s", braid_last_error());
            st = braid_finalize(w);
            EXPECT(st == BRAID_ERR_STATE &&
                       names_both(braid_last_error(), "braid_finalize"),
                   "finalize: %s", braid_last_error());
            for (int i = 0; i < extra; i++) {
                int done = 1;
                st       = braid_test(early[i], &done);
                EXPECT(st == BRAID_OK && done == 0,
                       "braid_test while A is "
                       "inside: %s, done %d",
                       braid_last_error(), done);
            }
            EXPECT(braid_comm_size(w) == size && braid_comm_rank(w) == 0,
                   "queries answer while another thread is inside");
        }
        /* Release the others: they make 1 + extra calls on w. */
        st = braid_broadcast(&extra, 1, BRAID_I32, 0, side);
        EXPECT(st == BRAID_OK, "release: %s", braid_last_error());
        /* Completed from this thread, while A may still be inside: wait
         * waits for it to leave. */
        for (int i = 0; i < extra; i++) {
            st = braid_wait(early[i]);
            EXPECT(st == BRAID_OK && out[i][0] == (float)size,
                   "early request %d: %s", i, braid_last_error());
        }
        pthread_join(a, NULL);
    } else {
        float in[PROBE_N], out[PROBE_N];
        for (int i = 0; i < PROBE_N; i++)
            in[i] = 1.0f;
        braid_status_t st = braid_broadcast(&extra, 1, BRAID_I32, 0, side);
        EXPECT(st == BRAID_OK, "release: %s", braid_last_error());
        for (int i = 0; st == BRAID_OK && i < 1 + extra; i++) {
            st = braid_allreduce(in, out, PROBE_N, BRAID_F32, BRAID_SUM, w);
            EXPECT(st == BRAID_OK && out[0] == (float)size, "call %d: %s", i,
                   braid_last_error());
        }
    }
    /* Still usable. */
    float          one = 1.0f, sum = 0;
    braid_status_t st =
        braid_allreduce(&one, &sum, 1, BRAID_F32, BRAID_SUM, w);
    EXPECT(st == BRAID_OK && sum == (float)size, "after the probes: %s",
           braid_last_error());
}

int main(void)
{
    braid_comm_t *comms[NCOMMS] = {NULL};
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (braid_init(&comms[0]) != BRAID_OK) {
        fprintf(stderr, "test_threads: braid_init: %s\n", braid_last_error());
        return 1;
    }
    rank = braid_comm_rank(comms[0]);
    size = braid_comm_size(comms[0]);
    for (int c = 1; c < NCOMMS; c++) {
        if (braid_comm_split(comms[0], 0, rank, &comms[c]) != BRAID_OK) {
            fprintf(stderr, "test_threads rank %d: split: %s\n", rank,
                    braid_last_error());
            return 1;
        }
    }
    test_comm_per_thread(comms);
    if (failures == 0)
        test_turns(comms[0]);
    if (failures == 0 && size >= 2)
        test_refused(comms[1], comms[2]);
    for (int c = NCOMMS - 1; c >= 0; c--) {
        braid_status_t st = braid_finalize(comms[c]);
        EXPECT(st == BRAID_OK, "finalize %d: %s", c, braid_last_error());
    }
    printf("test_threads rank %d: %s\n", rank, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
