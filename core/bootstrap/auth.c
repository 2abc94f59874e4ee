/* Challenge-response admission: the root's concurrent accept loop and the
 * client's side of the handshake. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/auth.h"
#include "bootstrap/channel.h"
#include "bootstrap/proto.h"
#include "bootstrap/sock.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"

/* Handshakes in flight at once.  Beyond this the oldest is dropped: a flood
 * of silent connections can slow the rendezvous down but not wedge it, since
 * a legitimate rank answers its challenge within a round trip. */
#define MAX_PENDING 64

#define HELLO_MSG_LEN (BRAID_BS_HDR_LEN + BRAID_BS_HELLO_LEN)

typedef struct {
    int     fd;
    size_t  got;
    uint8_t nonce[BRAID_BS_NONCE_LEN];
    uint8_t in[HELLO_MSG_LEN];
    char    name[BRAID_ADDRSTR_LEN];
} pending_t;

typedef struct {
    const uint8_t *key;
    int            size;
    int           *fds;
    int            joined;
    pending_t      pend[MAX_PENDING];
    int            npend;
    /* Set when a connection shows that the job cannot start (a rank of it
     * with another key or another size): the rendezvous ends at once on
     * every side instead of at the timeout. */
    braid_status_t fatal;
} server_t;

/* MACs are compared without an early exit, so that timing does not tell an
 * attacker how many leading bytes of a forged MAC were right. */
static int mac_equal(uint64_t a, uint64_t b)
{
    uint64_t d = a ^ b;
    d |= d >> 32;
    d |= d >> 16;
    d |= d >> 8;
    return (d & 0xff) == 0;
}

/* Whole small message in one non-blocking send, or nothing.  Used only for
 * handshake messages into a fresh socket buffer, where a short write means
 * the peer is not a well-behaved rank. */
static int send_now(int fd, const void *buf, size_t len)
{
    ssize_t n;
    do
        n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)len;
}

static void pending_remove(server_t *s, int i, int close_fd)
{
    if (close_fd)
        close(s->pend[i].fd);
    memmove(&s->pend[i], &s->pend[i + 1],
            (size_t)(s->npend - i - 1) * sizeof(s->pend[0]));
    s->npend--;
}

static void refuse(server_t *s, int i, uint32_t reason, const char *detail)
{
    pending_t *p = &s->pend[i];
    uint8_t    msg[BRAID_BS_HDR_LEN + BRAID_BS_REFUSE_LEN];
    braid_bs_hdr_pack(msg, BRAID_BS_REFUSE, BRAID_BS_REFUSE_LEN);
    braid_put_u32(msg + BRAID_BS_HDR_LEN, reason);
    (void)send_now(p->fd, msg, sizeof(msg)); /* best effort: a courtesy */
    BRAID_LOG(BRAID_LOG_WARN, LOG_COMP, "refused connection from %s: %s%s",
              p->name, braid_bs_refuse_str(reason), detail);
    pending_remove(s, i, 1);
}

static braid_status_t accept_new(server_t *s, int lfd)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t               len = sizeof(ss);
        int                     fd = accept4(lfd, (struct sockaddr *)&ss, &len,
                                             SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                /* Out of descriptors, say: the listener stays readable, so
                 * pause instead of spinning until the deadline. */
                BRAID_LOG(BRAID_LOG_WARN, LOG_COMP, "accept: %s",
                          strerror(errno));
                struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
                nanosleep(&pause, NULL);
            }
            return BRAID_OK;
        }
        braid_sock_tune(fd);
        if (s->npend == MAX_PENDING) {
            BRAID_LOG(BRAID_LOG_WARN, LOG_COMP,
                      "dropping connection from %s: %d handshakes pending",
                      s->pend[0].name, MAX_PENDING);
            pending_remove(s, 0, 1);
        }
        pending_t *p = &s->pend[s->npend];
        memset(p, 0, sizeof(*p));
        p->fd = fd;
        braid_sockaddr_str((struct sockaddr *)&ss, len, p->name,
                           sizeof(p->name));
        braid_status_t st = braid_random_bytes(p->nonce, sizeof(p->nonce));
        if (st != BRAID_OK) {
            close(fd);
            return st;
        }
        uint8_t msg[BRAID_BS_HDR_LEN + BRAID_BS_CHALLENGE_LEN];
        braid_bs_hdr_pack(msg, BRAID_BS_CHALLENGE, BRAID_BS_CHALLENGE_LEN);
        braid_put_u32(msg + BRAID_BS_HDR_LEN, BRAID_BS_VERSION);
        memcpy(msg + BRAID_BS_HDR_LEN + 4, p->nonce, sizeof(p->nonce));
        if (!send_now(fd, msg, sizeof(msg))) {
            BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                      "connection from %s closed before its challenge",
                      p->name);
            close(fd);
            continue;
        }
        s->npend++;
    }
}

