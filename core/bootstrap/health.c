/* Failure detector of the bootstrap channel.
 *
 * Every rank of a channel holds a TCP connection in the star, and the kernel
 * closes the connections of a process that dies however it dies (SIGKILL
 * included).  So the star itself is a failure detector that costs nothing
 * while all is well: the root looks whether any rank's connection has ended,
 * and tells the others with an ABORT frame (abort.c); the others look
 * whether the root has sent an ABORT or its connection has ended.
 *
 * The core calls this every few milliseconds from its wait loops, in the
 * middle of collectives whose out-of-band messages may already be in flight
 * (a rank that finished the collective may have entered the next out-of-band
 * operation), so it never blocks and never consumes a byte that belongs to
 * an operation: the root asks poll() only for POLLRDHUP, which a pending
 * message does not raise, and the others only peek. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>

#include "bootstrap/channel.h"
#include "util/env.h"
#include "util/log.h"

#define HUNG_UP (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)

static braid_status_t root_health(braid_bootstrap_t *bs)
{
    int n = 0, nlost = 0, rc;
    /* Input is looked at only while a failure inquiry can run: a rank
     * ahead in an operation leaves its message waiting, which costs a peek
     * per look. */
    short in = braid_bs_can_inquire(bs) ? POLLIN : 0;
    for (int r = 1; r < bs->size; r++)
        bs->pfd[n++] =
            (struct pollfd){.fd = bs->fds[r], .events = POLLRDHUP | in};
    do
        rc = poll(bs->pfd, (nfds_t)n, 0);
    while (rc < 0 && errno == EINTR);
    if (rc <= 0)
        return BRAID_OK; /* nothing happened (or poll failed: look again) */
    for (int i = 0; i < n; i++) {
        if (bs->pfd[i].revents & HUNG_UP)
            bs->lost[nlost++] = i + 1;
    }
    if (nlost > 0)
        return braid_bs_lost(bs, bs->lost, nlost, NULL);
    for (int i = 0; in && i < n; i++) {
        if ((bs->pfd[i].revents & POLLIN) &&
            braid_bs_report_waiting(bs, i + 1, NULL))
            return braid_bs_status_arrived(
                bs, i + 1, braid_now_s() + braid_inquiry_window_s());
    }
    return BRAID_OK;
}

static braid_status_t rank_health(braid_bootstrap_t *bs)
{
    struct pollfd p = {.fd = bs->root_fd, .events = POLLIN | POLLRDHUP};
    uint8_t       frame[BRAID_BS_HDR_LEN + BRAID_BS_ABORT_LEN];
    int           rc;
    ssize_t       n;
    do
        rc = poll(&p, 1, 0);
    while (rc < 0 && errno == EINTR);
    if (rc <= 0)
        return BRAID_OK;

    /* An ABORT at the head of the stream: take it, it is the last word.
     * A QUERY: the root asks how far this rank got; answer and await its
     * verdict. */
    do
        n = recv(bs->root_fd, frame, sizeof(frame), MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n >= BRAID_BS_HDR_LEN && braid_bs_can_inquire(bs)) {
        braid_bs_hdr_t h;
        braid_bs_hdr_unpack(frame, &h);
        if (h.magic == BRAID_BS_MAGIC && h.type == BRAID_BS_QUERY &&
            h.length == 0) {
            do
                n = recv(bs->root_fd, frame, BRAID_BS_HDR_LEN, MSG_DONTWAIT);
            while (n < 0 && errno == EINTR);
            return braid_bs_query_arrived(bs);
        }
    }
    if (n == (ssize_t)sizeof(frame)) {
        braid_bs_hdr_t h;
        braid_bs_hdr_unpack(frame, &h);
        if (h.magic == BRAID_BS_MAGIC && h.type == BRAID_BS_ABORT &&
            h.length == BRAID_BS_ABORT_LEN) {
            do
                n = recv(bs->root_fd, frame, sizeof(frame), MSG_DONTWAIT);
            while (n < 0 && errno == EINTR);
            return braid_bs_aborted(bs, frame + BRAID_BS_HDR_LEN);
        }
    }
    /* Anything else that waits is a message of a later operation. */
    if ((p.revents & HUNG_UP) == 0)
        return BRAID_OK;
    char why[sizeof(bs->root_name) + 40];
    snprintf(why, sizeof(why), "%s closed the connection", bs->root_name);
    return braid_bs_root_lost(bs, why);
}

braid_status_t braid_bootstrap_health(braid_bootstrap_t *bs)
{
    if (bs == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "bootstrap health: NULL "
                                                  "channel");
    /* Once failed, always failed, with the same words. */
    if (bs->failed != BRAID_OK)
        return braid_error(bs->failed, "%s", bs->failed_msg);
    if (bs->size == 1)
        return BRAID_OK;
    return bs->rank == 0 ? root_health(bs) : rank_health(bs);
}

void braid_bootstrap_abort(braid_bootstrap_t *bs, braid_status_t status,
                           const char *msg)
{
    char saved[512];
    if (bs == NULL || bs->failed != BRAID_OK || bs->size == 1)
        return;
    /* The caller's error stays the thread's last error. */
    snprintf(saved, sizeof(saved), "%s", braid_last_error());
    braid_error(status, "%s", msg != NULL ? msg : braid_status_str(status));
    (void)braid_bs_fail(bs, status);
    braid_error(status, "%s", saved);
}
