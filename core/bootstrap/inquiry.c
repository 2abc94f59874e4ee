/* The failure inquiry of a bootstrap channel (bootstrap.h).
 *
 * A call of the communicator failed somewhere: a rank timed out, a
 * transport reported an error, or the root saw a rank's connection end.
 * Each rank alone sees only its side -- a survivor of a stopped rank times
 * out like every other survivor, and may blame whichever peer its
 * algorithm happened to wait for -- so before the channel fails, the root
 * asks everyone (QUERY), each rank answers with a report of the
 * communicator's making (STATUS: the calls it entered and completed and
 * their signatures, what its host's board shows), and the root sends the
 * verdict it draws from them to everyone in the ABORT frame.  Every rank
 * then reports the same message, naming the same failed call and the same
 * culprit.
 *
 * Bounded everywhere: the root waits braid_inquiry_window_s() for reports
 * (a rank inside braid answers within milliseconds, from its wait loop or
 * its out-of-band operation; one that does not by then is "silent"), a
 * rank waits twice that for the verdict, then judges alone. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bootstrap/channel.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"
/* An operation's message in the way of an answer is read and dropped (the
 * channel is failing anyway); anything longer is not a frame of ours. */
#define SKIP_MAX (1u << 20)

double braid_inquiry_window_s(void)
{
    double w = braid_timeout_s() / 4.0;
    return w < 0.25 ? 0.25 : w > 2.0 ? 2.0 : w;
}

void braid_bootstrap_set_inquiry(braid_bootstrap_t     *bs,
                                 const braid_inquiry_t *inq)
{
    if (bs != NULL && inq != NULL)
        bs->inq = *inq;
}

int braid_bs_can_inquire(const braid_bootstrap_t *bs)
{
    return bs->inq.report_len > 0 && !bs->inquiring && bs->failed == BRAID_OK;
}

void braid_bootstrap_ident(const braid_bootstrap_t *bs, int r, long *pid,
                           char *host, size_t host_len)
{
    *pid = 0;
    if (host_len > 0)
        host[0] = '\0';
    if (bs == NULL || bs->idents == NULL || r < 0 || r >= bs->size)
        return;
    *pid = bs->idents[r].pid;
    snprintf(host, host_len, "%s", bs->idents[r].host);
}