/* Reads more of pending connection i's HELLO; judges it once complete. */
static void handle_hello(server_t *s, int i)
{
    pending_t *p = &s->pend[i];
    ssize_t    n = recv(p->fd, p->in + p->got, sizeof(p->in) - p->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                  "connection from %s closed during the handshake%s%s",
                  p->name, n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
        pending_remove(s, i, 1);
        return;
    }
    p->got += (size_t)n;
    if (p->got < sizeof(p->in))
        return;

    braid_bs_hdr_t h;
    braid_bs_hdr_unpack(p->in, &h);
    if (h.magic != BRAID_BS_MAGIC || h.type != BRAID_BS_HELLO ||
        h.length != BRAID_BS_HELLO_LEN) {
        refuse(s, i, BRAID_BS_REFUSE_MALFORMED, " (bad header)");
        return;
    }
    const uint8_t *b       = p->in + BRAID_BS_HDR_LEN;
    uint32_t       version = braid_get_u32(b);
    int32_t        rank    = (int32_t)braid_get_u32(b + 4);
    int32_t        size    = (int32_t)braid_get_u32(b + 8);
    const uint8_t *cnonce  = b + 12;
    uint64_t       mac     = braid_get_u64(b + 12 + BRAID_BS_NONCE_LEN);
    char           detail[96];

    if (version != BRAID_BS_VERSION) {
        snprintf(detail, sizeof(detail), " (peer %u, ours %u)", version,
                 BRAID_BS_VERSION);
        refuse(s, i, BRAID_BS_REFUSE_VERSION, detail);
        return;
    }
    /* The proof first: an unauthenticated peer learns nothing about which
     * ranks are in. */
    if (!mac_equal(mac,
                   braid_bs_mac(s->key, 'C', p->nonce, rank, size, cnonce))) {
        snprintf(detail, sizeof(detail), " (claimed rank %d)", (int)rank);
        /* Claiming a free slot of this job: most likely one of its ranks
         * was given another BRAID_JOB_KEY, and it will never get in.  This
         * lets whoever reaches the port fail the rendezvous (not join it);
         * see the threat model in the README. */
        if (size == s->size && rank >= 1 && rank < s->size && s->fds[rank] < 0)
            s->fatal = braid_error(BRAID_ERR_AUTH,
                                   "rank %d of %d "
                                   "(connecting from %s) does not have this "
                                   "job's key: was it given another "
                                   "BRAID_JOB_KEY, or started for another "
                                   "job? The job cannot start",
                                   (int)rank, (int)size, p->name);
        refuse(s, i, BRAID_BS_REFUSE_KEY, detail);
        return;
    }
    if (size != s->size) {
        snprintf(detail, sizeof(detail),
                 " (rank %d claims size %d, job has "
                 "%d)",
                 (int)rank, (int)size, s->size);
        s->fatal = braid_error(BRAID_ERR_MISMATCH,
                               "rank %d (connecting from "
                               "%s) was started for a job of %d ranks, rank 0 "
                               "for %d: every rank must be given the same "
                               "size",
                               (int)rank, p->name, (int)size, s->size);
        refuse(s, i, BRAID_BS_REFUSE_SIZE, detail);
        return;
    }
    if (rank < 1 || rank >= s->size) {
        snprintf(detail, sizeof(detail), " (claimed rank %d, size %d)",
                 (int)rank, s->size);
        refuse(s, i, BRAID_BS_REFUSE_RANK, detail);
        return;
    }
    if (s->fds[rank] >= 0) {
        snprintf(detail, sizeof(detail), " (rank %d)", (int)rank);
        refuse(s, i, BRAID_BS_REFUSE_DUPLICATE, detail);
        return;
    }

    uint8_t msg[BRAID_BS_HDR_LEN + BRAID_BS_WELCOME_LEN];
    braid_bs_hdr_pack(msg, BRAID_BS_WELCOME, BRAID_BS_WELCOME_LEN);
    braid_put_u64(msg + BRAID_BS_HDR_LEN,
                  braid_bs_mac(s->key, 'S', cnonce, rank, size, p->nonce));
    if (!send_now(p->fd, msg, sizeof(msg))) {
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                  "rank %d at %s went away during the handshake", (int)rank,
                  p->name);
        pending_remove(s, i, 1);
        return;
    }
    BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "rank %d joined from %s", (int)rank,
              p->name);
    s->fds[rank] = p->fd;
    s->joined++;
    pending_remove(s, i, 0);
}

