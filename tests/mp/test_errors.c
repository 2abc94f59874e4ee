/* Error paths of the public API.
 *
 *   test_errors [--plugin-dir DIR] [--badabi-dir DIR] [--no-env-cases]
 *       Bad arguments on every rank (run under braidrun -n N or alone):
 *       each call returns BRAID_ERR_INVALID_ARG with a message and writes
 *       nothing, and the communicator still works afterwards.  Then, unless
 *       --no-env-cases, rank 0 runs the environment cases in child processes
 *       (each one a fresh single-rank braid_init): malformed BRAID_ALGO,
 *       BRAID_ALGO naming an unknown candidate, a plugin with a wrong ABI.
 *   test_errors --expect-missing CAND
 *       Forces allreduce onto a candidate that no plugin has, on every rank
 *       of a real multi-rank job: braid_init fails at once on every rank,
 *       naming it.
 *   test_errors --expect-badabi DIR [PLUGIN_DIR]
 *       Puts the bad-ABI plugin in DIR first in BRAID_PLUGIN_PATH, in a real
 *       multi-rank job: the loader's log (BRAID_DEBUG=info, stderr captured
 *       in a file) names it and its ABI, and collectives still run on the
 *       other plugins.
 *
 * The invalid calls are made identically on every rank, so a library that
 * wrongly accepts one runs it collectively and the test reports it instead
 * of hanging. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <braid/braid.h>

#include "mp_common.h"

#define PROG    "test_errors"
#define ELEMS   8 /* elements per rank in the argument checks */
#define PATTERN 0x5c
#define CHILD_S 120 /* seconds a child may take */

extern char **environ;

static struct {
    int         rank;
    int         size;
    long        checks;
    long        failures;
    char        current[256];
    const char *current_p;
} g;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG " FAIL rank %d: ", g.rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    g.failures++;
}

/* --------------------------------------------------------- argument checks */

/* Every buffer handed to an invalid call lies in this arena; it must be
 * bitwise unchanged afterwards. */
static unsigned char *arena;
static size_t         arena_len;

static void arena_reset(void) { memset(arena, PATTERN, arena_len); }

static int arena_intact(void)
{
    for (size_t i = 0; i < arena_len; i++)
        if (arena[i] != PATTERN)
            return 0;
    return 1;
}

static void *at(size_t byte_off) { return arena + byte_off; }

/* The call `what` returned got; it should be `want` with a message, and
 * (for an invalid call) must have left the arena alone. */
static void expect(const char *what, braid_status_t got, braid_status_t want)
{
    g.checks++;
    if (got != want) {
        fail("%s: returned %d (%s), expected %d (%s); last error: '%s'", what,
             (int)got, braid_status_str(got), (int)want,
             braid_status_str(want), braid_last_error());
        return;
    }
    if (want != BRAID_OK && braid_last_error()[0] == '\0')
        fail("%s: returned %s but braid_last_error() is empty", what,
             braid_status_str(got));
    if (!arena_intact())
        fail("%s: returned %s but wrote into the buffers", what,
             braid_status_str(got));
}

