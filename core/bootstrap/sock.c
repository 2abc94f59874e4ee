/* Poll-bounded TCP primitives of the bootstrap. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/sock.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"

double braid_deadline_left(double deadline)
{
    double left = deadline - braid_now_s();
    return left > 0.0 ? left : 0.0;
}

double braid_deadline_from_now(void)
{
    return braid_now_s() + braid_timeout_s();
}

int braid_deadline_ms(double deadline)
{
    double left = braid_deadline_left(deadline);
    if (left > 1e6)
        return 1000000000; /* callers loop until the deadline anyway */
    return (int)(left * 1000.0) + (left > 0.0 ? 1 : 0);
}

static int left_ms(double deadline) { return braid_deadline_ms(deadline); }

void braid_sockaddr_str(const struct sockaddr *sa, socklen_t len, char *buf,
                        size_t n)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(buf, n, "(unknown address)");
        return;
    }
    if (sa->sa_family == AF_INET6)
        snprintf(buf, n, "[%s]:%s", host, serv);
    else
        snprintf(buf, n, "%s:%s", host, serv);
}

braid_status_t braid_sockaddr_host(const struct sockaddr *sa, socklen_t len,
                                   char *host, size_t n, int *port)
{
    char serv[NI_MAXSERV];
    int  rc = getnameinfo(sa, len, host, (socklen_t)n, serv, sizeof(serv),
                          NI_NUMERICHOST | NI_NUMERICSERV);
    if (rc != 0)
        return braid_error(BRAID_ERR_IO, "cannot format a socket address: %s",
                           gai_strerror(rc));
    *port = atoi(serv);
    return BRAID_OK;
}

braid_status_t braid_sock_wait(int fd, short events, double deadline,
                               const char *peer, const char *what)
{
    for (;;) {
        struct pollfd p  = {.fd = fd, .events = events};
        int           rc = poll(&p, 1, left_ms(deadline));
        if (rc > 0)
            return BRAID_OK; /* errors and hang-ups show in the next call */
        if (rc == 0) {
            if (braid_deadline_left(deadline) > 0.0)
                continue;
            return braid_error(BRAID_ERR_TIMEOUT,
                               "timed out waiting for %s from %s "
                               "(BRAID_TIMEOUT=%g s)",
                               what, peer, braid_timeout_s());
        }
        if (errno != EINTR)
            return braid_error(BRAID_ERR_IO, "poll on the socket of %s: %s",
                               peer, strerror(errno));
    }
}

braid_status_t braid_sock_send(int fd, const void *buf, size_t len,
                               double deadline, const char *peer)
{
    const char *p    = buf;
    size_t      done = 0;
    while (done < len) {
        /* MSG_NOSIGNAL: a dead peer is an error status, not SIGPIPE. */
        ssize_t n = send(fd, p + done, len - done, MSG_NOSIGNAL);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            braid_status_t st =
                braid_sock_wait(fd, POLLOUT, deadline, peer, "room to send");
            if (st != BRAID_OK)
                return st;
            continue;
        }
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return braid_error(BRAID_ERR_PEER,
                               "%s closed the connection (sent %zu of %zu "
                               "bytes)",
                               peer, done, len);
        return braid_error(BRAID_ERR_IO, "send to %s: %s", peer,
                           n < 0 ? strerror(errno) : "no progress");
    }
    return BRAID_OK;
}

braid_status_t braid_sock_recv(int fd, void *buf, size_t len, double deadline,
                               const char *peer, const char *what)
{
    char  *p    = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = recv(fd, p + done, len - done, 0);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0)
            return braid_error(BRAID_ERR_PEER,
                               "%s closed the connection (got %zu of %zu "
                               "bytes of %s)",
                               peer, done, len, what);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            braid_status_t st =
                braid_sock_wait(fd, POLLIN, deadline, peer, what);
            if (st != BRAID_OK)
                return st;
            continue;
        }
        if (errno == ECONNRESET)
            return braid_error(BRAID_ERR_PEER,
                               "%s reset the connection (got %zu of %zu "
                               "bytes of %s)",
                               peer, done, len, what);
        return braid_error(BRAID_ERR_IO, "recv from %s: %s", peer,
                           strerror(errno));
    }
    return BRAID_OK;
}

