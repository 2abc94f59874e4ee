/* Removing emulated clusters, also those whose braidrun died.
 *
 * Who still owns a cluster is told by a lock, not by its pid: braidrun
 * holds flock() on /run/braid-netns-<pid>.lock, and so does its reaper,
 * which inherited the open file.  The kernel drops the lock when both are
 * gone, however they ended, so a free lock means nobody will clean up and
 * the next braidrun --netns may; a pid that was reused by another process
 * does not fool it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netns.h"

#define LOCK_FMT "/run/braid-netns-%ld.lock"

static void remove_ns(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", BRAID_NETNS_DIR, name);
    /* What `ip netns delete` does: the bind mount keeps the namespace
     * alive; once it and the last process inside are gone, the kernel
     * destroys the namespace with its links and qdiscs. */
    (void)umount2(path, MNT_DETACH);
    (void)unlink(path);
}

/* The owner pid in "braid-<pid>-...", or 0 if the name is not ours. */
static long owner_of(const char *name)
{
    size_t plen = strlen(BRAID_NETNS_PREFIX);
    if (strncmp(name, BRAID_NETNS_PREFIX, plen) != 0)
        return 0;
    char *end;
    long  pid = strtol(name + plen, &end, 10);
    return end != name + plen && *end == '-' && pid > 0 ? pid : 0;
}

int braid_netns_remove_owned(pid_t owner)
{
    DIR *d = opendir(BRAID_NETNS_DIR);
    int  n = 0;
    if (d == NULL)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (owner_of(e->d_name) == (long)owner) {
            remove_ns(e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* 1 when nobody holds the owner's lock (it is then removed). */
static int owner_gone(long owner)
{
    char path[64];
    snprintf(path, sizeof(path), LOCK_FMT, owner);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    int gone = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (gone)
        unlink(path);
    close(fd);
    return gone;
}

int braid_netns_remove_stale(void)
{
    long owners[64];
    int  nowners = 0, removed = 0;
    DIR *d = opendir(BRAID_NETNS_DIR);
    if (d == NULL)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && nowners < 64) {
        long o    = owner_of(e->d_name);
        int  seen = 0;
        for (int i = 0; i < nowners; i++)
            seen |= owners[i] == o;
        if (o > 0 && !seen)
            owners[nowners++] = o;
    }
    closedir(d);
    for (int i = 0; i < nowners; i++)
        if (owners[i] != (long)getpid() && owner_gone(owners[i]))
            removed += braid_netns_remove_owned((pid_t)owners[i]);
    return removed;
}

/* Takes this braidrun's lock; the descriptor stays open for life. */
static int take_lock(char *err, size_t n)
{
    char path[64];
    snprintf(path, sizeof(path), LOCK_FMT, (long)getpid());
    for (int tries = 0; tries < 3; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf(err, n, "cannot create %s: %s", path, strerror(errno));
            return -1;
        }
        struct stat a, b;
        /* Another braidrun's stale pass may unlink the file between our
         * open and flock: then lock a fresh one. */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 &&
            stat(path, &b) == 0 && a.st_ino == b.st_ino)
            return fd;
        close(fd);
    }
    snprintf(err, n, "cannot lock %s", path);
    return -1;
}

int braid_netns_start_reaper(braid_netns_t *net, char *err, size_t n)
{
    int lock = take_lock(err, n);
    int p[2];
    if (lock < 0)
        return -1;
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, n, "pipe: %s", strerror(errno));
        close(lock);
        return -1;
    }
    pid_t owner = getpid();
    pid_t pid   = fork();
    if (pid == 0) {
        /* Its own session: a Ctrl-C to braidrun's terminal does not reach
         * it, and it must outlive braidrun to do its job. */
        setsid();
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        close(p[1]);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        char    c;
        ssize_t r;
        while ((r = read(p[0], &c, 1)) != 0)
            if (r < 0 && errno != EINTR)
                break;
        braid_netns_remove_owned(owner);
        char path[64];
        snprintf(path, sizeof(path), LOCK_FMT, (long)owner);
        unlink(path);
        _exit(0);
    }
    close(p[0]);
    if (pid < 0) {
        snprintf(err, n, "fork: %s", strerror(errno));
        close(p[1]);
        close(lock);
        return -1;
    }
    /* braidrun keeps its lock open until it exits; the reaper's copy keeps
     * it held if braidrun dies first. */
    net->reaper    = pid;
    net->reaper_fd = p[1];
    return 0;
}