#define EXPECT_INVALID(call)                                                  \
    do {                                                                      \
        arena_reset();                                                        \
        snprintf(g.current, sizeof(g.current), "%s", #call);                  \
        expect(#call, (call), BRAID_ERR_INVALID_ARG);                         \
    } while (0)

static void check_null_comm(void)
{
    braid_request_t *req = NULL;
    braid_comm_t    *sub = NULL;
    char             cand[32], why[32];
    int              done = 0;
    void            *s = at(0), *r = at(1024);

    EXPECT_INVALID(braid_allreduce(s, r, 4, BRAID_F32, BRAID_SUM, NULL));
    EXPECT_INVALID(braid_reduce_scatter(s, r, 4, BRAID_F32, BRAID_SUM, NULL));
    EXPECT_INVALID(braid_allgather(s, r, 4, BRAID_F32, NULL));
    EXPECT_INVALID(braid_broadcast(r, 4, BRAID_F32, 0, NULL));
    EXPECT_INVALID(braid_barrier(NULL));
    EXPECT_INVALID(
        braid_iallreduce(s, r, 4, BRAID_F32, BRAID_SUM, NULL, &req));
    if (req != NULL)
        fail("iallreduce on a NULL comm returned a request");
    EXPECT_INVALID(braid_comm_split(NULL, 0, 0, &sub));
    if (sub != NULL)
        fail("comm_split of a NULL comm returned a communicator");
    EXPECT_INVALID(braid_comm_choice(NULL, BRAID_COLL_ALLREDUCE, 64, cand,
                                     sizeof(cand), why, sizeof(why)));
    EXPECT_INVALID(braid_test(NULL, &done));
    EXPECT_INVALID(braid_wait(NULL));
    EXPECT_INVALID(braid_init(NULL));
}

static void check_null_buffers(braid_comm_t *c)
{
    braid_request_t *req = NULL;
    void            *s = at(0), *r = at(arena_len / 2);

    EXPECT_INVALID(braid_allreduce(NULL, r, 4, BRAID_F32, BRAID_SUM, c));
    EXPECT_INVALID(braid_allreduce(s, NULL, 4, BRAID_F32, BRAID_SUM, c));
    EXPECT_INVALID(braid_reduce_scatter(NULL, r, 4, BRAID_I32, BRAID_MAX, c));
    EXPECT_INVALID(braid_reduce_scatter(s, NULL, 4, BRAID_I32, BRAID_MAX, c));
    EXPECT_INVALID(braid_allgather(NULL, r, 4, BRAID_U8, c));
    EXPECT_INVALID(braid_allgather(s, NULL, 4, BRAID_U8, c));
    EXPECT_INVALID(braid_broadcast(NULL, 4, BRAID_F64, 0, c));
    EXPECT_INVALID(
        braid_iallreduce(NULL, r, 4, BRAID_F32, BRAID_SUM, c, &req));
    EXPECT_INVALID(
        braid_iallreduce(s, NULL, 4, BRAID_F32, BRAID_SUM, c, &req));
    /* The output handles are arguments too. */
    EXPECT_INVALID(braid_iallreduce(s, r, 4, BRAID_F32, BRAID_SUM, c, NULL));
    EXPECT_INVALID(braid_comm_split(c, 0, 0, NULL));
    if (req != NULL)
        fail("an invalid iallreduce returned a request");
}

static void check_bad_enums(braid_comm_t *c)
{
    const braid_dtype_t bad_dt[] = {BRAID_DTYPE_COUNT, (braid_dtype_t)-1,
                                    (braid_dtype_t)1000};
    const braid_op_t    bad_op[] = {BRAID_OP_COUNT, (braid_op_t)-1};
    braid_request_t    *req      = NULL;
    void               *s = at(0), *r = at(arena_len / 2);
    char                cand[32], why[32];

    for (size_t i = 0; i < sizeof(bad_dt) / sizeof(bad_dt[0]); i++) {
        braid_dtype_t d = bad_dt[i];
        EXPECT_INVALID(braid_allreduce(s, r, 4, d, BRAID_SUM, c));
        EXPECT_INVALID(braid_allreduce(s, r, 0, d, BRAID_SUM, c));
        EXPECT_INVALID(braid_reduce_scatter(s, r, 4, d, BRAID_SUM, c));
        EXPECT_INVALID(braid_allgather(s, r, 4, d, c));
        EXPECT_INVALID(braid_broadcast(r, 4, d, 0, c));
        EXPECT_INVALID(braid_iallreduce(s, r, 4, d, BRAID_SUM, c, &req));
        g.checks++;
        if (braid_dtype_size(d) != 0)
            fail("braid_dtype_size(%d) = %zu, expected 0", (int)d,
                 braid_dtype_size(d));
        if (braid_dtype_name(d) == NULL)
            fail("braid_dtype_name(%d) returned NULL", (int)d);
    }
    for (size_t i = 0; i < sizeof(bad_op) / sizeof(bad_op[0]); i++) {
        braid_op_t o = bad_op[i];
        EXPECT_INVALID(braid_allreduce(s, r, 4, BRAID_F32, o, c));
        EXPECT_INVALID(braid_reduce_scatter(s, r, 4, BRAID_I64, o, c));
        EXPECT_INVALID(braid_iallreduce(s, r, 4, BRAID_F32, o, c, &req));
        if (braid_op_name(o) == NULL)
            fail("braid_op_name(%d) returned NULL", (int)o);
    }
    EXPECT_INVALID(braid_comm_choice(c, BRAID_COLL_COUNT, 64, cand,
                                     sizeof(cand), why, sizeof(why)));
    if (braid_coll_name(BRAID_COLL_COUNT) == NULL ||
        braid_status_str((braid_status_t)-999) == NULL)
        fail("a name function returned NULL for an invalid value");
    if (req != NULL)
        fail("an invalid iallreduce returned a request");
}

static void check_roots(braid_comm_t *c)
{
    const int bad[] = {-1,      g.size, g.size + 5, BRAID_UNDEFINED,
                       INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int root = bad[i];
        EXPECT_INVALID(braid_broadcast(at(0), 4, BRAID_I32, root, c));
    }
}

/* size * count * dtsize does not fit in size_t: rejected before any access
 * (the buffers are tiny, so a library that tried would crash). */
static void check_overflow(braid_comm_t *c)
{
    size_t           n = (size_t)g.size;
    void            *s = at(0), *r = at(arena_len / 2);
    braid_request_t *req      = NULL;
    size_t           f32_over = SIZE_MAX / 4 + 1; /* count * 4 wraps */
    size_t rs_over = SIZE_MAX / (4 * n) + 1;      /* n * count * 4 wraps */

    EXPECT_INVALID(braid_allreduce(s, r, f32_over, BRAID_F32, BRAID_SUM, c));
    EXPECT_INVALID(braid_allreduce(s, r, SIZE_MAX, BRAID_F64, BRAID_MAX, c));
    EXPECT_INVALID(
        braid_iallreduce(s, r, f32_over, BRAID_F32, BRAID_SUM, c, &req));
    EXPECT_INVALID(
        braid_reduce_scatter(s, r, rs_over, BRAID_F32, BRAID_SUM, c));
    EXPECT_INVALID(braid_allgather(s, r, rs_over, BRAID_F32, c));
    EXPECT_INVALID(braid_broadcast(r, SIZE_MAX / 8 + 1, BRAID_I64, 0, c));
    if (n > 1) {
        /* Only the multiplication by the rank count wraps. */
        size_t u8_over = SIZE_MAX / n + 1;
        EXPECT_INVALID(
            braid_reduce_scatter(s, r, u8_over, BRAID_U8, BRAID_SUM, c));
        EXPECT_INVALID(braid_allgather(s, r, u8_over, BRAID_U8, c));
    }
    if (req != NULL)
        fail("an invalid iallreduce returned a request");
}

/* Overlapping buffers other than the documented in-place layouts. */
static void check_aliasing(braid_comm_t *c)
{
    const size_t     dt = 4, me = (size_t)g.rank, n = (size_t)g.size;
    const size_t     cnt = ELEMS;
    unsigned char   *b   = at(0);
    braid_request_t *req = NULL;

    /* allreduce: in place means sendbuf == recvbuf exactly. */
    EXPECT_INVALID(braid_allreduce(b, b + dt, cnt, BRAID_F32, BRAID_SUM, c));
    EXPECT_INVALID(braid_allreduce(b + dt, b, cnt, BRAID_F32, BRAID_SUM, c));
    EXPECT_INVALID(
        braid_iallreduce(b, b + 3 * dt, cnt, BRAID_F32, BRAID_SUM, c, &req));
    /* reduce_scatter: only recvbuf == sendbuf + rank*recvcount*dtsize. */
    EXPECT_INVALID(braid_reduce_scatter(b, b + (me * cnt + 1) * dt, cnt,
                                        BRAID_I32, BRAID_SUM, c));
    EXPECT_INVALID(
        braid_reduce_scatter(b + dt, b, cnt, BRAID_I32, BRAID_SUM, c));
    /* allgather: only sendbuf == recvbuf + rank*sendcount*dtsize. */
    EXPECT_INVALID(
        braid_allgather(b + (me * cnt + 1) * dt, b, cnt, BRAID_I32, c));
    EXPECT_INVALID(braid_allgather(b, b + dt, cnt, BRAID_I32, c));
    if (n > 1) {
        /* Another rank's slot is not the in-place form either. */
        size_t other = (me + 1) % n;
        EXPECT_INVALID(
            braid_allgather(b + other * cnt * dt, b, cnt, BRAID_I32, c));
        EXPECT_INVALID(braid_reduce_scatter(b, b + other * cnt * dt, cnt,
                                            BRAID_I32, BRAID_SUM, c));
    }
    if (req != NULL)
        fail("an invalid iallreduce returned a request");
}

/* After all of that the communicator must still work. */
static void check_still_works(braid_comm_t *c)
{
    int32_t in[3] = {g.rank, 1, -g.rank}, out[3] = {0, 0, 0};
    snprintf(g.current, sizeof(g.current), "allreduce after invalid calls");
    braid_status_t st = braid_allreduce(in, out, 3, BRAID_I32, BRAID_SUM, c);
    g.checks++;
    if (st != BRAID_OK)
        mp_fatal(PROG, g.rank, st, "valid allreduce after invalid calls");
    int32_t sum = (int32_t)(g.size * (g.size - 1) / 2);
    if (out[0] != sum || out[1] != g.size || out[2] != -sum)
        fail("allreduce after invalid calls: got {%d,%d,%d}, expected "
             "{%d,%d,%d}",
             out[0], out[1], out[2], sum, g.size, -sum);
}

static void run_argument_checks(braid_comm_t *c)
{
    arena_len = (size_t)(g.size + 2) * ELEMS * 8 * 4;
    if (arena_len < 4096)
        arena_len = 4096;
    arena = malloc(arena_len);
    if (arena == NULL)
        exit(1);
    check_null_comm();
    check_null_buffers(c);
    check_bad_enums(c);
    check_roots(c);
    check_overflow(c);
    check_aliasing(c);
    check_still_works(c);
    free(arena);
}

/* -------------------------------------------------------- child processes */

/* Launcher variables would make the child join (or wait for) a job that
 * does not expect it: the child must be a lone single-rank process. */
static int launcher_var(const char *kv)
{
    static const char *const prefixes[] = {
        "BRAID_",       "OMPI_",        "PMIX_",       "SLURM_",
        "RANK=",        "WORLD_SIZE=",  "LOCAL_RANK=", "LOCAL_WORLD_SIZE=",
        "MASTER_ADDR=", "MASTER_PORT=",
    };
    static const char *const keep[] = {
        "BRAID_PLUGIN_PATH=", "BRAID_TIMEOUT=", "BRAID_PLUGINS="};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        if (strncmp(kv, keep[i], strlen(keep[i])) == 0)
            return 0;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Environment for a child: ours minus launcher variables and any variable
 * set in `extra` ("NAME=value" strings, NULL-terminated), plus `extra`. */
static char **child_env(char *const *extra)
{
    size_t n = 0, ne = 0;
    while (environ[n] != NULL)
        n++;
    while (extra[ne] != NULL)
        ne++;
    char **env = calloc(n + ne + 1, sizeof(char *));
    size_t k   = 0;
    if (env == NULL)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        int overridden = 0;
        for (size_t j = 0; j < ne; j++) {
            size_t len = strcspn(extra[j], "=") + 1;
            overridden |= strncmp(environ[i], extra[j], len) == 0;
        }
        if (!overridden && !launcher_var(environ[i]))
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < ne; j++)
        env[k++] = extra[j];
    env[k] = NULL;
    return env;
}

/* Runs this program as `test_errors --child MODE ARG` with extra variables,
 * stdout and stderr both captured into out.  Returns the exit status
 * (128+signal if killed, -1 if it could not run or timed out). */
static int run_child(const char *mode, const char *arg, char *const *extra,
                     char *out, size_t out_len)
{
    char *argv[] = {(char *)PROG, (char *)"--child", (char *)mode, (char *)arg,
                    NULL};
    char **env   = child_env(extra);
    int    fds[2];
    size_t used = 0;
    out[0]      = '\0';
    if (pipe(fds) != 0) {
        free(env);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execve("/proc/self/exe", argv, env);
        _exit(127);
    }
    close(fds[1]);
    free(env);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    double deadline  = mp_now() + CHILD_S;
    int    timed_out = 0;
    for (;;) {
        struct pollfd p       = {.fd = fds[0], .events = POLLIN};
        int           left_ms = (int)((deadline - mp_now()) * 1000);
        if (left_ms <= 0) {
            timed_out = 1;
            kill(pid, SIGKILL);
            break;
        }
        int pr = poll(&p, 1, left_ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        char    tmp[4096];
        ssize_t got = read(fds[0], tmp, sizeof(tmp));
        if (got <= 0)
            break;
        size_t take = (size_t)got < out_len - 1 - used ? (size_t)got
                                                       : out_len - 1 - used;
        memcpy(out + used, tmp, take);
        used += take;
        out[used] = '\0';
    }
    close(fds[0]);
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
        ;
    if (timed_out)
        return -1;
    if (WIFEXITED(wst))
        return WEXITSTATUS(wst);
    return WIFSIGNALED(wst) ? 128 + WTERMSIG(wst) : -1;
}

/* The value of "RESULT key=value" in a child's output ("" if absent). */
static const char *child_result(const char *out, const char *key, char *val,
                                size_t len)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "RESULT %s=", key);
    const char *p = strstr(out, prefix);
    val[0]        = '\0';
    if (p != NULL) {
        p += strlen(prefix);
        size_t n = strcspn(p, "\n");
        if (n >= len)
            n = len - 1;
        memcpy(val, p, n);
        val[n] = '\0';
    }
    return val;
}

static void child_failed(const char *what, int rc, const char *out)
{
    fail("%s: child exited with %d; its output:\n----\n%s----", what, rc, out);
}

/* A malformed BRAID_ALGO (or BRAID_SLEEP_POLLS) fails braid_init with
 * BRAID_ERR_PARSE and a message that says where. */
static void env_malformed_algo(void)
{
    static const char *const bad[] = {
        "BRAID_ALGO=allreduce:0-16K=oneshot,,16K-=ring",
        "BRAID_ALGO=allreduce;",
        "BRAID_ALGO=allreduce:5K-1K=ring",
        "BRAID_ALGO=bogus:ring",
        "BRAID_ALGO=allreduce:0-16Q=ring",
        "BRAID_ALGO=allreduce=ring",
        "BRAID_SLEEP_POLLS=12x",
        "BRAID_SLEEP_POLLS=-1",
    };
    static char out[1 << 16];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char var[256], st[32], msg[512], what[300];
        snprintf(var, sizeof(var), "%s", bad[i]);
        snprintf(what, sizeof(what), "%.*s'%s'", (int)strcspn(bad[i], "=") + 1,
                 bad[i], strchr(bad[i], '=') + 1);
        char *extra[] = {var, NULL};
        int   rc      = run_child("init", "-", extra, out, sizeof(out));
        g.checks++;
        if (rc != 0) {
            child_failed(what, rc, out);
            continue;
        }
        child_result(out, "status", st, sizeof(st));
        child_result(out, "message", msg, sizeof(msg));
        const char *pos = strstr(msg, "position ");
        if (atoi(st) != BRAID_ERR_PARSE)
            fail("%s: braid_init returned %s, expected %d (parse error); "
                 "message '%s'",
                 what, st, BRAID_ERR_PARSE, msg);
        else if (pos == NULL || pos[9] < '0' || pos[9] > '9')
            fail("%s: message does not say 'position N': '%s'", what, msg);
        else
            printf("# %s -> %s\n", what, msg);
    }
}

