/* The bootstrap channel: a TCP star rooted at rank 0.
 *
 * Rank 0 talks to every other rank over its own socket; the others talk
 * only to rank 0.  That costs the root O(size) messages per operation, which
 * is fine for an out-of-band channel that carries addresses and barriers,
 * and it keeps every operation a fixed, simple exchange: contributions up,
 * results down.  All operations are collective, so the root serving the
 * star in a blocking loop cannot deadlock. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/auth.h"
#include "bootstrap/channel.h"
#include "bootstrap/proto.h"
#include "bootstrap/rendezvous.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"

static const char *rank_name(int r, char buf[32])
{
    snprintf(buf, 32, "rank %d", r);
    return buf;
}

braid_status_t braid_bs_create(int rank, int size, const uint8_t key[16],
                               braid_bootstrap_t **out)
{
    braid_bootstrap_t *bs = calloc(1, sizeof(*bs));
    if (bs == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "bootstrap channel");
    bs->rank    = rank;
    bs->size    = size;
    bs->root_fd = -1;
    memcpy(bs->key, key, sizeof(bs->key));
    snprintf(bs->root_name, sizeof(bs->root_name), "rank 0");
    if (rank == 0 && size > 1) {
        bs->fds  = malloc((size_t)size * sizeof(int));
        bs->pfd  = malloc((size_t)size * sizeof(*bs->pfd));
        bs->lost = malloc((size_t)size * sizeof(int));
        bs->busy = malloc((size_t)size);
        if (bs->fds == NULL || bs->pfd == NULL || bs->lost == NULL ||
            bs->busy == NULL) {
            braid_bootstrap_destroy(bs);
            return braid_error(BRAID_ERR_NO_MEMORY,
                               "bootstrap channel of %d "
                               "ranks",
                               size);
        }
        for (int r = 0; r < size; r++)
            bs->fds[r] = -1;
    }
    *out = bs;
    return BRAID_OK;
}

static void close_all(braid_bootstrap_t *bs)
{
    if (bs->fds != NULL) {
        for (int r = 0; r < bs->size; r++)
            braid_sock_close(&bs->fds[r]);
    }
    braid_sock_close(&bs->root_fd);
}

/* The stream is in an unknown state after any error, so the channel is
 * done; closing its sockets (after an ABORT frame saying why, abort.c) tells
 * the peers at once instead of after their timeout. */
static braid_status_t fail(braid_bootstrap_t *bs, braid_status_t st)
{
    /* An operation that timed out inside a call of the communicator (an
     * algorithm's out-of-band exchange) waited for ranks that are
     * elsewhere: the failure inquiry finds out where, as for the call. */
    if (st == BRAID_ERR_TIMEOUT && braid_bs_can_inquire(bs))
        return braid_bootstrap_inquire(bs, st);
    return braid_bs_fail(bs, st);
}

static braid_status_t check_usable(const braid_bootstrap_t *bs, const char *op)
{
    if (bs == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "bootstrap %s: NULL channel",
                           op);
    if (bs->failed != BRAID_OK)
        return braid_error(BRAID_ERR_STATE,
                           "bootstrap %s: the channel failed "
                           "earlier (%s): %s",
                           op, braid_status_str(bs->failed), bs->failed_msg);
    return BRAID_OK;
}

/* Peer `from` (a rank at the root, the root elsewhere) closed or broke the
 * connection: the message of the last error says how. */
static braid_status_t closed(braid_bootstrap_t *bs, int from)
{
    char why[512];
    snprintf(why, sizeof(why), "%s", braid_last_error());
    if (bs->rank != 0)
        return braid_bs_root_lost(bs, why);
    return braid_bs_lost(bs, &from, 1, why);
}

/* One framed message from peer `from` on fd, of this type and length.  As
 * braid_bs_recv, except that an ABORT frame in its place is the peer's last
 * word (the channel fails with its text), and a connection that ends is a
 * lost peer, named. */
