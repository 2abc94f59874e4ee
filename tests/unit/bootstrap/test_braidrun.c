/* braidrun end to end: environment, prefixed output, exit codes, failure
 * handling, signal forwarding, and a real bootstrap under it (and under
 * mpirun when there is one).
 * Usage: test_braidrun path/to/braidrun path/to/bs_hello */
#include <errno.h>
#include <fcntl.h>

#include "bs_test.h"

static const char *braidrun, *hello;

typedef struct {
    int    status;
    double elapsed;
    char  *out, *err;
} result_t;

static char *slurp(int fd)
{
    size_t cap = 4096, len = 0;
    char  *buf = malloc(cap);
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (len + 1 >= cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

static int tmpfile_fd(void)
{
    char name[] = "/tmp/braid-test-run-XXXXXX";
    int  fd     = mkstemp(name);
    if (fd < 0) {
        perror("mkstemp");
        exit(2);
    }
    unlink(name);
    return fd;
}

/* Occurrences of needle in what the command wrote to fd so far. */
static int count_in(int fd, const char *needle)
{
    char    buf[8192];
    ssize_t n          = pread(fd, buf, sizeof(buf) - 1, 0);
    int     c          = 0;
    buf[n > 0 ? n : 0] = '\0';
    for (char *p = buf; (p = strstr(p, needle)) != NULL; p++)
        c++;
    return c;
}

/* Runs argv.  When sig != 0, sends it sig once `ready` lines appeared on
 * its stdout (or after 5 s). */
static result_t run_sig(char *const argv[], int sig, int ready)
{
    result_t r   = {0};
    int      ofd = tmpfile_fd(), efd = tmpfile_fd();
    double   t0 = test_now();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        execv(argv[0], argv);
        _exit(126);
    }
    if (sig != 0) {
        while (count_in(ofd, "ready\n") < ready && test_now() - t0 < 5.0)
            test_sleep(0.01);
        test_sleep(0.05); /* from echo to `wait` */
        kill(pid, sig);
    }
    while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR)
        ;
    r.elapsed = test_now() - t0;
    r.out     = slurp(ofd);
    r.err     = slurp(efd);
    return r;
}

static result_t run(char *const argv[]) { return run_sig(argv, 0, 0); }

static void done(result_t *r)
{
    free(r->out);
    free(r->err);
}

static int exit_code(const result_t *r)
{
    return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
}

#define SH(n, script)                                                         \
    (char *[])                                                                \
    {                                                                         \
        (char *)braidrun, "-n", (char *)(n), "--", "/bin/sh", "-c",           \
            (char *)(script), NULL                                            \
    }

#define EXPECT_IN(hay, needle)                                                \
    do {                                                                      \
        if (strstr((hay), (needle)) == NULL) {                                \
            fprintf(stderr, "%s:%d: '%s' not in output:\n%s\n", __FILE__,     \
                    __LINE__, (needle), (hay));                               \
            test_failures++;                                                  \
        }                                                                     \
    } while (0)

