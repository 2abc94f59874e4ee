/* Helpers of the bootstrap unit tests: checks that report where and why,
 * and a fork-based runner of multi-rank scenarios with a watchdog. */
#ifndef BRAID_TEST_BS_TEST_H
#define BRAID_TEST_BS_TEST_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "util/env.h"
#include "util/log.h"

static int test_failures;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n",     \
                    __FILE__, __LINE__, #cond, braid_last_error());           \
            test_failures++;                                                  \
        }                                                                     \
    } while (0)

/* In a rank: a failed check ends the process with status 1. */
#define RCHECK(cond)                                                          \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr,                                                   \
                    "%s:%d: [pid %d] check failed: %s (last error: "          \
                    "%s)\n",                                                  \
                    __FILE__, __LINE__, (int)getpid(), #cond,                 \
                    braid_last_error());                                      \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define CHECK_STATUS(expr, want)                                              \
    do {                                                                      \
        braid_status_t st_ = (expr);                                          \
        if (st_ != (want)) {                                                  \
            fprintf(stderr,                                                   \
                    "%s:%d: %s gave %s, expected %s (last error: "            \
                    "%s)\n",                                                  \
                    __FILE__, __LINE__, #expr, braid_status_str(st_),         \
                    braid_status_str(want), braid_last_error());              \
            test_failures++;                                                  \
        }                                                                     \
    } while (0)

#define CHECK_MSG(substr)                                                     \
    do {                                                                      \
        if (strstr(braid_last_error(), (substr)) == NULL) {                   \
            fprintf(stderr, "%s:%d: last error '%s' lacks '%s'\n", __FILE__,  \
                    __LINE__, braid_last_error(), (substr));                  \
            test_failures++;                                                  \
        }                                                                     \
    } while (0)

static inline double test_now(void) { return braid_now_s(); }

static inline void test_sleep(double s)
{
    struct timespec ts = {.tv_sec  = (time_t)s,
                          .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static inline const uint8_t *test_key(void)
{
    static const uint8_t key[16] = {1, 2,  3,  4,  5,  6,  7,  8,
                                    9, 10, 11, 12, 13, 14, 15, 16};
    return key;
}

/* A listening socket on 127.0.0.1 bound before any rank is forked, like
 * braidrun's: returns the fd and sets *port. */
static inline int test_listener(int *port)
{
    struct sockaddr_in sa  = {.sin_family      = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t          len = sizeof(sa);
    int                fd  = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("test listener");
        exit(2);
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* Launch description of rank r in an address rendezvous on lfd/port. */
static inline braid_launch_t test_launch(int rank, int size, int lfd, int port)
{
    braid_launch_t l;
    memset(&l, 0, sizeof(l));
    l.rank = rank;
    l.size = size;
    snprintf(l.host, sizeof(l.host), "127.0.0.1");
    l.port = port;
    memcpy(l.key, test_key(), 16);
    l.key_set = 1;
    snprintf(l.launcher, sizeof(l.launcher), "test");
    if (rank == 0) {
        l.has_listen_fd = 1;
        l.listen_fd     = lfd;
    }
    return l;
}

typedef int (*test_rank_fn)(int rank, int size, void *arg);

/* Forks one process per entry; process i runs fn(i, n, arg) and exits with
 * its return value.  Waits for all, killing everything after limit_s.
 * status[i] gets each wait status.  Returns 0 if all exited 0. */
static inline int test_fork_ranks(int n, test_rank_fn fn, void *arg,
                                  double limit_s, int *status)
{
    pid_t pids[64];
    int   bad = 0;
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            exit(fn(i, n, arg));
        if (pids[i] < 0) {
            perror("fork");
            exit(2);
        }
    }
    double end  = test_now() + limit_s;
    int    left = n;
    while (left > 0) {
        int   st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int i = 0; i < n; i++) {
                if (pids[i] == p) {
                    if (status)
                        status[i] = st;
                    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        bad++;
                    pids[i] = 0;
                    left--;
                }
            }
            continue;
        }
        if (test_now() > end) {
            fprintf(stderr,
                    "watchdog: ranks still running after %.1f s, "
                    "killing them\n",
                    limit_s);
            for (int i = 0; i < n; i++) {
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            }
            end = test_now() + 3600;
            bad++;
        }
        test_sleep(0.005);
    }
    return bad;
}

static inline void test_set_timeout(const char *seconds)
{
    setenv("BRAID_TIMEOUT", seconds, 1);
    braid_env_timeout_reset();
}

#endif
