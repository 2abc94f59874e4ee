/* One fault-injection run, under braidrun: every rank runs one collective in
 * a loop with a forced candidate, and the victim rank kills itself with
 * SIGKILL at a random iteration and a random point.  The survivors must get
 * an error, not hang; each prints one line saying what it got and how long
 * after the death, checks that the communicator then refuses further work
 * with the same message and that braid_finalize returns promptly, and exits
 * with FAULT_EXIT_DETECTED.  Public API only.
 *
 *   fault_coll --algo COLL:CAND --victim R --seed S --death-file PATH
 *              [--fault kill|stop|exit|mismatch] [--iters N]
 *              [--mismatch count|coll|dtype|op|root]
 *              [--max-bytes B] [--watchdog SECONDS]
 *
 * The fault (default kill): the victim dies by SIGKILL; stops itself with
 * SIGSTOP (a hung process: it never comes back, braidrun ends it); exits
 * with status 0 without braid_finalize; or, at the fault iteration, makes
 * another call than the others, and carries on as a survivor.  What differs
 * (--mismatch, default count): half the count (barrier, which has none: an
 * all-reduce instead); an all-reduce instead of the collective (barrier: a
 * broadcast); i32 instead of f32 (same size: no length differs); max
 * instead of sum (all-reduce and reduce-scatter only); the root plus one
 * (broadcast only).  A kind the collective does not have is a SKIP.  With
 * mismatch every rank checks every result, and prints SILENT when one is
 * wrong without an error.
 *
 * How the victim dies, drawn from the seed (the same on every rank):
 *   between   just before the call of the kill iteration;
 *   timer     a timer of 0..3000 us armed before that call fires during it
 *             or later (an interval timer and SIGALRM: the handler is the
 *             "random point" in the middle of whatever runs);
 *   test      all-reduce only: every rank runs braid_iallreduce + braid_test
 *             polling, the victim dies after 0..3000 us of polling.
 * The victim writes the CLOCK_MONOTONIC time of its death to the death
 * file first (the clock is the same for every process on the host).
 *
 * Output, one line per survivor (the driver parses it):
 *   FAULT rank=R victim=V iter=I how=H status=BRAID_ERR_X latency_ms=X
 *   names_victim=0|1 state_ok=0|1 send_intact=0|1 call=K finalize_ms=X
 *   finalize=BRAID_X error=MSG
 * where K is the first "call #K" of the message (-1 if none): every
 * survivor must name the same failed call.
 * Exit status: FAULT_EXIT_DETECTED (survivor saw the error), 0 (survivor
 * never saw an error: wrong), FAULT_EXIT_HANG (watchdog), FAULT_EXIT_SKIP
 * (candidate not in this build), 2 (setup failed), FAULT_EXIT_UNDEAD (the
 * victim outlived the loop). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <braid/braid.h>

#define FAULT_EXIT_DETECTED 3
#define FAULT_EXIT_HANG     4
#define FAULT_EXIT_UNDEAD   5
#define FAULT_EXIT_SKIP     77

#define MAX_DELAY_US 3000

typedef enum { HOW_BETWEEN, HOW_TIMER, HOW_TEST, HOW_COUNT } how_t;
static const char *how_names[HOW_COUNT] = {"between", "timer", "test"};

typedef enum { FAULT_KILL, FAULT_STOP, FAULT_EXIT, FAULT_MISMATCH } fault_t;
static const char *fault_names[] = {"kill", "stop", "exit", "mismatch"};

typedef enum { MM_COUNT, MM_COLL, MM_DTYPE, MM_OP, MM_ROOT, MM_KINDS } mm_t;
static const char *mm_names[MM_KINDS] = {"count", "coll", "dtype", "op",
                                         "root"};

typedef struct {
    const char   *algo; /* "allreduce:ring@ucx" */
    char          coll_name[32];
    braid_coll_t  coll;
    int           victim;
    uint64_t      seed;
    const char   *death_file;
    int           iters;
    size_t        max_bytes;
    double        watchdog_s;
    fault_t       fault;
    mm_t          mm;    /* what a mismatching victim changes */
    braid_dtype_t dtype; /* of every call: f32 but for a dtype mismatch */
    braid_op_t    op;    /* of reductions: sum but for an op mismatch */
} opts_t;