/* BRAID_ALGO naming an algorithm or a transport that no plugin has: init
 * fails at once with BRAID_ERR_NOT_FOUND, naming it and its position (a
 * candidate that exists but cannot run a call still fails that call:
 * mp-bench-forced-over-cap). */
static void env_missing_candidate(void)
{
    static const struct {
        const char *cand, *msg;
    } cases[] = {
        {"nosuch@ucx", "no plugin found has an algorithm 'nosuch' (at "
                       "position 10)"},
        {"ring@nosuchtl", "no plugin found brings a transport 'nosuchtl' (at "
                          "position 15)"},
        {"rign@ucx", "(did you mean 'ring'?)"},
    };
    static char out[1 << 16];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char var[128], what[160], st[32], msg[1024];
        snprintf(var, sizeof(var), "BRAID_ALGO=allreduce:%s", cases[i].cand);
        snprintf(what, sizeof(what), "%s (single rank)", var);
        char *extra[] = {var, NULL};
        int   rc      = run_child("init", "-", extra, out, sizeof(out));
        g.checks++;
        if (rc != 0) {
            child_failed(what, rc, out);
            continue;
        }
        child_result(out, "status", st, sizeof(st));
        child_result(out, "message", msg, sizeof(msg));
        if (atoi(st) != BRAID_ERR_NOT_FOUND)
            fail("%s: braid_init returned %s, expected %d (not found); "
                 "message '%s'",
                 what, st, BRAID_ERR_NOT_FOUND, msg);
        else if (strstr(msg, cases[i].msg) == NULL)
            fail("%s: message lacks \"%s\": '%s'", what, cases[i].msg, msg);
        else
            printf("# %s -> %s\n", what, msg);
    }
}