static braid_status_t chan_recv(braid_bootstrap_t *bs, int fd, int from,
                                uint32_t type, void *payload, size_t len,
                                double deadline, const char *peer)
{
    uint8_t        raw[BRAID_BS_HDR_LEN];
    braid_bs_hdr_t h;
    const char    *what = braid_bs_type_name(type);
    braid_status_t st =
        braid_sock_recv(fd, raw, sizeof(raw), deadline, peer, what);
    if (st == BRAID_ERR_PEER)
        return closed(bs, from);
    if (st != BRAID_OK)
        return st;
    braid_bs_hdr_unpack(raw, &h);
    if (braid_bs_hdr_is_abort(&h)) {
        uint8_t ab[BRAID_BS_ABORT_LEN];
        st = braid_sock_recv(fd, ab, sizeof(ab), deadline, peer, "abort");
        if (st == BRAID_ERR_PEER)
            return closed(bs, from);
        if (st != BRAID_OK)
            return st;
        return bs->rank == 0 ? braid_bs_rank_failed(bs, from, ab)
                             : braid_bs_aborted(bs, ab);
    }
    /* A failure inquiry in place of this operation's message: the channel
     * fails with its verdict, and this operation with it. */
    if (h.magic == BRAID_BS_MAGIC && braid_bs_can_inquire(bs)) {
        if (bs->rank != 0 && h.type == BRAID_BS_QUERY && h.length == 0)
            return braid_bs_query_arrived(bs);
        if (bs->rank == 0 && h.type == BRAID_BS_STATUS &&
            h.length == bs->inq.report_len)
            return braid_bs_status_arrived(bs, from, deadline);
    }
    st = braid_bs_hdr_check(&h, type, len, peer);
    if (st != BRAID_OK || len == 0)
        return st;
    st = braid_sock_recv(fd, payload, len, deadline, peer, what);
    return st == BRAID_ERR_PEER ? closed(bs, from) : st;
}

static braid_status_t chan_send(braid_bootstrap_t *bs, int fd, int to,
                                uint32_t type, const void *payload, size_t len,
                                double deadline, const char *peer)
{
    braid_status_t st = braid_bs_send(fd, type, payload, len, deadline, peer);
    /* braid_bs_send's only BRAID_ERR_PEER is a closed or reset connection. */
    return st == BRAID_ERR_PEER ? closed(bs, to) : st;
}

#define HUNG_UP (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)

/* Root: waits until rank r's socket is readable, watching every other
 * rank's connection meanwhile.  A rank that dies while the root waits for
 * another one -- which may itself be waiting, in a collective of the data
 * plane, for the dead one -- is then reported at once and named, and the
 * ABORT reaches everyone, instead of a timeout on the wrong rank. */
static braid_status_t root_wait(braid_bootstrap_t *bs, int r, double deadline,
                                const char *what)
{
    struct pollfd one = {.fd = bs->fds[r], .events = POLLIN};
    if (poll(&one, 1, 0) > 0)
        return BRAID_OK; /* the common case, without a scan */
    /* The others are watched for their end, and, while a failure inquiry
     * can run, for a report that would start one (a rank whose call
     * failed while we wait here for r). */
    int watch = braid_bs_can_inquire(bs);
    memset(bs->busy, 0, (size_t)bs->size);
    for (;;) {
        int n = 0, nlost = 0;
        for (int k = 1; k < bs->size; k++)
            bs->pfd[n++] = (struct pollfd){
                .fd     = bs->fds[k],
                .events = POLLRDHUP |
                          (k == r || (watch && !bs->busy[k]) ? POLLIN : 0)};
        int rc = poll(bs->pfd, (nfds_t)n, braid_deadline_ms(deadline));
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            return braid_error(BRAID_ERR_IO,
                               "poll on the bootstrap sockets: "
                               "%s",
                               strerror(errno));
        }
        for (int k = 1; k < bs->size; k++) {
            if (k != r && (bs->pfd[k - 1].revents & HUNG_UP))
                bs->lost[nlost++] = k;
        }
        if (nlost > 0)
            return braid_bs_lost(bs, bs->lost, nlost, NULL);
        if (bs->pfd[r - 1].revents != 0)
            return BRAID_OK; /* data, or its own end: the read tells */
        for (int k = 1; watch && rc > 0 && k < bs->size; k++) {
            if (k != r && (bs->pfd[k - 1].revents & POLLIN) &&
                braid_bs_report_waiting(bs, k, &bs->busy[k]))
                return braid_bs_status_arrived(bs, k, deadline);
        }
        if (rc == 0 && braid_deadline_left(deadline) <= 0.0)
            return braid_error(BRAID_ERR_TIMEOUT,
                               "timed out waiting for %s "
                               "from rank %d (BRAID_TIMEOUT=%g s)",
                               what, r, braid_timeout_s());
    }
}