static braid_status_t missing_ranks_error(const server_t *s)
{
    char   list[256];
    size_t off   = 0;
    int    shown = 0, missing = s->size - 1 - s->joined;
    list[0] = '\0';
    for (int r = 1; r < s->size && off < sizeof(list); r++) {
        if (s->fds[r] >= 0)
            continue;
        if (shown == 16) {
            snprintf(list + off, sizeof(list) - off, ", ...");
            break;
        }
        int n = snprintf(list + off, sizeof(list) - off, "%s%d",
                         shown ? ", " : "", r);
        if (n < 0)
            break;
        off += (size_t)n;
        shown++;
    }
    return braid_error(BRAID_ERR_TIMEOUT,
                       "rendezvous timed out (BRAID_TIMEOUT=%g s): %d of %d "
                       "ranks did not join: rank%s %s",
                       braid_timeout_s(), missing, s->size - 1,
                       missing == 1 ? "" : "s", list);
}

braid_status_t braid_auth_serve(int lfd, const uint8_t key[16], int size,
                                int *fds, double deadline)
{
    braid_status_t st  = BRAID_OK;
    struct pollfd *pfd = NULL;
    server_t      *s;
    for (int r = 1; r < size; r++)
        fds[r] = -1;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "bootstrap accept state");
    pfd = calloc(1 + MAX_PENDING, sizeof(*pfd));
    if (pfd == NULL) {
        st = braid_error(BRAID_ERR_NO_MEMORY, "bootstrap accept state");
        goto cleanup;
    }
    s->key  = key;
    s->size = size;
    s->fds  = fds;

    while (s->joined < size - 1) {
        int np    = 0;
        pfd[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < s->npend; i++)
            pfd[np++] = (struct pollfd){.fd = s->pend[i].fd, .events = POLLIN};
        if (braid_deadline_left(deadline) <= 0.0) {
            st = missing_ranks_error(s);
            goto cleanup;
        }
        int rc = poll(pfd, (nfds_t)np, braid_deadline_ms(deadline));
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            st = braid_error(BRAID_ERR_IO,
                             "poll on the bootstrap listener: "
                             "%s",
                             strerror(errno));
            goto cleanup;
        }
        if (rc == 0)
            continue;
        /* Pending connections first, from the back, so that removals do not
         * shift entries not yet visited; pfd[1 + i] is pend[i]. */
        for (int i = s->npend - 1; i >= 0; i--) {
            if (pfd[1 + i].revents != 0)
                handle_hello(s, i);
        }
        if (s->fatal != BRAID_OK) {
            st = s->fatal; /* its message is the thread's last error */
            goto cleanup;
        }
        if (pfd[0].revents != 0) {
            st = accept_new(s, lfd);
            if (st != BRAID_OK)
                goto cleanup;
        }
    }

cleanup:
    while (s->npend > 0) {
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                  "closing unfinished handshake "
                  "from %s",
                  s->pend[0].name);
        pending_remove(s, 0, 1);
    }
    if (st != BRAID_OK) {
        /* The ranks already in wait for READY: an ABORT instead tells them
         * why the job ends. */
        uint8_t frame[BRAID_BS_HDR_LEN + BRAID_BS_ABORT_LEN];
        braid_bs_abort_pack(frame, st, -1, braid_last_error());
        for (int r = 1; r < size; r++) {
            if (fds[r] >= 0)
                (void)send_now(fds[r], frame, sizeof(frame));
            braid_sock_close(&fds[r]);
        }
    }
    free(pfd);
    free(s);
    return st;
}

braid_status_t braid_auth_release(int *fds, int size, double deadline)
{
    for (int r = 1; r < size; r++) {
        char peer[32];
        snprintf(peer, sizeof(peer), "rank %d", r);
        braid_status_t st =
            braid_bs_send(fds[r], BRAID_BS_READY, NULL, 0, deadline, peer);
        if (st != BRAID_OK) {
            for (int k = 1; k < size; k++)
                braid_sock_close(&fds[k]);
            return st;
        }
    }
    return BRAID_OK;
}