void braid_sock_tune(int fd)
{
    int one = 1;
    int fl  = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    /* Fails harmlessly on non-TCP sockets. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void braid_sock_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static braid_status_t listen_on(const struct sockaddr *sa, socklen_t len,
                                int *fd, int *err)
{
    int one = 1;
    int s =
        socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) {
        *err = errno;
        return BRAID_ERR_IO;
    }
    /* A fixed port (MASTER_PORT) of a job that just ended may be in
     * TIME_WAIT; that must not stop the next job. */
    (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, sa, len) != 0 || listen(s, SOMAXCONN) != 0) {
        *err = errno;
        close(s);
        return BRAID_ERR_IO;
    }
    *fd = s;
    return BRAID_OK;
}

braid_status_t braid_sock_listen(const char *host, int port, int *fd)
{
    return braid_sock_listen_try(host, port, fd, NULL);
}

braid_status_t braid_sock_listen_try(const char *host, int port, int *fd,
                                     int *in_use)
{
    struct addrinfo  hints = {.ai_family   = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags    = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res   = NULL;
    char             serv[16];
    int              err = 0;
    braid_status_t   st  = BRAID_ERR_IO;
    snprintf(serv, sizeof(serv), "%d", port);
    if (host != NULL && *host == '\0')
        host = NULL;

    int rc = getaddrinfo(host, serv, &hints, &res);
    if (rc != 0)
        return braid_error(BRAID_ERR_IO,
                           "cannot resolve listen address '%s': "
                           "%s",
                           host ? host : "*", gai_strerror(rc));
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        st = listen_on(ai->ai_addr, ai->ai_addrlen, fd, &err);
        if (st == BRAID_OK)
            goto out;
    }
    if (host != NULL && err == EADDRNOTAVAIL) {
        /* host names this machine only from the outside (NAT, a load
         * balancer): listen on every interface of the same family. */
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                  "'%s' is not a local address; "
                  "listening on port %d of every interface",
                  host, port);
        for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
            struct sockaddr_storage any;
            memset(&any, 0, sizeof(any));
            any.ss_family = (sa_family_t)ai->ai_family;
            if (ai->ai_family == AF_INET)
                ((struct sockaddr_in *)&any)->sin_port = htons((uint16_t)port);
            else if (ai->ai_family == AF_INET6)
                ((struct sockaddr_in6 *)&any)->sin6_port =
                    htons((uint16_t)port);
            else
                continue;
            st = listen_on((struct sockaddr *)&any, ai->ai_addrlen, fd, &err);
            if (st == BRAID_OK)
                goto out;
        }
    }
    if (in_use != NULL)
        *in_use = err == EADDRINUSE;
    st = braid_error(BRAID_ERR_IO, "cannot listen on %s:%d: %s%s",
                     host ? host : "*", port, strerror(err),
                     err == EADDRINUSE ? " (the port is taken: set BRAID_ADDR "
                                         "to a free host:port)"
                                       : "");
out:
    freeaddrinfo(res);
    return st;
}

braid_status_t braid_sock_route_src(const char *host, char *out, size_t n)
{
    struct addrinfo  hints = {.ai_family   = AF_UNSPEC,
                              .ai_socktype = SOCK_DGRAM,
                              .ai_flags    = AI_NUMERICSERV};
    struct addrinfo *res   = NULL;
    int              rc    = getaddrinfo(host, "9", &hints, &res);
    if (rc != 0)
        return braid_error(BRAID_ERR_IO, "cannot resolve '%s': %s", host,
                           gai_strerror(rc));
    braid_status_t st  = BRAID_ERR_IO;
    int            err = 0;
    for (struct addrinfo *ai = res; ai != NULL && st != BRAID_OK;
         ai                  = ai->ai_next) {
        /* connect() on a datagram socket only picks the route. */
        int s = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            if (s >= 0)
                close(s);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t               len = sizeof(ss);
        int                     port;
        if (getsockname(s, (struct sockaddr *)&ss, &len) == 0)
            st = braid_sockaddr_host((struct sockaddr *)&ss, len, out, n,
                                     &port);
        else
            err = errno;
        close(s);
    }
    freeaddrinfo(res);
    if (st != BRAID_OK && err != 0)
        st = braid_error(BRAID_ERR_IO, "no route to '%s': %s", host,
                         strerror(err));
    return st;
}