/* Root: one message of rank r. */
static braid_status_t root_recv(braid_bootstrap_t *bs, int r, uint32_t type,
                                void *payload, size_t len, double deadline)
{
    char           peer[32];
    braid_status_t st = root_wait(bs, r, deadline, braid_bs_type_name(type));
    if (st != BRAID_OK)
        return st;
    return chan_recv(bs, bs->fds[r], r, type, payload, len, deadline,
                     rank_name(r, peer));
}

int braid_bs_any_fd(const braid_bootstrap_t *bs)
{
    if (bs->fds != NULL) {
        for (int r = 1; r < bs->size; r++) {
            if (bs->fds[r] >= 0)
                return bs->fds[r];
        }
    }
    return bs->root_fd;
}

braid_status_t braid_bs_serve(braid_bootstrap_t *bs, int *lfd,
                              const char *rdv_path, double deadline)
{
    braid_status_t st =
        braid_auth_serve(*lfd, bs->key, bs->size, bs->fds, deadline);
    if (rdv_path != NULL)
        braid_rdv_remove(rdv_path);
    braid_sock_close(lfd);
    if (st == BRAID_OK)
        st = braid_auth_release(bs->fds, bs->size, deadline);
    if (st == BRAID_OK)
        st = braid_bs_ident_gather(bs, deadline);
    if (st != BRAID_OK)
        close_all(bs);
    return st;
}

static void set_root_name(braid_bootstrap_t *bs, const char *host, int port)
{
    snprintf(bs->root_name, sizeof(bs->root_name),
             strchr(host, ':') ? "rank 0 at [%s]:%d" : "rank 0 at %s:%d", host,
             port);
}

/* The handshake on a connected socket, which the channel keeps on success
 * and closes otherwise. */
static braid_status_t handshake(braid_bootstrap_t *bs, int fd, double deadline)
{
    braid_status_t st = braid_auth_join(fd, bs->key, bs->rank, bs->size,
                                        deadline, bs->root_name);
    if (st == BRAID_OK)
        st = braid_bs_ident_send(fd, deadline, bs->root_name);
    if (st != BRAID_OK) {
        braid_sock_close(&fd);
        return st;
    }
    bs->root_fd = fd;
    return BRAID_OK;
}

braid_status_t braid_bs_join(braid_bootstrap_t *bs, const char *host, int port,
                             double connect_deadline, double deadline)
{
    int fd = -1;
    set_root_name(bs, host, port);
    braid_status_t st = braid_sock_connect(host, port, connect_deadline, &fd);
    return st != BRAID_OK ? st : handshake(bs, fd, deadline);
}

/* Root of a file rendezvous: publish where we listen and the key. */
static braid_status_t file_publish(braid_bootstrap_t    *bs,
                                   const braid_launch_t *l, int lfd,
                                   const char *path)
{
    char           host[BRAID_ADDRSTR_LEN];
    int            port;
    braid_status_t st;
    if (!l->key_set && (st = braid_random_bytes(bs->key, 16)) != BRAID_OK)
        return st;
    if ((st = braid_sock_local(lfd, host, sizeof(host), &port)) != BRAID_OK)
        return st;
    BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "rendezvous file %s: %s port %d",
              path, host, port);
    return braid_rdv_publish(path, host, port, bs->key);
}

/* Others in a file rendezvous: read the file, connect, join.  A file left
 * by an earlier job of the same id points at a dead port; rank 0 replaces it
 * shortly, so a refused connection means reading the file again. */
static braid_status_t file_join(braid_bootstrap_t *bs, const braid_launch_t *l,
                                const char *path, double deadline)
{
    for (;;) {
        char           host[BRAID_ADDRSTR_LEN];
        int            port;
        uint8_t        key[16];
        braid_status_t st =
            braid_rdv_read(path, deadline, host, sizeof(host), &port, key);
        if (st != BRAID_OK)
            return st;
        memcpy(bs->key, l->key_set ? l->key : key, sizeof(bs->key));
        set_root_name(bs, host, port);
        /* A short connect deadline, then the file again; once rank 0
         * answered, the handshake waits as long as any rank would. */
        double attempt = braid_now_s() + 0.5;
        int    fd      = -1;
        st             = braid_sock_connect(host, port,
                                attempt < deadline ? attempt : deadline, &fd);
        if (st == BRAID_ERR_TIMEOUT && braid_deadline_left(deadline) > 0.0) {
            BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "%s; reading %s again",
                      braid_last_error(), path);
            continue;
        }
        return st != BRAID_OK ? st : handshake(bs, fd, deadline);
    }
}