/* A plugin with the wrong ABI version is refused, logged, and skipped. */
static void env_bad_abi(const char *badabi_dir, const char *plugin_dir)
{
    static char out[1 << 18];
    char        path[4096], *old = getenv("BRAID_PLUGIN_PATH");
    if (badabi_dir == NULL) {
        printf("# bad-ABI plugin check skipped: no --badabi-dir\n");
        return;
    }
    /* The bad plugin first, so that it is seen before a good one. */
    snprintf(path, sizeof(path), "BRAID_PLUGIN_PATH=%s%s%s", badabi_dir,
             plugin_dir ? ":" : (old ? ":" : ""),
             plugin_dir ? plugin_dir : (old ? old : ""));
    char *extra[] = {path, (char *)"BRAID_DEBUG=info", NULL};
    int   rc      = run_child("abi", "-", extra, out, sizeof(out));
    g.checks++;
    if (rc != 0) {
        child_failed("bad-ABI plugin in BRAID_PLUGIN_PATH", rc, out);
        return;
    }
    const char *line = strstr(out, "badabi");
    if (line == NULL || strstr(out, "ABI") == NULL) {
        fail("bad-ABI plugin: the log at BRAID_DEBUG=info does not mention "
             "'badabi' and 'ABI'; it was:\n----\n%s----",
             out);
        return;
    }
    while (line > out && line[-1] != '\n')
        line--;
    printf("# bad-ABI plugin -> %.*s\n", (int)strcspn(line, "\n"), line);
}

