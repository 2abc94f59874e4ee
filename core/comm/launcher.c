/* What the core tells the launcher that started this process.
 *
 * braidrun hands every rank the write end of a pipe of its own, named by
 * BRAID_LAUNCHER_FD, and reads one line per event from it:
 *   init                 braid_init succeeded (a world communicator)
 *   finalize             braid_finalize of such a communicator returned
 *   blame PID TEXT       a failure inquiry named process PID as the cause
 * With that, braidrun fails a job one of whose ranks exits -- even with
 * status 0 -- while it still has a communicator open (as mpirun does for
 * a process that exits without MPI_Finalize), and its summary names the
 * rank the survivors blame instead of the first survivor that gave up.
 * Other launchers set nothing, and nothing is written. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/comm.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "comm"

static pthread_once_t once        = PTHREAD_ONCE_INIT;
static int            launcher_fd = -1;

static void find_fd(void)
{
    const char *v = braid_env_get("BRAID_LAUNCHER_FD");
    long long   fd;
    struct stat sb;
    if (v == NULL)
        return;
    /* braidrun's own variable: a wrong one (inherited by a process that
     * braidrun did not start) is ignored rather than fatal. */
    if (braid_parse_int("BRAID_LAUNCHER_FD", v, 3, 1 << 20, &fd) != BRAID_OK ||
        fstat((int)fd, &sb) != 0 || !S_ISFIFO(sb.st_mode)) {
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
                  "BRAID_LAUNCHER_FD='%s' is not a "
                  "pipe: not telling the launcher anything",
                  v);
        return;
    }
    /* Ours only: programs this rank starts must not write to it; and a
     * launcher that stopped reading must not block a rank. */
    (void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    (void)fcntl((int)fd, F_SETFL, fcntl((int)fd, F_GETFL) | O_NONBLOCK);
    launcher_fd = (int)fd;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
    char    line[600];
    va_list ap;
    pthread_once(&once, find_fd);
    if (launcher_fd < 0)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* One write below PIPE_BUF: lines of several threads never mix. */
    ssize_t w;
    do
        w = write(launcher_fd, line, (size_t)n);
    while (w < 0 && errno == EINTR);
}

void braid_launcher_init(void) { say("init"); }

void braid_launcher_finalize(void) { say("finalize"); }

void braid_launcher_blame(long pid, const char *text)
{
    if (pid > 0)
        say("blame %ld %s", pid, text);
}