static void test_success(void)
{
    result_t r = run(SH(
        "3", "echo \"out $BRAID_RANK $BRAID_SIZE ${BRAID_LISTEN_FD:-none}\"; "
             "echo \"err $BRAID_RANK\" >&2; "
             "echo \"env $BRAID_JOB_KEY $BRAID_ADDR\"; "
             "printf \"tail $BRAID_RANK\""));
    CHECK(exit_code(&r) == 0);
    EXPECT_IN(r.out, "[1] out 1 3 none\n");
    EXPECT_IN(r.out, "[2] out 2 3 none\n");
    EXPECT_IN(r.out, "[0] out 0 3 ");
    CHECK(strstr(r.out, "[0] out 0 3 none") == NULL); /* rank 0 has the fd */
    EXPECT_IN(r.err, "[0] err 0\n");
    EXPECT_IN(r.err, "[2] err 2\n");
    CHECK(strstr(r.out, "err") == NULL); /* streams stay apart */
    EXPECT_IN(r.out, "[2] tail 2\n");    /* partial last line flushed */
    /* One key and one address for the whole job. */
    char key[3][33] = {{0}}, addr[3][64] = {{0}};
    for (int i = 0; i < 3; i++) {
        char tag[16], *p;
        snprintf(tag, sizeof(tag), "[%d] env ", i);
        p = strstr(r.out, tag);
        CHECK(p != NULL);
        if (p != NULL)
            CHECK(sscanf(p + strlen(tag), "%32s %63s", key[i], addr[i]) == 2);
    }
    CHECK(strlen(key[0]) == 32 && strspn(key[0], "0123456789abcdef") == 32);
    CHECK(strcmp(key[0], key[1]) == 0 && strcmp(key[0], key[2]) == 0);
    CHECK(strncmp(addr[0], "127.0.0.1:", 10) == 0);
    CHECK(strcmp(addr[0], addr[2]) == 0);
    done(&r);

    /* Every job draws its own key. */
    result_t r2 = run(SH("1", "echo $BRAID_JOB_KEY"));
    result_t r3 = run(SH("1", "echo $BRAID_JOB_KEY"));
    CHECK(strcmp(r2.out, r3.out) != 0);
    done(&r2);
    done(&r3);

    result_t t =
        run((char *[]){(char *)braidrun, "-t", "1.5", "-n", "1", "/bin/sh",
                       "-c", "echo \"t=$BRAID_TIMEOUT\"", NULL});
    CHECK(exit_code(&t) == 0);
    EXPECT_IN(t.out, "[0] t=1.5\n");
    done(&t);
}

static void test_failures_handled(void)
{
    result_t r = run(SH("3", "if [ \"$BRAID_RANK\" = 1 ]; then exit 3; fi; "
                             "exec sleep 20"));
    CHECK(exit_code(&r) == 3);
    EXPECT_IN(r.err, "braidrun: rank 1 exited with status 3");
    CHECK(r.elapsed < 2.5); /* the sleepers were terminated */
    done(&r);

    r = run(SH("3", "if [ \"$BRAID_RANK\" = 2 ]; then kill -9 $$; fi; "
                    "exec sleep 20"));
    CHECK(exit_code(&r) != 0);
    EXPECT_IN(r.err, "braidrun: rank 2 killed by signal 9");
    CHECK(r.elapsed < 2.5);
    done(&r);

    /* Ranks that ignore SIGTERM get SIGKILL 3 s later.  Rank 0 fails only
     * once the others had time to set their trap. */
    r = run(SH("3", "if [ \"$BRAID_RANK\" = 0 ]; then sleep 0.5; exit 1; fi; "
                    "trap '' TERM; sleep 20"));
    CHECK(exit_code(&r) == 1);
    EXPECT_IN(r.err, "braidrun: rank 0 exited with status 1");
    CHECK(r.elapsed > 3.3 && r.elapsed < 6.5);
    done(&r);

    r = run(
        (char *[]){(char *)braidrun, "-n", "2", "/nonexistent/prog", NULL});
    CHECK(exit_code(&r) == 127);
    EXPECT_IN(r.err, "cannot execute '/nonexistent/prog'");
    done(&r);
}

static void test_signal_forwarding(void)
{
    result_t r = run_sig(SH("2", "trap 'echo got INT; exit 5' INT; "
                                 "echo ready; sleep 20 & wait"),
                         SIGINT, 2);
    CHECK(exit_code(&r) != 0);
    EXPECT_IN(r.out, "[0] got INT\n");
    EXPECT_IN(r.out, "[1] got INT\n");
    CHECK(r.elapsed < 6.0);
    done(&r);
}