/* ---------------------------------------------------------- child modes */

static int child_init(void)
{
    braid_comm_t  *c  = NULL;
    braid_status_t st = braid_init(&c);
    printf("RESULT status=%d\nRESULT message=%s\n", (int)st,
           braid_last_error());
    if (st == BRAID_OK)
        braid_finalize(c);
    else if (c != NULL)
        printf("RESULT note=braid_init failed but set *comm\n");
    return 0;
}

static int child_abi(void)
{
    braid_comm_t  *c  = NULL;
    braid_status_t st = braid_init(&c);
    if (st != BRAID_OK) {
        fprintf(stderr,
                PROG " FAIL: braid_init with a bad-ABI plugin in the "
                     "path returned %s: %s\n",
                braid_status_str(st), braid_last_error());
        return 1;
    }
    /* The good plugins still serve collectives. */
    double in[2] = {1.5, -2}, out[2] = {0, 0};
    st      = braid_allreduce(in, out, 2, BRAID_F64, BRAID_SUM, c);
    int bad = st != BRAID_OK || out[0] != 1.5 || out[1] != -2;
    if (bad)
        fprintf(stderr,
                PROG " FAIL: allreduce beside a bad-ABI plugin: %s: "
                     "%s (got %g %g)\n",
                braid_status_str(st), braid_last_error(), out[0], out[1]);
    braid_finalize(c);
    return bad;
}