int braid_bs_report_waiting(braid_bootstrap_t *bs, int r, uint8_t *busy)
{
    uint8_t        raw[BRAID_BS_HDR_LEN];
    braid_bs_hdr_t h;
    ssize_t        n;
    do
        n = recv(bs->fds[r], raw, sizeof(raw), MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(raw))
        return 0;
    braid_bs_hdr_unpack(raw, &h);
    if (h.magic != BRAID_BS_MAGIC || h.type != BRAID_BS_STATUS ||
        h.length != bs->inq.report_len) {
        if (busy != NULL)
            *busy = 1;
        return 0;
    }
    do
        n = recv(bs->fds[r], raw, sizeof(raw), MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(raw);
}

/* Reads and drops len bytes (an operation's message). */
static braid_status_t skip(int fd, uint64_t len, double deadline)
{
    uint8_t sink[4096];
    while (len > 0) {
        size_t         n = len < sizeof(sink) ? (size_t)len : sizeof(sink);
        braid_status_t st =
            braid_sock_recv(fd, sink, n, deadline, "peer", "a message");
        if (st != BRAID_OK)
            return st;
        len -= n;
    }
    return BRAID_OK;
}

/* Root: reads rank r's next frame while collecting reports. */
static void root_read(braid_bootstrap_t *bs, int r, uint8_t *state,
                      uint8_t *reports, double deadline)
{
    uint8_t        raw[BRAID_BS_HDR_LEN];
    braid_bs_hdr_t h;
    size_t         len = bs->inq.report_len;
    braid_status_t st = braid_sock_recv(bs->fds[r], raw, sizeof(raw), deadline,
                                        "rank", "a report");
    if (st == BRAID_OK) {
        braid_bs_hdr_unpack(raw, &h);
        if (h.magic != BRAID_BS_MAGIC)
            st = BRAID_ERR_PEER;
        else if (h.type == BRAID_BS_STATUS && h.length == len)
            st = braid_sock_recv(bs->fds[r], reports + (size_t)r * len, len,
                                 deadline, "rank", "a report");
        else if (h.type == BRAID_BS_ABORT || h.length > SKIP_MAX)
            st = BRAID_ERR_PEER; /* it left on its own */
        else if ((st = skip(bs->fds[r], h.length, deadline)) == BRAID_OK)
            return; /* an operation's message: the report follows */
    }
    state[r] = st == BRAID_OK && h.type == BRAID_BS_STATUS ? BRAID_INQ_ANSWERED
               : st == BRAID_ERR_TIMEOUT                   ? BRAID_INQ_SILENT
                                                           : BRAID_INQ_LOST;
}

/* Root: waits for the reports of the pending ranks until the window ends. */
static void collect(braid_bootstrap_t *bs, uint8_t *state, uint8_t *reports,
                    double deadline)
{
    struct pollfd *pfd = bs->pfd;
    int           *who = bs->lost; /* scratch of the same size */
    for (;;) {
        int n = 0;
        for (int r = 1; r < bs->size; r++) {
            if (state[r] != BRAID_INQ_PENDING)
                continue;
            pfd[n]   = (struct pollfd){.fd     = bs->fds[r],
                                       .events = POLLIN | POLLRDHUP};
            who[n++] = r;
        }
        if (n == 0)
            return;
        int rc = poll(pfd, (nfds_t)n, braid_deadline_ms(deadline));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            break; /* the window is over (or poll failed: stop asking) */
        for (int i = 0; i < n; i++) {
            if (pfd[i].revents != 0)
                root_read(bs, who[i], state, reports, deadline);
        }
    }
    for (int r = 1; r < bs->size; r++) {
        if (state[r] == BRAID_INQ_PENDING)
            state[r] = BRAID_INQ_SILENT;
    }
}

braid_status_t braid_bs_root_inquiry(braid_bootstrap_t *bs, uint8_t *state,
                                     uint8_t *reports, braid_status_t st,
                                     const char *text)
{
    size_t   len  = bs->inq.report_len;
    uint8_t *mine = reports;
    char     saved[512];
    snprintf(saved, sizeof(saved), "%s", text);
    if (mine == NULL && (mine = calloc((size_t)bs->size, len)) == NULL) {
        braid_error(st != BRAID_OK ? st : BRAID_ERR_NO_MEMORY,
                    "%s (no "
                    "memory to ask the other ranks)",
                    saved);
        return braid_bs_fail(bs, st != BRAID_OK ? st : BRAID_ERR_NO_MEMORY);
    }
    bs->inquiring   = 1;
    double deadline = braid_now_s() + braid_inquiry_window_s();
    bs->inq.report(bs->inq.ctx, mine, st, saved);
    state[0] = BRAID_INQ_ANSWERED;
    uint8_t query[BRAID_BS_HDR_LEN];
    braid_bs_hdr_pack(query, BRAID_BS_QUERY, 0);
    for (int r = 1; r < bs->size; r++) {
        /* 16 bytes fit any socket buffer: a stopped rank's too. */
        if (state[r] == BRAID_INQ_PENDING &&
            braid_sock_send(bs->fds[r], query, sizeof(query), deadline,
                            "rank") != BRAID_OK)
            state[r] = BRAID_INQ_LOST;
    }
    collect(bs, state, mine, deadline);
    char           verdict[BRAID_BS_ABORT_TEXT_LEN + 1];
    braid_status_t vst =
        bs->inq.judge(bs->inq.ctx, mine, state, verdict, sizeof(verdict));
    bs->inquiring = 0;
    if (mine != reports)
        free(mine);
    braid_error(vst, "%s", verdict);
    BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "inquiry verdict: %s", verdict);
    return braid_bs_fail_verdict(bs, vst);
}

braid_status_t braid_bs_lost_inquiry(braid_bootstrap_t *bs, const int *lost,
                                     int n)
{
    uint8_t *state = calloc((size_t)bs->size, 1);
    if (state == NULL)
        return braid_bs_fail(bs, BRAID_ERR_NO_MEMORY);
    for (int i = 0; i < n; i++) {
        braid_sock_close(&bs->fds[lost[i]]);
        state[lost[i]] = BRAID_INQ_LOST;
    }
    braid_status_t st = braid_bs_root_inquiry(bs, state, NULL, BRAID_OK, "");
    free(state);
    return st;
}