static void test_usage(void)
{
    static const struct {
        const char *args[6];
        const char *msg;
    } cases[] = {
        {{NULL}, "-n N"},
        {{"-n", "0", "true", NULL}, "-n='0'"},
        {{"-n", "1025", "true", NULL}, "out of range [1, 1024]"},
        {{"-n", "2x", "true", NULL}, "unexpected 'x' at position 1"},
        {{"-n", "2", NULL}, "no program"},
        {{"-n", NULL}, "needs a value"},
        {{"-t", "abc", "-n", "2", "true", NULL}, "--timeout='abc'"},
        {{"-t", "0", "-n", "2", "true", NULL}, "must be > 0"},
        {{"--frobnicate", "-n", "2", "true", NULL}, "unknown option"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *argv[8] = {(char *)braidrun};
        for (int k = 0; k < 6 && cases[i].args[k]; k++)
            argv[k + 1] = (char *)cases[i].args[k];
        result_t r = run(argv);
        CHECK(exit_code(&r) == 2);
        EXPECT_IN(r.err, cases[i].msg);
        EXPECT_IN(r.err, "usage: braidrun");
        done(&r);
    }
}

/* The real thing: BRAID_LISTEN_FD, BRAID_ADDR and the key all used. */
static void test_bootstrap_under_braidrun(void)
{
    result_t r = run((char *[]){(char *)braidrun, "-t", "10", "-n", "4",
                                (char *)hello, NULL});
    CHECK(exit_code(&r) == 0);
    for (int i = 0; i < 4; i++) {
        char line[64];
        snprintf(line, sizeof(line), "[%d] rank %d of 4 via braidrun: sum=6",
                 i, i);
        EXPECT_IN(r.out, line);
    }
    if (exit_code(&r) != 0)
        fprintf(stderr, "%s", r.err);
    done(&r);

    /* Init again after destroy: the inherited socket is gone, rank 0 binds
     * BRAID_ADDR itself. */
    r = run((char *[]){(char *)braidrun, "-t", "10", "-n", "3", (char *)hello,
                       "2", NULL});
    CHECK(exit_code(&r) == 0);
    for (int i = 0; i < 3; i++) {
        char line[64], *p;
        snprintf(line, sizeof(line), "[%d] rank %d of 3 via braidrun: sum=3",
                 i, i);
        p = strstr(r.out, line);
        CHECK(p != NULL && strstr(p + 1, line) != NULL); /* twice */
    }
    if (exit_code(&r) != 0)
        fprintf(stderr, "%s", r.err);
    done(&r);
}

/* Under Open MPI's mpirun (file rendezvous), when it is installed. */
static void test_bootstrap_under_mpirun(void)
{
    const char        *mpirun  = NULL;
    static const char *where[] = {"/usr/bin/mpirun", "/usr/local/bin/mpirun",
                                  NULL};
    for (int i = 0; where[i]; i++) {
        if (access(where[i], X_OK) == 0)
            mpirun = where[i];
    }
    if (mpirun == NULL) {
        printf("braidrun: no mpirun, skipping the mpirun check\n");
        return;
    }
    setenv("BRAID_TIMEOUT", "10", 1);
    result_t r = run((char *[]){(char *)mpirun, "--allow-run-as-root",
                                "--oversubscribe", "-np", "3", (char *)hello,
                                "2", NULL});
    if (exit_code(&r) != 0 && strstr(r.err, "bs_hello") == NULL) {
        /* mpirun itself could not start (no slots, no ssh agent...). */
        printf("braidrun: mpirun unusable here (status %d), skipping\n%s",
               exit_code(&r), r.err);
        done(&r);
        return;
    }
    CHECK(exit_code(&r) == 0);
    for (int i = 0; i < 3; i++) {
        char line[64], *p;
        snprintf(line, sizeof(line), "rank %d of 3 via mpirun: sum=3", i);
        p = strstr(r.out, line);
        CHECK(p != NULL && strstr(p + 1, line) != NULL); /* both rounds */
    }
    if (exit_code(&r) != 0)
        fprintf(stderr, "%s", r.err);
    done(&r);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s braidrun bs_hello\n", argv[0]);
        return 2;
    }
    braidrun = argv[1];
    hello    = argv[2];
    signal(SIGPIPE, SIG_IGN);
    test_success();
    test_failures_handled();
    test_signal_forwarding();
    test_usage();
    test_bootstrap_under_braidrun();
    test_bootstrap_under_mpirun();
    if (test_failures == 0)
        printf("braidrun: all checks passed\n");
    return test_failures != 0;
}