static int run_child_mode(const char *mode, const char *arg)
{
    (void)arg;
    if (strcmp(mode, "init") == 0)
        return child_init();
    if (strcmp(mode, "abi") == 0)
        return child_abi();
    fprintf(stderr, PROG ": unknown child mode '%s'\n", mode);
    return 2;
}

/* ---------------------------------------------------------------- driver */

/* Under braidrun: BRAID_ALGO naming cand, which no plugin has, fails
 * braid_init on every rank at once (well before BRAID_TIMEOUT), each naming
 * it. */
static int expect_missing_main(const char *cand)
{
    char algo[256];
    snprintf(algo, sizeof(algo), "allreduce:%s", cand);
    setenv("BRAID_ALGO", algo, 1);
    braid_comm_t  *c  = NULL;
    double         t0 = mp_now();
    braid_status_t st = braid_init(&c);
    double         dt = mp_now() - t0;
    const char    *at = strchr(cand, '@');
    char           name[128];
    snprintf(name, sizeof(name), "'%.*s'",
             (int)(at ? at - cand : (long)strlen(cand)), cand);
    int bad = st != BRAID_ERR_NOT_FOUND || c != NULL ||
              strstr(braid_last_error(), name) == NULL || dt > 30.0;
    printf(PROG ": %s: BRAID_ALGO=%s: braid_init gave %s after %.1f s: %s\n",
           bad ? "FAIL" : "PASS", algo, braid_status_str(st), dt,
           braid_last_error());
    if (c != NULL)
        braid_finalize(c);
    return bad ? 1 : 0;
}