static fault_t fault_kind; /* for the signal handler */
static int     death_fd = -1;
static double  watchdog_at;
static int     cur_iter = -1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* splitmix64: the same sequence on every rank from the same seed. */
static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
    return n ? rnd(s) % n : 0;
}

/* Async-signal-safe: the time of the fault into the death file. */
static void mark_death(void)
{
    struct timespec ts;
    char            buf[48];
    int             n = 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* Hand-made "%lld.%09ld\n": snprintf is not async-signal-safe. */
    char      digits[24];
    int       d   = 0;
    long long sec = (long long)ts.tv_sec;
    do
        digits[d++] = (char)('0' + sec % 10);
    while ((sec /= 10) > 0);
    while (d > 0)
        buf[n++] = digits[--d];
    buf[n++] = '.';
    long ns  = ts.tv_nsec;
    for (int i = 8; i >= 0; i--) {
        buf[n + i] = (char)('0' + ns % 10);
        ns /= 10;
    }
    n += 9;
    buf[n++] = '\n';
    if (death_fd >= 0)
        (void)!pwrite(death_fd, buf, (size_t)n, 0);
}

/* Async-signal-safe: the death time, then the fault. */
static void die_now(void)
{
    mark_death();
    if (fault_kind == FAULT_EXIT)
        _exit(0); /* "success", without braid_finalize */
    /* Stopped for good: braidrun's SIGTERM (with a SIGCONT) ends it. */
    kill(getpid(), fault_kind == FAULT_STOP ? SIGSTOP : SIGKILL);
    for (;;)
        pause();
}

static void on_alarm(int sig)
{
    (void)sig;
    die_now();
}

