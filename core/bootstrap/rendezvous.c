/* File rendezvous (see rendezvous.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/rendezvous.h"
#include "bootstrap/sock.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"

braid_status_t braid_rdv_path(const braid_launch_t *launch, char *path,
                              size_t n)
{
    const char *dir =
        launch->rendezvous_dir[0] ? launch->rendezvous_dir : "/tmp";
    if (launch->job_id[0] == '\0')
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "file rendezvous needs a "
                           "job id (launcher %s gave none)",
                           launch->launcher);
    int len = snprintf(path, n, "%s/braid-%u-%s", dir, (unsigned)getuid(),
                       launch->job_id);
    if (len < 0 || (size_t)len >= n)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "rendezvous path too long: BRAID_RENDEZVOUS_DIR="
                           "'%s'",
                           dir);
    return BRAID_OK;
}

braid_status_t braid_rdv_publish(const char *path, const char *host, int port,
                                 const uint8_t key[16])
{
    char           tmp[4200];
    char           text[BRAID_ADDRSTR_LEN + 64];
    braid_status_t st = BRAID_OK;
    int            fd = -1;
    size_t         off;

    int len = snprintf(text, sizeof(text), "%s %d ", host, port);
    if (len < 0 || (size_t)len + 34 > sizeof(text))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "rendezvous host '%s' too "
                           "long",
                           host);
    braid_format_job_key(key, text + len);
    off         = (size_t)len + 32;
    text[off++] = '\n';

    len = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof(tmp))
        return braid_error(BRAID_ERR_INVALID_ARG, "rendezvous path too long");
    /* O_EXCL|O_NOFOLLOW: never write through a file or link someone else
     * planted under our name; the key must only ever be in a 0600 file. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return braid_error(BRAID_ERR_IO,
                           "cannot create rendezvous file %s: "
                           "%s",
                           tmp, strerror(errno));
    if (fchmod(fd, 0600) != 0) {
        st = braid_error(BRAID_ERR_IO, "chmod 0600 %s: %s", tmp,
                         strerror(errno));
        goto cleanup;
    }
    for (size_t done = 0; done < off;) {
        ssize_t n = write(fd, text + done, off - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            st = braid_error(BRAID_ERR_IO, "write %s: %s", tmp,
                             n < 0 ? strerror(errno) : "no progress");
            goto cleanup;
        }
        done += (size_t)n;
    }
    if (close(fd) != 0) {
        fd = -1;
        st = braid_error(BRAID_ERR_IO, "close %s: %s", tmp, strerror(errno));
        goto cleanup;
    }
    fd = -1;
    /* rename is atomic: readers see no file or a whole one. */
    if (rename(tmp, path) != 0)
        st = braid_error(BRAID_ERR_IO,
                         "cannot publish rendezvous file %s: %s"
                         "%s",
                         path, strerror(errno),
                         errno == EPERM || errno == EACCES
                             ? " (a file of another user in the way?)"
                             : "");
cleanup:
    if (fd >= 0)
        close(fd);
    if (st != BRAID_OK)
        unlink(tmp);
    return st;
}

static void nap(double s)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(s * 1e9)};
    nanosleep(&ts, NULL);
}

/* "host port key-hex\n" */
static braid_status_t parse(const char *path, char *text, char *host, size_t n,
                            int *port, uint8_t key[16])
{
    char *sp1 = strchr(text, ' ');
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    char *nl  = sp2 ? strchr(sp2 + 1, '\n') : NULL;
    if (nl == NULL || nl[1] != '\0' || sp1 == text ||
        (size_t)(sp1 - text) >= n)
        return braid_error(BRAID_ERR_PARSE,
                           "rendezvous file %s: expected "
                           "'host port key', got '%s'",
                           path, braid_quote(text, strlen(text), 0).s);
    *sp1 = *sp2 = *nl = '\0';
    memcpy(host, text, (size_t)(sp1 - text) + 1);
    long long      p;
    braid_status_t st = braid_parse_int(path, sp1 + 1, 1, 65535, &p);
    if (st != BRAID_OK)
        return st;
    *port = (int)p;
    return braid_parse_job_key(path, sp2 + 1, key);
}

braid_status_t braid_rdv_read(const char *path, double deadline, char *host,
                              size_t n, int *port, uint8_t key[16])
{
    double backoff = 0.002;
    int    fd;
    for (;;) {
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            break;
        if (errno != ENOENT)
            return braid_error(BRAID_ERR_IO,
                               "cannot open rendezvous file %s:"
                               " %s",
                               path, strerror(errno));
        double left = braid_deadline_left(deadline);
        if (left <= 0.0)
            return braid_error(BRAID_ERR_TIMEOUT,
                               "no rendezvous file %s from rank 0 within "
                               "BRAID_TIMEOUT=%g s (is rank 0 running, with "
                               "the same BRAID_RENDEZVOUS_DIR?)",
                               path, braid_timeout_s());
        nap(backoff < left ? backoff : left);
        if (backoff < 0.05)
            backoff *= 2;
    }

    braid_status_t st = BRAID_OK;
    struct stat    sb;
    char           text[BRAID_ADDRSTR_LEN + 64];
    size_t         got = 0;
    if (fstat(fd, &sb) != 0) {
        st = braid_error(BRAID_ERR_IO, "stat %s: %s", path, strerror(errno));
        goto cleanup;
    }
    /* Only a file that we wrote and nobody else can read is believed. */
    if (sb.st_uid != getuid() || (sb.st_mode & 077) != 0 ||
        !S_ISREG(sb.st_mode)) {
        st = braid_error(BRAID_ERR_AUTH,
                         "rendezvous file %s is not a private"
                         " file of ours (owner uid %u, mode %04o): refusing "
                         "it",
                         path, (unsigned)sb.st_uid,
                         (unsigned)(sb.st_mode & 07777));
        goto cleanup;
    }
    for (;;) {
        ssize_t r = read(fd, text + got, sizeof(text) - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            st = braid_error(BRAID_ERR_IO, "read %s: %s", path,
                             strerror(errno));
            goto cleanup;
        }
        if (r == 0 || got + (size_t)r == sizeof(text) - 1) {
            got += (size_t)r;
            break;
        }
        got += (size_t)r;
    }
    text[got] = '\0';
    st        = parse(path, text, host, n, port, key);
cleanup:
    close(fd);
    return st;
}

void braid_rdv_remove(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        BRAID_LOG(BRAID_LOG_WARN, LOG_COMP,
                  "cannot remove rendezvous file "
                  "%s: %s",
                  path, strerror(errno));
}