braid_status_t braid_auth_join(int fd, const uint8_t key[16], int rank,
                               int size, double deadline, const char *root)
{
    uint8_t        ch[BRAID_BS_CHALLENGE_LEN];
    uint8_t        cnonce[BRAID_BS_NONCE_LEN];
    braid_status_t st;

    st = braid_bs_recv(fd, BRAID_BS_CHALLENGE, ch, sizeof(ch), deadline, root);
    if (st != BRAID_OK)
        return st;
    uint32_t version = braid_get_u32(ch);
    if (version != BRAID_BS_VERSION)
        return braid_error(BRAID_ERR_MISMATCH,
                           "%s speaks bootstrap protocol "
                           "version %u, this rank %u (mixed braid versions?)",
                           root, version, BRAID_BS_VERSION);
    const uint8_t *rnonce = ch + 4;

    st = braid_random_bytes(cnonce, sizeof(cnonce));
    if (st != BRAID_OK)
        return st;
    uint8_t hello[BRAID_BS_HELLO_LEN];
    braid_put_u32(hello, BRAID_BS_VERSION);
    braid_put_u32(hello + 4, (uint32_t)rank);
    braid_put_u32(hello + 8, (uint32_t)size);
    memcpy(hello + 12, cnonce, sizeof(cnonce));
    braid_put_u64(hello + 12 + BRAID_BS_NONCE_LEN,
                  braid_bs_mac(key, 'C', rnonce, rank, size, cnonce));
    st = braid_bs_send(fd, BRAID_BS_HELLO, hello, sizeof(hello), deadline,
                       root);
    if (st != BRAID_OK)
        return st;

    /* WELCOME or REFUSE. */
    uint8_t        raw[BRAID_BS_HDR_LEN];
    braid_bs_hdr_t h;
    st = braid_sock_recv(fd, raw, sizeof(raw), deadline, root,
                         "the answer to our hello");
    if (st != BRAID_OK)
        return st;
    braid_bs_hdr_unpack(raw, &h);
    if (h.magic == BRAID_BS_MAGIC && h.type == BRAID_BS_REFUSE) {
        uint8_t reason[BRAID_BS_REFUSE_LEN];
        st = braid_bs_hdr_check(&h, BRAID_BS_REFUSE, sizeof(reason), root);
        if (st == BRAID_OK)
            st = braid_sock_recv(fd, reason, sizeof(reason), deadline, root,
                                 "a refusal");
        if (st != BRAID_OK)
            return st;
        return braid_error(BRAID_ERR_AUTH, "%s refused rank %d of %d: %s",
                           root, rank, size,
                           braid_bs_refuse_str(braid_get_u32(reason)));
    }
    uint8_t welcome[BRAID_BS_WELCOME_LEN];
    st = braid_bs_hdr_check(&h, BRAID_BS_WELCOME, sizeof(welcome), root);
    if (st == BRAID_OK)
        st = braid_sock_recv(fd, welcome, sizeof(welcome), deadline, root,
                             "welcome");
    if (st != BRAID_OK)
        return st;
    if (!mac_equal(braid_get_u64(welcome),
                   braid_bs_mac(key, 'S', cnonce, rank, size, rnonce)))
        return braid_error(BRAID_ERR_AUTH,
                           "%s failed the job-key proof: it "
                           "is not rank 0 of this job (stale rendezvous "
                           "address, or another job on the port)",
                           root);

    /* READY, or an ABORT when the rendezvous failed at the root. */
    st = braid_sock_recv(fd, raw, sizeof(raw), deadline, root, "READY");
    if (st != BRAID_OK)
        return st;
    braid_bs_hdr_unpack(raw, &h);
    if (braid_bs_hdr_is_abort(&h)) {
        uint8_t ab[BRAID_BS_ABORT_LEN];
        char    text[BRAID_BS_ABORT_TEXT_LEN + 1];
        st = braid_sock_recv(fd, ab, sizeof(ab), deadline, root, "abort");
        if (st != BRAID_OK)
            return st;
        braid_bs_abort_text(ab, text, sizeof(text));
        int32_t code = (int32_t)braid_get_u32(ab);
        return braid_error(code < 0 && code >= BRAID_ERR_INTERNAL
                               ? (braid_status_t)code
                               : BRAID_ERR_PEER,
                           "%s gave up the rendezvous: %s", root, text);
    }
    return braid_bs_hdr_check(&h, BRAID_BS_READY, 0, root);
}