/* A survivor stuck past the watchdog is a hang: say where, and go. */
static void *watchdog(void *arg)
{
    const opts_t *o = arg;
    for (;;) {
        struct timespec ts = {.tv_nsec = 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (watchdog_at > 0 && now_s() > watchdog_at) {
            printf("HANG algo=%s victim=%d iter=%d: no error after %.0f s\n",
                   o->algo, o->victim, cur_iter, o->watchdog_s);
            fflush(stdout);
            _exit(FAULT_EXIT_HANG);
        }
    }
    return NULL;
}

/* A name without spaces, for the driver's parsing. */
static const char *status_id(braid_status_t st)
{
    switch (st) {
    case BRAID_OK: return "BRAID_OK";
    case BRAID_ERR_TIMEOUT: return "BRAID_ERR_TIMEOUT";
    case BRAID_ERR_PEER: return "BRAID_ERR_PEER";
    case BRAID_ERR_STATE: return "BRAID_ERR_STATE";
    case BRAID_ERR_TRANSPORT: return "BRAID_ERR_TRANSPORT";
    case BRAID_ERR_IO: return "BRAID_ERR_IO";
    case BRAID_ERR_MISMATCH: return "BRAID_ERR_MISMATCH";
    case BRAID_ERR_INTERNAL: return "BRAID_ERR_INTERNAL";
    default: return "BRAID_ERR_OTHER";
    }
}

static double read_death(const char *path)
{
    FILE  *f = fopen(path, "r");
    double t = 0.0;
    if (f == NULL)
        return 0.0;
    if (fscanf(f, "%lf", &t) != 1)
        t = 0.0;
    fclose(f);
    return t;
}

static int parse(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->victim     = -1;
    o->iters      = 200;
    o->max_bytes  = 256 * 1024;
    o->watchdog_s = 60.0;
    o->dtype      = BRAID_F32;
    o->op         = BRAID_SUM;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            goto bad;
        if (strcmp(a, "--algo") == 0)
            o->algo = v;
        else if (strcmp(a, "--victim") == 0)
            o->victim = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            o->seed = strtoull(v, NULL, 0);
        else if (strcmp(a, "--death-file") == 0)
            o->death_file = v;
        else if (strcmp(a, "--iters") == 0)
            o->iters = atoi(v);
        else if (strcmp(a, "--max-bytes") == 0)
            o->max_bytes = (size_t)strtoull(v, NULL, 0);
        else if (strcmp(a, "--watchdog") == 0)
            o->watchdog_s = atof(v);
        else if (strcmp(a, "--fault") == 0) {
            int k;
            for (k = 0; k < 4 && strcmp(v, fault_names[k]) != 0; k++)
                ;
            if (k == 4)
                goto bad;
            o->fault = (fault_t)k;
        } else if (strcmp(a, "--mismatch") == 0) {
            int k;
            for (k = 0; k < MM_KINDS && strcmp(v, mm_names[k]) != 0; k++)
                ;
            if (k == MM_KINDS)
                goto bad;
            o->mm = (mm_t)k;
        } else
            goto bad;
    }
    if (o->algo == NULL || o->death_file == NULL || o->iters < 2 ||
        o->max_bytes < 64)
        goto bad;
    const char *colon = strchr(o->algo, ':');
    size_t      n     = colon ? (size_t)(colon - o->algo) : 0;
    if (n == 0 || n >= sizeof(o->coll_name))
        goto bad;
    memcpy(o->coll_name, o->algo, n);
    o->coll_name[n] = '\0';
    for (int c = 0; c < BRAID_COLL_COUNT; c++) {
        if (strcmp(braid_coll_name((braid_coll_t)c), o->coll_name) == 0) {
            o->coll = (braid_coll_t)c;
            return 0;
        }
    }
bad:
    fprintf(stderr, "usage: fault_coll --algo COLL:CAND --victim R --seed S "
                    "--death-file PATH [--fault kill|stop|exit|mismatch] "
                    "[--mismatch count|coll|dtype|op|root] [--iters N] "
                    "[--max-bytes B] [--watchdog SECONDS]\n");
    return -1;
}

/* One call of the collective (blocking, or non-blocking with braid_test
 * polling); the victim dies after delay_us of polling when die_in_test. */
static braid_status_t one_call(const opts_t *o, braid_comm_t *comm, float *a,
                               float *b, size_t count, int root, how_t how,
                               int die_in_test, double delay_us)
{
    switch (o->coll) {
    case BRAID_COLL_ALLREDUCE:
        if (how == HOW_TEST) {
            braid_request_t *req  = NULL;
            int              done = 0;
            braid_status_t   st   = braid_iallreduce(a, b, count, BRAID_F32,
                                                     BRAID_SUM, comm, &req);
            double           t0   = now_s();
            while (st == BRAID_OK && !done) {
                if (die_in_test && (now_s() - t0) * 1e6 >= delay_us)
                    die_now();
                st = braid_test(req, &done);
            }
            return st;
        }
        return braid_allreduce(a, b, count, o->dtype, o->op, comm);
    case BRAID_COLL_REDUCE_SCATTER:
        return braid_reduce_scatter(a, b, count, o->dtype, o->op, comm);
    case BRAID_COLL_ALLGATHER:
        return braid_allgather(a, b, count, o->dtype, comm);
    case BRAID_COLL_BROADCAST:
        return braid_broadcast(a, count, o->dtype, root, comm);
    case BRAID_COLL_BARRIER:
    default: return braid_barrier(comm);
    }
}

/* Mismatch mode: whether this rank's result is right (count is what this
 * rank passed; coll what it called). */
