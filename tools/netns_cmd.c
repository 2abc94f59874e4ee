/* Namespaces by name, and the iproute2 tools that build their links.
 *
 * Links, addresses, routes and qdiscs are made by `ip` and `tc` in batch
 * mode, one run per namespace: iproute2 is what every Linux administrator
 * reads and what the kernel's netlink interface is documented by, and a
 * failure then comes with iproute2's own message. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netns.h"

/* The tool on PATH, else in the sbin directories (a root shell started
 * without a login may lack them on PATH). */
static int find_tool(char *out, size_t n, const char *tool)
{
    const char *path = getenv("PATH");
    char        dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin:/usr/bin:/bin",
             path ? path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
        if (*d == '\0')
            continue;
        snprintf(out, n, "%s/%s", d, tool);
        if (access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the tool stopped reading: its exit status says why */
        p += w;
        len -= (size_t)w;
    }
}

int braid_netns_batch(const char *tool, const char *ns, const char *script,
                      char *err, size_t n)
{
    char exe[4200];
    int  in[2] = {-1, -1}, out[2] = {-1, -1};
    if (find_tool(exe, sizeof(exe), tool) != 0) {
        snprintf(err, n,
                 "'%s' (iproute2) not found on PATH or in /usr/sbin, "
                 "/sbin: install iproute2",
                 tool);
        return -1;
    }
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        snprintf(err, n, "pipe: %s", strerror(errno));
        goto fail_pipes;
    }
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(out[1], 2);
        char *argv[7];
        int   k   = 0;
        argv[k++] = (char *)tool;
        if (ns != NULL) {
            argv[k++] = "-n";
            argv[k++] = (char *)ns;
        }
        argv[k++] = "-batch";
        argv[k++] = "-";
        argv[k]   = NULL;
        execv(exe, argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in[0] = out[1] = -1;
    if (pid < 0) {
        snprintf(err, n, "fork: %s", strerror(errno));
        sigaction(SIGPIPE, &old, NULL);
        goto fail_pipes;
    }
    write_all(in[1], script, strlen(script));
    close(in[1]);
    in[1] = -1;
    char   text[1024];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(out[0], text + got, sizeof(text) - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof(text) - 1) {
            char sink[256]; /* the rest, so that the tool can finish */
            while (read(out[0], sink, sizeof(sink)) > 0)
                ;
            break;
        }
    }
    text[got] = '\0';
    close(out[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGPIPE, &old, NULL);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    for (char *c = text; *c; c++)
        if (*c == '\n')
            *c = c[1] ? ' ' : '\0';
    snprintf(err, n, "%s%s%s -batch failed (%s %d): %s", tool,
             ns ? " -n " : "", ns ? ns : "",
             WIFEXITED(status) ? "exit status" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
             text[0] ? text : "no message");
    return -1;
fail_pipes:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
    }
    return -1;
}

int braid_netns_setns_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = setns(fd, CLONE_NEWNET);
    int e  = errno;
    close(fd);
    errno = e;
    return rc;
}

int braid_netns_within(const char *path,
                       int (*fn)(void *arg, char *err, size_t n), void *arg,
                       char *err, size_t n)
{
    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0) {
        snprintf(err, n, "open /proc/self/ns/net: %s", strerror(errno));
        return -1;
    }
    if (braid_netns_setns_path(path) != 0) {
        snprintf(err, n, "cannot enter %s: %s", path, strerror(errno));
        close(home);
        return -1;
    }
    int rc = fn(arg, err, n);
    if (setns(home, CLONE_NEWNET) != 0) {
        /* Nothing braidrun does after this would be where it belongs. */
        snprintf(err, n, "cannot return to braidrun's namespace: %s",
                 strerror(errno));
        rc = -1;
    }
    close(home);
    return rc;
}

typedef struct {
    const char *key, *value, *path;
} sysctl_t;

static int write_sysctl(void *arg, char *err, size_t n)
{
    const sysctl_t *c = arg;
    char            file[256];
    /* /proc/sys/net shows the namespace of whoever opens the file. */
    snprintf(file, sizeof(file), "/proc/sys/%s", c->key);
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    int rc = fd >= 0 && write(fd, c->value, strlen(c->value)) ==
                            (ssize_t)strlen(c->value)
                 ? 0
                 : -1;
    if (rc != 0)
        snprintf(err, n, "cannot set %s to %s in %s: %s", file, c->value,
                 c->path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

int braid_netns_sysctl(const char *path, const char *key, const char *value,
                       char *err, size_t n)
{
    sysctl_t c = {key, value, path};
    return braid_netns_within(path, write_sysctl, &c, err, n);
}