braid_status_t braid_sock_listen_like(int via, int *fd, char *host, size_t n,
                                      int *port)
{
    struct sockaddr_storage ss;
    socklen_t               len = sizeof(ss);
    int                     err = 0;
    if (getsockname(via, (struct sockaddr *)&ss, &len) != 0)
        return braid_error(BRAID_ERR_IO, "getsockname: %s", strerror(errno));
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = 0;
    else if (ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    else
        return braid_error(BRAID_ERR_NOT_SUPPORTED,
                           "bootstrap socket of address family %d",
                           ss.ss_family);
    if (listen_on((struct sockaddr *)&ss, len, fd, &err) != BRAID_OK)
        return braid_error(BRAID_ERR_IO,
                           "cannot listen on a new port of the "
                           "bootstrap interface: %s",
                           strerror(err));
    braid_status_t st = braid_sock_local(*fd, host, n, port);
    if (st != BRAID_OK)
        braid_sock_close(fd);
    return st;
}

braid_status_t braid_sock_adopt_listener(int fd, const char *origin)
{
    int       acc = 0, domain = 0;
    socklen_t len = sizeof(acc);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) != 0)
        return braid_error(BRAID_ERR_INVALID_ARG, "%s=%d is not a socket: %s",
                           origin, fd, strerror(errno));
    len = sizeof(domain);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
        (domain != AF_INET && domain != AF_INET6))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s=%d is not a TCP/IP socket", origin, fd);
    if (!acc)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "%s=%d is a socket but not a listening one", origin,
                           fd);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
        return braid_error(BRAID_ERR_IO, "%s=%d: fcntl: %s", origin, fd,
                           strerror(errno));
    return BRAID_OK;
}

braid_status_t braid_sock_local(int fd, char *host, size_t n, int *port)
{
    struct sockaddr_storage ss;
    socklen_t               len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return braid_error(BRAID_ERR_IO, "getsockname: %s", strerror(errno));
    return braid_sockaddr_host((struct sockaddr *)&ss, len, host, n, port);
}

/* One connection attempt, bounded by the deadline.  Returns 0, or the errno
 * of the failure. */
static int connect_once(const struct addrinfo *ai, double deadline, int *fd)
{
    int s =
        socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return errno;
    if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(s);
            return e;
        }
        for (;;) {
            struct pollfd p  = {.fd = s, .events = POLLOUT};
            int           rc = poll(&p, 1, left_ms(deadline));
            if (rc > 0)
                break;
            if (rc == 0 && braid_deadline_left(deadline) > 0.0)
                continue;
            if (rc < 0 && errno == EINTR)
                continue;
            close(s);
            return rc == 0 ? ETIMEDOUT : errno;
        }
        int       e   = 0;
        socklen_t len = sizeof(e);
        if (getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
            e = errno;
        if (e != 0) {
            close(s);
            return e;
        }
    }
    braid_sock_tune(s);
    *fd = s;
    return 0;
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec  = (time_t)s,
                          .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

braid_status_t braid_sock_connect(const char *host, int port, double deadline,
                                  int *fd)
{
    struct addrinfo hints = {.ai_family   = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags    = AI_NUMERICSERV};
    char            serv[16];
    double          backoff = 0.005;
    int             err     = 0;
    snprintf(serv, sizeof(serv), "%d", port);

    for (;;) {
        struct addrinfo *res = NULL;
        int              rc  = getaddrinfo(host, serv, &hints, &res);
        if (rc == 0) {
            for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
                err = connect_once(ai, deadline, fd);
                if (err == 0) {
                    freeaddrinfo(res);
                    return BRAID_OK;
                }
            }
            freeaddrinfo(res);
            /* Refused: rank 0 is not listening yet.  Unreachable: its
             * interface may still be coming up.  Anything else is final. */
            if (err != ECONNREFUSED && err != ETIMEDOUT &&
                err != EHOSTUNREACH && err != ENETUNREACH && err != EAGAIN &&
                err != ECONNABORTED && err != ECONNRESET)
                return braid_error(BRAID_ERR_IO,
                                   "cannot connect to rank 0 at "
                                   "%s:%d: %s",
                                   host, port, strerror(err));
        } else if (rc != EAI_AGAIN) {
            return braid_error(BRAID_ERR_IO,
                               "cannot resolve rank 0's host "
                               "'%s': %s",
                               host, gai_strerror(rc));
        }
        double left = braid_deadline_left(deadline);
        if (left <= 0.0)
            return braid_error(BRAID_ERR_TIMEOUT,
                               "cannot connect to rank 0 at %s:%d within "
                               "BRAID_TIMEOUT=%g s: %s",
                               host, port, braid_timeout_s(),
                               rc == 0 ? strerror(err) : gai_strerror(rc));
        sleep_s(backoff < left ? backoff : left);
        if (backoff < 0.2)
            backoff *= 2;
    }
}