static int expect_badabi_main(const char *dir, const char *plugin_dir)
{
    static char log[1 << 18];
    char        path[4096], tmpl[] = "/tmp/braid-test-errors-XXXXXX";
    const char *old  = getenv("BRAID_PLUGIN_PATH");
    const char *rest = plugin_dir ? plugin_dir : old;

    snprintf(path, sizeof(path), "%s%s%s", dir, rest ? ":" : "",
             rest ? rest : "");
    setenv("BRAID_PLUGIN_PATH", path, 1);
    setenv("BRAID_DEBUG", "info", 1);
    /* The loader logs to stderr during braid_init: send it to a file (a
     * pipe could fill up and block the process writing into it). */
    int logfd = mkstemp(tmpl), saved = dup(2);
    if (logfd < 0 || saved < 0) {
        perror(PROG ": capturing stderr");
        return 1;
    }
    unlink(tmpl);
    fflush(stderr);
    dup2(logfd, 2);
    braid_comm_t  *c  = NULL;
    braid_status_t st = braid_init(&c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    mp_slurp(logfd, log, sizeof(log));
    close(logfd);
    if (st != BRAID_OK) {
        fprintf(stderr,
                PROG " FAIL: braid_init with a bad-ABI plugin in "
                     "BRAID_PLUGIN_PATH=%s: %s: %s\nlog:\n%s",
                path, braid_status_str(st), braid_last_error(), log);
        return 1;
    }
    int         rank = braid_comm_rank(c), bad = 0;
    const char *line = strstr(log, "badabi");
    if (line == NULL || strstr(log, "ABI") == NULL) {
        /* Every process loads the plugins, but only rank 0 must say so. */
        if (rank == 0) {
            fprintf(stderr,
                    PROG " FAIL rank 0: the log at BRAID_DEBUG=info "
                         "does not mention 'badabi' and 'ABI':\n%s",
                    log);
            bad = 1;
        }
    } else {
        while (line > log && line[-1] != '\n')
            line--;
        printf("# rank %d: %.*s\n", rank, (int)strcspn(line, "\n"), line);
    }
    /* Collectives reach the good plugins (not the local shortcut). */
    int32_t in[5] = {1, 2, 3, 4, rank}, out[5];
    int     n     = braid_comm_size(c);
    st            = braid_allreduce(in, out, 5, BRAID_I32, BRAID_SUM, c);
    if (st != BRAID_OK || out[0] != n || out[3] != 4 * n ||
        out[4] != n * (n - 1) / 2) {
        fprintf(stderr,
                PROG " FAIL rank %d: allreduce beside a bad-ABI "
                     "plugin: %s: %s\n",
                rank, braid_status_str(st), braid_last_error());
        bad = 1;
    }
    printf(PROG " rank %d/%d: %s: bad-ABI plugin in %s\n", rank, n,
           bad ? "FAIL" : "PASS", dir);
    braid_finalize(c);
    return bad;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [--plugin-dir DIR] [--badabi-dir DIR] "
               "[--no-env-cases] [--timeout S]\n"
               "       " PROG " --expect-missing CAND\n"
               "       " PROG " --expect-badabi DIR [PLUGIN_DIR]\n");
}

