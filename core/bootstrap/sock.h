/* TCP helpers of the bootstrap.  Every socket is non-blocking and
 * close-on-exec; every wait is a poll() bounded by an absolute deadline
 * (braid_now_s() clock), so that no peer can hang us past BRAID_TIMEOUT. */
#ifndef BRAID_BOOTSTRAP_SOCK_H
#define BRAID_BOOTSTRAP_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

#include <braid/braid.h>

/* Big enough for "[v6addr%ifname]:port". */
#define BRAID_ADDRSTR_LEN 96

/* Seconds from now to the deadline (0 if past). */
double braid_deadline_left(double deadline);
/* poll() timeout for the time left: rounded up, so that nobody spins on a
 * deadline a fraction of a millisecond away, and capped to fit an int. */
int braid_deadline_ms(double deadline);
/* Deadline BRAID_TIMEOUT seconds from now. */
double braid_deadline_from_now(void);

/* "127.0.0.1:5000" or "[::1]:5000". */
void braid_sockaddr_str(const struct sockaddr *sa, socklen_t len, char *buf,
                        size_t n);
/* Numeric host ("127.0.0.1", "fe80::1%eth0") and port of sa. */
braid_status_t braid_sockaddr_host(const struct sockaddr *sa, socklen_t len,
                                   char *host, size_t n, int *port);

/* Waits for events on fd.  BRAID_ERR_TIMEOUT past the deadline, naming
 * what was awaited and from whom. */
braid_status_t braid_sock_wait(int fd, short events, double deadline,
                               const char *peer, const char *what);
/* Sends or receives exactly len bytes.  A closed or reset connection is
 * BRAID_ERR_PEER naming peer; other socket errors BRAID_ERR_IO. */
braid_status_t braid_sock_send(int fd, const void *buf, size_t len,
                               double deadline, const char *peer);
braid_status_t braid_sock_recv(int fd, void *buf, size_t len, double deadline,
                               const char *peer, const char *what);

/* Non-blocking and TCP_NODELAY (small control messages must not wait for
 * Nagle's algorithm). */
void braid_sock_tune(int fd);
void braid_sock_close(int *fd);

/* Listening socket on host:port (host NULL or "" = any address; port 0 =
 * ephemeral).  When host is not an address of this machine (a NATed or
 * public MASTER_ADDR) the wildcard address is used instead. */
braid_status_t braid_sock_listen(const char *host, int port, int *fd);
/* As braid_sock_listen; *in_use (if not NULL) is 1 when the port was taken
 * (EADDRINUSE), so that the caller can try someone else's service there. */
braid_status_t braid_sock_listen_try(const char *host, int port, int *fd,
                                     int *in_use);
/* Numeric address of the interface this host would use to reach host (a
 * route lookup: nothing is sent). */
braid_status_t braid_sock_route_src(const char *host, char *out, size_t n);
/* Listening socket on an ephemeral port of the interface that the connected
 * socket via uses; *host and *port say where peers should connect. */
braid_status_t braid_sock_listen_like(int via, int *fd, char *host, size_t n,
                                      int *port);
/* Takes over an inherited fd: checks that it is a listening TCP socket and
 * makes it non-blocking and close-on-exec. */
braid_status_t braid_sock_adopt_listener(int fd, const char *origin);
/* Where a listening socket is bound. */
braid_status_t braid_sock_local(int fd, char *host, size_t n, int *port);

/* Connects to host:port, retrying refused or unreachable attempts (the
 * listener may not be up yet) until the deadline. */
braid_status_t braid_sock_connect(const char *host, int port, double deadline,
                                  int *fd);

#endif