braid_status_t braid_bootstrap_init(const braid_launch_t *launch,
                                    braid_bootstrap_t   **out)
{
    braid_bootstrap_t *bs         = NULL;
    braid_status_t     st         = BRAID_OK;
    int                lfd        = -1;
    char               path[4200] = "";
    int                published  = 0;

    if (launch != NULL && launch->has_listen_fd) {
        lfd = launch->listen_fd; /* ours now, whatever happens */
        braid_launch_listen_fd_taken();
    }
    if (launch == NULL || out == NULL) {
        st = braid_error(BRAID_ERR_INVALID_ARG, "bootstrap init: NULL %s",
                         launch == NULL ? "launch" : "output");
        goto cleanup;
    }
    *out = NULL;
    if (launch->size < 1 || launch->rank < 0 || launch->rank >= launch->size) {
        st = braid_error(BRAID_ERR_INVALID_ARG,
                         "bootstrap init: rank %d of "
                         "size %d",
                         launch->rank, launch->size);
        goto cleanup;
    }
    if ((st = braid_bs_create(launch->rank, launch->size, launch->key, &bs)) !=
        BRAID_OK)
        goto cleanup;
    if (launch->size == 1)
        goto cleanup;

    double deadline = braid_deadline_from_now();
    if (launch->rdv == BRAID_RDV_STORE || launch->rdv == BRAID_RDV_PROBE) {
        st = braid_bs_torch_init(bs, launch, deadline);
        goto cleanup;
    }
    int file_mode = launch->host[0] == '\0';
    if (file_mode &&
        (st = braid_rdv_path(launch, path, sizeof(path))) != BRAID_OK)
        goto cleanup;

    if (launch->rank == 0) {
        if (lfd >= 0)
            st = braid_sock_adopt_listener(lfd, "BRAID_LISTEN_FD");
        else if (!file_mode)
            st = braid_sock_listen(launch->host, launch->port, &lfd);
        else
            st = braid_sock_listen(
                launch->ifaddr[0] ? launch->ifaddr : "127.0.0.1", 0, &lfd);
        if (st != BRAID_OK)
            goto cleanup;
        if (file_mode) {
            if ((st = file_publish(bs, launch, lfd, path)) != BRAID_OK)
                goto cleanup;
            published = 1;
        }
        st = braid_bs_serve(bs, &lfd, published ? path : NULL, deadline);
        published = 0; /* serve removed it */
    } else if (file_mode) {
        st = file_join(bs, launch, path, deadline);
    } else {
        st = braid_bs_join(bs, launch->host, launch->port, deadline, deadline);
    }
    if (st == BRAID_OK)
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "rank %d of %d: bootstrap up",
                  launch->rank, launch->size);

cleanup:
    if (published)
        braid_rdv_remove(path);
    braid_sock_close(&lfd);
    if (st != BRAID_OK) {
        braid_bootstrap_destroy(bs);
        bs = NULL;
    }
    if (out != NULL)
        *out = bs;
    return st;
}

int braid_bootstrap_rank(const braid_bootstrap_t *bs)
{
    return bs ? bs->rank : -1;
}

int braid_bootstrap_size(const braid_bootstrap_t *bs)
{
    return bs ? bs->size : -1;
}

/* Root: one message of type up and len bytes from every other rank, into
 * buf + r*len (stride 0: all into buf, for empty messages).  Others: send
 * theirs. */
static braid_status_t gather_up(braid_bootstrap_t *bs, uint32_t up,
                                const void *send, void *buf, size_t len,
                                double deadline)
{
    if (bs->rank != 0)
        return chan_send(bs, bs->root_fd, 0, up, send, len, deadline,
                         bs->root_name);
    for (int r = 1; r < bs->size; r++) {
        void          *dst = len > 0 ? (char *)buf + (size_t)r * len : buf;
        braid_status_t st  = root_recv(bs, r, up, dst, len, deadline);
        if (st != BRAID_OK)
            return st;
    }
    return BRAID_OK;
}