int main(int argc, char **argv)
{
    const char *badabi_dir = NULL, *plugin_dir = NULL;
    int         env_cases = 1;
    unsigned    timeout   = 280;

    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return run_child_mode(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "--expect-missing") == 0)
        return expect_missing_main(argv[2]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "--expect-badabi") == 0)
        return expect_badabi_main(argv[2], argc == 4 ? argv[3] : NULL);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--badabi-dir") == 0 && v) {
            badabi_dir = v;
            i++;
        } else if (strcmp(a, "--plugin-dir") == 0 && v) {
            plugin_dir = v;
            i++;
        } else if (strcmp(a, "--no-env-cases") == 0) {
            env_cases = 0;
        } else if (strcmp(a, "--timeout") == 0 && v) {
            timeout = (unsigned)strtoul(v, NULL, 0);
            i++;
        } else {
            int help = strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
            usage(help ? stdout : stderr);
            return help ? 0 : 2;
        }
    }

    braid_comm_t *c = NULL;
    g.current_p     = g.current;
    snprintf(g.current, sizeof(g.current), "braid_init");
    mp_watchdog(PROG, timeout, &g.current_p);
    braid_status_t st = braid_init(&c);
    if (st != BRAID_OK)
        mp_fatal(PROG, -1, st, "braid_init");
    g.rank = braid_comm_rank(c);
    g.size = braid_comm_size(c);
    static char wd_name[64];
    snprintf(wd_name, sizeof(wd_name), PROG " rank %d", g.rank);
    mp_watchdog_name(wd_name);

    run_argument_checks(c);
    if (env_cases && g.rank == 0) {
        env_malformed_algo();
        env_missing_candidate();
        env_bad_abi(badabi_dir, plugin_dir);
    }
    /* Ranks other than 0 wait here while rank 0 runs its children. */
    snprintf(g.current, sizeof(g.current), "final barrier");
    st = braid_barrier(c);
    if (st != BRAID_OK)
        mp_fatal(PROG, g.rank, st, "final barrier");
    printf(PROG " rank %d/%d: %s: %ld checks, %ld failed\n", g.rank, g.size,
           g.failures ? "FAIL" : "PASS", g.checks, g.failures);
    braid_finalize(c);
    return g.failures ? 1 : 0;
}