static int result_ok(braid_coll_t coll, const float *a, const float *b,
                     size_t count, int root, int size, float f)
{
    float sum = (float)(size * (size + 1) / 2) * f;
    for (size_t i = 0; i < count; i++) {
        switch (coll) {
        case BRAID_COLL_ALLREDUCE:
        case BRAID_COLL_REDUCE_SCATTER:
            if (b[i] != sum)
                return 0;
            break;
        case BRAID_COLL_BROADCAST:
            if (a[i] != (float)(root + 1) * f)
                return 0;
            break;
        case BRAID_COLL_ALLGATHER:
            for (int r = 0; r < size; r++)
                if (b[(size_t)r * count + i] != (float)(r + 1) * f)
                    return 0;
            break;
        default: break;
        }
    }
    return 1;
}

static int survivor_report(const opts_t *o, braid_comm_t *comm, int rank,
                           int iter, how_t how, braid_status_t st,
                           double t_err, float *a, float *b, size_t count)
{
    char err[600], want[32];
    snprintf(err, sizeof(err), "%s", braid_last_error());
    watchdog_at = 0; /* detected: what follows has its own checks */

    /* The death file is written before the SIGKILL, so it is there. */
    double t_death = read_death(o->death_file);
    double lat_ms  = t_death > 0 ? (t_err - t_death) * 1e3 : -1.0;

    /* The failed call: the first "call #K" of the message. */
    long long   call = -1;
    const char *cp   = strstr(err, "call #");
    if (cp != NULL)
        call = strtoll(cp + 6, NULL, 10);

    /* "rank V" and not "rank V7": the message names the victim. */
    int names = 0;
    snprintf(want, sizeof(want), "rank %d", o->victim);
    for (const char *p = err; (p = strstr(p, want)) != NULL; p++) {
        char c = p[strlen(want)];
        if (c < '0' || c > '9') {
            names = 1;
            break;
        }
    }

    /* Out of place, the send buffer is the caller's input: whatever went
     * wrong, it still holds what this rank put there (broadcast has one
     * buffer, which a failed call may have half written: documented). */
    int intact = 1;
    if (o->coll != BRAID_COLL_BROADCAST && o->coll != BRAID_COLL_BARRIER &&
        o->fault != FAULT_MISMATCH) {
        size_t n = o->coll == BRAID_COLL_REDUCE_SCATTER
                       ? count * (size_t)braid_comm_size(comm)
                       : count;
        for (size_t i = 0; i < n; i++)
            if (a[i] != (float)(rank + 1))
                intact = 0;
    }

    /* The communicator refuses further work, with the first message. */
    braid_status_t again =
        one_call(o, comm, a, b, count, 0, HOW_BETWEEN, 0, 0.0);
    int state_ok =
        again == BRAID_ERR_STATE && strstr(braid_last_error(), err) != NULL;
    if (!state_ok)
        fprintf(stderr, "rank %d: the call after the error gave %s: %s\n",
                rank, braid_status_str(again), braid_last_error());

    /* And finalize returns at once: it skips the final barrier. */
    double         t0  = now_s();
    braid_status_t fst = braid_finalize(comm);
    double         fin = (now_s() - t0) * 1e3;

    /* The message last: it is free text. */
    printf("FAULT rank=%d victim=%d iter=%d how=%s status=%s latency_ms=%.1f "
           "names_victim=%d state_ok=%d send_intact=%d call=%lld "
           "finalize_ms=%.1f finalize=%s error=%s\n",
           rank, o->victim, iter, how_names[how], status_id(st), lat_ms, names,
           state_ok, intact, call, fin, status_id(fst), err);
    fflush(stdout);
    return FAULT_EXIT_DETECTED;
}