braid_status_t braid_bs_status_arrived(braid_bootstrap_t *bs, int r,
                                       double deadline)
{
    size_t   len     = bs->inq.report_len;
    uint8_t *state   = calloc((size_t)bs->size, 1);
    uint8_t *reports = calloc((size_t)bs->size, len);
    if (state == NULL || reports == NULL) {
        free(state);
        free(reports);
        return braid_bs_fail(bs, BRAID_ERR_NO_MEMORY);
    }
    braid_status_t st = braid_sock_recv(bs->fds[r], reports + (size_t)r * len,
                                        len, deadline, "rank", "a report");
    state[r]          = st == BRAID_OK ? BRAID_INQ_ANSWERED : BRAID_INQ_LOST;
    st = braid_bs_root_inquiry(bs, state, reports, BRAID_OK, "");
    free(state);
    free(reports);
    return st;
}

/* Others: the verdict after our report, or our own if none comes. */
static braid_status_t await_verdict(braid_bootstrap_t *bs)
{
    double deadline = braid_now_s() + 2 * braid_inquiry_window_s() + 0.5;
    int    root     = BRAID_INQ_SILENT;
    for (;;) {
        uint8_t        raw[BRAID_BS_HDR_LEN];
        braid_bs_hdr_t h;
        braid_status_t st =
            braid_sock_recv(bs->root_fd, raw, sizeof(raw), deadline,
                            bs->root_name, "the verdict");
        if (st != BRAID_OK) {
            root = st == BRAID_ERR_TIMEOUT ? BRAID_INQ_SILENT : BRAID_INQ_LOST;
            break;
        }
        braid_bs_hdr_unpack(raw, &h);
        if (h.magic == BRAID_BS_MAGIC && h.type == BRAID_BS_ABORT &&
            h.length == BRAID_BS_ABORT_LEN) {
            uint8_t ab[BRAID_BS_ABORT_LEN];
            st = braid_sock_recv(bs->root_fd, ab, sizeof(ab), deadline,
                                 bs->root_name, "the verdict");
            if (st == BRAID_OK) {
                bs->inquiring = 0;
                return braid_bs_aborted(bs, ab);
            }
            root = BRAID_INQ_LOST;
            break;
        }
        /* Its question (we answered already) or an operation's message. */
        if (h.magic != BRAID_BS_MAGIC || h.length > SKIP_MAX ||
            skip(bs->root_fd, h.length, deadline) != BRAID_OK) {
            root = BRAID_INQ_LOST;
            break;
        }
    }
    char           text[BRAID_BS_ABORT_TEXT_LEN + 1];
    braid_status_t st =
        bs->inq.judge_alone(bs->inq.ctx, root, text, sizeof(text));
    bs->inquiring = 0;
    braid_error(st, "%s", text);
    return braid_bs_fail(bs, st);
}

/* Others: sends this rank's report to the root. */
static braid_status_t send_report(braid_bootstrap_t *bs, braid_status_t st,
                                  const char *text)
{
    uint8_t *buf = calloc(1, bs->inq.report_len);
    if (buf == NULL)
        return BRAID_ERR_NO_MEMORY;
    bs->inq.report(bs->inq.ctx, buf, st, text);
    braid_status_t sst =
        braid_bs_send(bs->root_fd, BRAID_BS_STATUS, buf, bs->inq.report_len,
                      braid_now_s() + braid_inquiry_window_s(), bs->root_name);
    free(buf);
    return sst;
}

braid_status_t braid_bs_query_arrived(braid_bootstrap_t *bs)
{
    bs->inquiring = 1;
    (void)send_report(bs, BRAID_OK, ""); /* the verdict wait tells */
    return await_verdict(bs);
}

braid_status_t braid_bootstrap_inquire(braid_bootstrap_t *bs,
                                       braid_status_t     st)
{
    char text[512];
    snprintf(text, sizeof(text), "%s", braid_last_error());
    if (bs == NULL || bs->size == 1 || !braid_bs_can_inquire(bs)) {
        if (bs != NULL && bs->failed != BRAID_OK)
            return braid_error(bs->failed, "%s", bs->failed_msg);
        return braid_error(st, "%s", text);
    }
    if (bs->rank == 0) {
        uint8_t *state = calloc((size_t)bs->size, 1);
        if (state == NULL)
            return braid_bs_fail(bs, st);
        braid_status_t vst = braid_bs_root_inquiry(bs, state, NULL, st, text);
        free(state);
        return vst;
    }
    bs->inquiring = 1;
    (void)send_report(bs, st, text);
    return await_verdict(bs);
}