/* Root: send buf to every rank but skip.  Others (but skip): receive it. */
static braid_status_t send_down(braid_bootstrap_t *bs, uint32_t down,
                                void *buf, size_t len, int skip,
                                double deadline)
{
    char peer[32];
    if (bs->rank != 0) {
        if (bs->rank == skip)
            return BRAID_OK;
        return chan_recv(bs, bs->root_fd, 0, down, buf, len, deadline,
                         bs->root_name);
    }
    for (int r = 1; r < bs->size; r++) {
        if (r == skip)
            continue;
        braid_status_t st = chan_send(bs, bs->fds[r], r, down, buf, len,
                                      deadline, rank_name(r, peer));
        if (st != BRAID_OK)
            return st;
    }
    return BRAID_OK;
}

braid_status_t braid_bootstrap_allgather(braid_bootstrap_t *bs,
                                         const void *sendbuf, void *recvbuf,
                                         size_t len)
{
    braid_status_t st = check_usable(bs, "allgather");
    if (st != BRAID_OK)
        return st;
    if (len > 0 && (sendbuf == NULL || recvbuf == NULL))
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "bootstrap allgather: NULL "
                           "buffer for %zu bytes",
                           len);
    if (len > SIZE_MAX / (size_t)bs->size)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "bootstrap allgather: %zu "
                           "bytes times %d ranks overflows",
                           len, bs->size);
    char *recv = recvbuf;
    /* memmove: in place, sendbuf is recvbuf + rank*len. */
    if (len > 0 && (bs->rank == 0 || bs->size == 1))
        memmove(recv + (size_t)bs->rank * len, sendbuf, len);
    if (bs->size == 1)
        return BRAID_OK;

    double deadline = braid_deadline_from_now();
    st = gather_up(bs, BRAID_BS_GATHER, sendbuf, recv, len, deadline);
    if (st == BRAID_OK)
        st = send_down(bs, BRAID_BS_GATHER_RESULT, recv,
                       len * (size_t)bs->size, -1, deadline);
    return st == BRAID_OK ? st : fail(bs, st);
}

braid_status_t braid_bootstrap_bcast(braid_bootstrap_t *bs, void *buf,
                                     size_t len, int root)
{
    braid_status_t st = check_usable(bs, "bcast");
    if (st != BRAID_OK)
        return st;
    if (root < 0 || root >= bs->size)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "bootstrap bcast: root %d "
                           "not in [0, %d)",
                           root, bs->size);
    if (len > 0 && buf == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "bootstrap bcast: NULL "
                           "buffer for %zu bytes",
                           len);
    if (bs->size == 1)
        return BRAID_OK;

    double deadline = braid_deadline_from_now();
    /* A root other than 0 first hands the data to rank 0, the hub. */
    if (root != 0) {
        if (bs->rank == root)
            st = chan_send(bs, bs->root_fd, 0, BRAID_BS_BCAST_UP, buf, len,
                           deadline, bs->root_name);
        else if (bs->rank == 0)
            st = root_recv(bs, root, BRAID_BS_BCAST_UP, buf, len, deadline);
    }
    if (st == BRAID_OK)
        st = send_down(bs, BRAID_BS_BCAST, buf, len, root, deadline);
    return st == BRAID_OK ? st : fail(bs, st);
}

braid_status_t braid_bootstrap_barrier(braid_bootstrap_t *bs)
{
    braid_status_t st = check_usable(bs, "barrier");
    if (st != BRAID_OK || bs->size == 1)
        return st;
    double deadline = braid_deadline_from_now();
    st              = gather_up(bs, BRAID_BS_BARRIER, NULL, NULL, 0, deadline);
    if (st == BRAID_OK)
        st = send_down(bs, BRAID_BS_BARRIER_DONE, NULL, 0, -1, deadline);
    return st == BRAID_OK ? st : fail(bs, st);
}

void braid_bootstrap_destroy(braid_bootstrap_t *bs)
{
    if (bs == NULL)
        return;
    close_all(bs);
    free(bs->fds);
    free(bs->pfd);
    free(bs->lost);
    free(bs->busy);
    free(bs->idents);
    free(bs);
}