int main(int argc, char **argv)
{
    opts_t         o;
    braid_comm_t  *comm = NULL;
    braid_status_t st;
    if (parse(argc, argv, &o) != 0)
        return 2;
    fault_kind = o.fault;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The candidate for every size of the collective (BRAID_ALGO syntax:
     * "coll:cand" with no range covers them all). */
    setenv("BRAID_ALGO", o.algo, 1);

    if ((st = braid_init(&comm)) != BRAID_OK) {
        fprintf(stderr, "fault_coll: braid_init: %s: %s\n",
                braid_status_str(st), braid_last_error());
        return 2;
    }
    int rank = braid_comm_rank(comm), size = braid_comm_size(comm);
    if (o.victim < 0 || o.victim >= size || size < 2) {
        fprintf(stderr, "fault_coll: victim %d of %d ranks\n", o.victim, size);
        return 2;
    }

    /* Everything random comes from the seed, so every rank draws the same
     * sizes, roots, kill iteration and manner; only the victim acts on it. */
    uint64_t s        = o.seed * 1000003ull + 17;
    int      kill_at  = 1 + (int)rnd_below(&s, (uint64_t)(o.iters / 4));
    how_t    how      = (how_t)rnd_below(&s, HOW_COUNT);
    double   delay_us = (double)rnd_below(&s, MAX_DELAY_US + 1);
    size_t   dts      = sizeof(float);
    size_t   count    = 1 + (size_t)rnd_below(&s, o.max_bytes / dts);
    if (o.coll != BRAID_COLL_ALLREDUCE && how == HOW_TEST)
        how = HOW_TIMER; /* braid_test exists for all-reduce only */
    int mismatch = o.fault == FAULT_MISMATCH;
    if (mismatch)
        how = HOW_BETWEEN; /* the faulty call itself */
    if (o.coll == BRAID_COLL_BARRIER)
        count = 0;
    /* A mismatch the collective cannot have: the same answer everywhere. */
    int reduction =
        o.coll == BRAID_COLL_ALLREDUCE || o.coll == BRAID_COLL_REDUCE_SCATTER;
    if (mismatch && ((o.mm == MM_OP && !reduction) ||
                     (o.mm == MM_ROOT && o.coll != BRAID_COLL_BROADCAST) ||
                     (o.mm == MM_DTYPE && o.coll == BRAID_COLL_BARRIER))) {
        if (rank == 0)
            printf("SKIP %s: a %s has no %s to differ in\n", o.algo,
                   o.coll_name, mm_names[o.mm]);
        braid_finalize(comm);
        return FAULT_EXIT_SKIP;
    }

    /* Does this build have the candidate?  Every rank asks the same
     * question and gets the same answer. */
    char cand[96] = "", why[160] = "";
    st = braid_comm_choice(comm, o.coll, count ? count * dts : 64, cand,
                           sizeof(cand), why, sizeof(why));
    const char *want = strchr(o.algo, ':') + 1;
    if (st != BRAID_OK ||
        (strchr(want, '@') ? strcmp(cand, want) != 0
                           : strncmp(cand, want, strlen(want)) != 0)) {
        if (rank == 0)
            printf("SKIP %s: not in this build (%s)\n", o.algo,
                   st != BRAID_OK ? braid_last_error() : cand);
        braid_finalize(comm);
        return FAULT_EXIT_SKIP;
    }

    size_t elems =
        o.coll == BRAID_COLL_REDUCE_SCATTER || o.coll == BRAID_COLL_ALLGATHER
            ? count * (size_t)size
            : count;
    /* Twice over: a mismatching victim may pass count + 1. */
    float *a = calloc(2 * elems + 2, sizeof(float));
    float *b = calloc(2 * elems + 2, sizeof(float));
    if (a == NULL || b == NULL) {
        fprintf(stderr, "fault_coll: out of memory\n");
        return 2;
    }
    for (size_t i = 0; i < elems; i++)
        a[i] = (float)(rank + 1);

    if (rank == o.victim) {
        death_fd =
            open(o.death_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (death_fd < 0) {
            fprintf(stderr, "fault_coll: %s: %s\n", o.death_file,
                    strerror(errno));
            return 2;
        }
        signal(SIGALRM, on_alarm);
    }
    if (rank != o.victim || mismatch) {
        pthread_t th;
        watchdog_at = now_s() + o.watchdog_s;
        if (pthread_create(&th, NULL, watchdog, &o) != 0)
            return 2;
        pthread_detach(th);
    }
    if (rank == 0)
        printf("RUN algo=%s cand=%s fault=%s victim=%d seed=%llu kill_iter=%d "
               "how=%s delay_us=%.0f count=%zu\n",
               o.algo, cand, fault_names[o.fault], o.victim,
               (unsigned long long)o.seed, kill_at, how_names[how], delay_us,
               count);

    int silent = 0;
    for (int it = 0; it < o.iters; it++) {
        int root = (int)rnd_below(&s, (uint64_t)size);
        cur_iter = it;
        if (mismatch) {
            /* The victim's faulty call (--mismatch). */
            opts_t       v  = o;
            size_t       n  = count;
            int          vr = root;
            braid_coll_t cl = o.coll;
            if (rank == o.victim && it == kill_at) {
                mark_death();
                if (o.mm == MM_COLL || cl == BRAID_COLL_BARRIER)
                    cl = v.coll = cl == BRAID_COLL_ALLREDUCE
                                      ? BRAID_COLL_BROADCAST
                                      : BRAID_COLL_ALLREDUCE;
                else if (o.mm == MM_COUNT)
                    n = count / 2 > 0 ? count / 2 : 1;
                else if (o.mm == MM_DTYPE)
                    v.dtype = BRAID_I32;
                else if (o.mm == MM_OP)
                    v.op = BRAID_MAX;
                else
                    vr = (root + 1) % size;
                if (o.mm == MM_COUNT && n == count && cl == o.coll)
                    n = count + 1;
                if (n == 0)
                    n = 1;
            }
            /* Inputs change every iteration, so that stale data left by
             * the call before cannot pass for a result. */
            float f = (float)(1 + it % 7);
            for (size_t i = 0; i < 2 * elems + 2; i++)
                a[i] = (float)(rank + 1) * f;
            st = one_call(&v, comm, a, b, n, vr, HOW_BETWEEN, 0, 0.0);
            if (st == BRAID_OK && !silent &&
                !result_ok(cl, a, b, n, vr, size, f)) {
                silent = 1;
                printf("SILENT rank=%d victim=%d iter=%d: a wrong result "
                       "without an error\n",
                       rank, o.victim, it);
            }
            if (st != BRAID_OK)
                return survivor_report(&o, comm, rank, it, how, st, now_s(), a,
                                       b, count);
            continue;
        }
        if (rank == o.victim && it == kill_at) {
            if (how == HOW_BETWEEN)
                die_now();
            if (how == HOW_TIMER) {
                struct itimerval t = {
                    .it_value = {.tv_sec  = 0,
                                 .tv_usec = (suseconds_t)delay_us + 1}};
                setitimer(ITIMER_REAL, &t, NULL);
            }
        }
        /* A timer that has not fired a few iterations on: the calls are
         * shorter than the delay; die between calls instead. */
        if (rank == o.victim && it == kill_at + 20)
            die_now();
        st = one_call(&o, comm, a, b, count, root, how,
                      rank == o.victim && it == kill_at && how == HOW_TEST,
                      delay_us);
        if (st != BRAID_OK) {
            double t_err = now_s();
            if (rank == o.victim) {
                fprintf(stderr,
                        "fault_coll: the victim got an error before "
                        "dying: %s: %s\n",
                        braid_status_str(st), braid_last_error());
                return 2;
            }
            return survivor_report(&o, comm, rank, it, how, st, t_err, a, b,
                                   count);
        }
    }
    /* No error for the whole loop: the victim must have died past it. */
    if (rank == o.victim && !mismatch) {
        fprintf(stderr, "fault_coll: the victim outlived the loop\n");
        return FAULT_EXIT_UNDEAD;
    }
    printf("NOERROR rank=%d victim=%d: %d iterations without an error\n", rank,
           o.victim, o.iters);
    braid_finalize(comm);
    return 0;
}
