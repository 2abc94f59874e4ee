/* How a bootstrap channel fails, and how the news travels.
 *
 * A channel fails once: its first error is kept (status and message) and
 * every later operation repeats it.  Its sockets are then closed, so that
 * the peers notice at once rather than after their timeout -- but a bare
 * end of stream only says "this process went away", which is wrong when the
 * process is alive and merely saw someone else die.  So before closing, the
 * failing side writes one ABORT frame with its message: the root to every
 * rank still connected, another rank to the root.  The root names the ranks
 * it lost by host and pid (their IDENT), and a rank that receives an ABORT
 * fails with the root's text, so that every survivor reports the same lost
 * process. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bootstrap/channel.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"

#define PEEK_MAX  (64 * 1024) /* how far to look for an ABORT frame */
#define DRAIN_MAX (1 << 20)   /* input discarded before a close */
#define NAMED_MAX 4           /* lost ranks named in one message */

#define HUNG_UP (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)

#define ABORT_FRAME_LEN (BRAID_BS_HDR_LEN + BRAID_BS_ABORT_LEN)

int braid_bs_hung_up(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    int           rc;
    if (fd < 0)
        return 1;
    do
        rc = poll(&p, 1, 0);
    while (rc < 0 && errno == EINTR);
    return rc > 0 && (p.revents & HUNG_UP) != 0;
}

static int peek_abort(int fd, uint8_t payload[BRAID_BS_ABORT_LEN])
{
    uint8_t *buf = malloc(PEEK_MAX);
    ssize_t  n;
    int      found = 0;
    if (buf == NULL)
        return 0;
    do
        n = recv(fd, buf, PEEK_MAX, MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    /* Walk whole frames; stop at anything that is not one (the rest of a
     * frame this side had started to read, or a frame cut by PEEK_MAX). */
    for (size_t off = 0; n > 0 && off + BRAID_BS_HDR_LEN <= (size_t)n;) {
        braid_bs_hdr_t h;
        braid_bs_hdr_unpack(buf + off, &h);
        if (h.magic != BRAID_BS_MAGIC ||
            h.length > (uint64_t)n - off - BRAID_BS_HDR_LEN)
            break;
        if (h.type == BRAID_BS_ABORT && h.length == BRAID_BS_ABORT_LEN) {
            memcpy(payload, buf + off + BRAID_BS_HDR_LEN, BRAID_BS_ABORT_LEN);
            found = 1;
            break;
        }
        off += BRAID_BS_HDR_LEN + (size_t)h.length;
    }
    free(buf);
    return found;
}

int braid_bs_abort_find(const braid_bootstrap_t *bs,
                        uint8_t                  payload[BRAID_BS_ABORT_LEN])
{
    return bs->root_fd >= 0 && peek_abort(bs->root_fd, payload);
}

/* The text of an ABORT payload, printable characters only (it comes from
 * the network and ends up in messages and logs). */
void braid_bs_abort_text(const uint8_t payload[BRAID_BS_ABORT_LEN], char *out,
                         size_t len)
{
    const uint8_t *t = payload + 8;
    size_t         n = 0;
    for (size_t i = 0; i < BRAID_BS_ABORT_TEXT_LEN && t[i] != 0 && n + 1 < len;
         i++)
        out[n++] = (t[i] >= 0x20 && t[i] < 0x7f) ? (char)t[i] : '?';
    out[n] = '\0';
}

void braid_bs_abort_pack(uint8_t frame[ABORT_FRAME_LEN], braid_status_t st,
                         int lost, const char *text)
{
    memset(frame, 0, ABORT_FRAME_LEN);
    braid_bs_hdr_pack(frame, BRAID_BS_ABORT, BRAID_BS_ABORT_LEN);
    braid_put_u32(frame + BRAID_BS_HDR_LEN, (uint32_t)(int32_t)st);
    braid_put_u32(frame + BRAID_BS_HDR_LEN + 4, (uint32_t)(int32_t)lost);
    /* Truncated to fit; the receiver stops at the first NUL or the end. */
    memcpy(frame + BRAID_BS_HDR_LEN + 8, text,
           strnlen(text, BRAID_BS_ABORT_TEXT_LEN));
}

/* One ABORT frame and a close.  The frame is sent without waiting: a peer
 * that does not read (stuck, or its buffer full of our earlier messages)
 * gets the end of stream alone.  Unread input is discarded first, because
 * closing a socket with unread input resets the connection instead of
 * ending it after our frame. */
static void abort_close(int *fd, const uint8_t frame[ABORT_FRAME_LEN])
{
    uint8_t sink[4096];
    size_t  drained = 0;
    ssize_t n;
    if (*fd < 0)
        return;
    do
        n = send(*fd, frame, ABORT_FRAME_LEN, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    while (drained < DRAIN_MAX) {
        n = recv(*fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        drained += (size_t)n;
    }
    braid_sock_close(fd);
}

/* Records the failure (the first one wins), tells the peers, closes.  lost:
 * the rank this failure is about (-1: none), carried in the frame. */
static braid_status_t fail_with(braid_bootstrap_t *bs, braid_status_t st,
                                int lost)
{
    if (bs->failed == BRAID_OK) {
        uint8_t frame[ABORT_FRAME_LEN];
        bs->failed = st;
        snprintf(bs->failed_msg, sizeof(bs->failed_msg), "%s",
                 braid_last_error());
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "rank %d: channel failed: %s",
                  bs->rank, bs->failed_msg);
        braid_bs_abort_pack(frame, st, lost, bs->failed_msg);
        if (bs->fds != NULL) {
            for (int r = 1; r < bs->size; r++)
                abort_close(&bs->fds[r], frame);
        }
        abort_close(&bs->root_fd, frame);
    }
    return braid_error(bs->failed, "%s", bs->failed_msg);
}

/* A status from the wire: a failure braid knows, or BRAID_ERR_PEER. */
static braid_status_t wire_status(uint32_t v)
{
    int32_t st = (int32_t)v;
    return st < 0 && st >= BRAID_ERR_INTERNAL ? (braid_status_t)st
                                              : BRAID_ERR_PEER;
}

braid_status_t braid_bs_aborted(braid_bootstrap_t *bs,
                                const uint8_t      payload[BRAID_BS_ABORT_LEN])
{
    char text[BRAID_BS_ABORT_TEXT_LEN + 1];
    int  lost = (int)(int32_t)braid_get_u32(payload + 4);
    braid_bs_abort_text(payload, text, sizeof(text));
    if (lost == BRAID_BS_VERDICT) {
        /* The root's verdict: every rank reports it word for word. */
        braid_status_t st = wire_status(braid_get_u32(payload));
        braid_error(st, "%s", text);
        braid_sock_close(&bs->root_fd);
        return fail_with(bs, st, BRAID_BS_VERDICT);
    }
    if (lost > 0 && lost < bs->size)
        braid_error(BRAID_ERR_PEER,
                    "%s (reported by rank 0 of the bootstrap "
                    "channel)",
                    text);
    else
        braid_error(BRAID_ERR_PEER, "rank 0 aborted the bootstrap channel: %s",
                    text);
    /* Nothing to tell the root: it is the one that gave up. */
    braid_sock_close(&bs->root_fd);
    return fail_with(bs, BRAID_ERR_PEER, lost);
}

braid_status_t braid_bs_fail_verdict(braid_bootstrap_t *bs, braid_status_t st)
{
    return fail_with(bs, st, BRAID_BS_VERDICT);
}

braid_status_t braid_bs_fail(braid_bootstrap_t *bs, braid_status_t st)
{
    uint8_t payload[BRAID_BS_ABORT_LEN];
    /* Another rank's error may only be the echo of the root's: its ABORT
     * frame, waiting behind what this rank was reading, says why. */
    if (bs->failed == BRAID_OK && bs->rank != 0 &&
        braid_bs_abort_find(bs, payload))
        return braid_bs_aborted(bs, payload);
    return fail_with(bs, st, -1);
}

braid_status_t braid_bs_root_lost(braid_bootstrap_t *bs, const char *why)
{
    uint8_t payload[BRAID_BS_ABORT_LEN];
    if (bs->failed != BRAID_OK)
        return braid_error(bs->failed, "%s", bs->failed_msg);
    if (braid_bs_abort_find(bs, payload))
        return braid_bs_aborted(bs, payload);
    braid_sock_close(&bs->root_fd); /* nobody to tell */
    if (braid_bs_can_inquire(bs)) {
        /* No root to ask: what this rank sees says which call failed. */
        char           text[BRAID_BS_ABORT_TEXT_LEN + 1];
        braid_status_t st;
        bs->inquiring = 1;
        st            = bs->inq.judge_alone(bs->inq.ctx, BRAID_INQ_LOST, text,
                                            sizeof(text));
        bs->inquiring = 0;
        braid_error(st, "%s", text);
        return fail_with(bs, st, 0);
    }
    braid_error(BRAID_ERR_PEER, "rank 0 was lost: %s",
                why != NULL ? why : "its connection closed");
    return fail_with(bs, BRAID_ERR_PEER, 0);
}

braid_status_t braid_bs_rank_failed(braid_bootstrap_t *bs, int r,
                                    const uint8_t payload[BRAID_BS_ABORT_LEN])
{
    char desc[BRAID_BS_HOST_LEN + 64];
    char text[BRAID_BS_ABORT_TEXT_LEN + 1];
    if (bs->failed != BRAID_OK)
        return braid_error(bs->failed, "%s", bs->failed_msg);
    braid_bs_abort_text(payload, text, sizeof(text));
    braid_error(BRAID_ERR_PEER, "%s failed: %s",
                braid_bs_rank_desc(bs, r, desc, sizeof(desc)), text);
    braid_sock_close(&bs->fds[r]); /* it is gone already */
    return fail_with(bs, BRAID_ERR_PEER, r);
}

/* Appends "; " (unless first) and what is known of rank r: "rank 3 (host
 * h, pid p) was lost", or "... failed: its reason" when it left an ABORT
 * frame before closing (it failed on its own; one that died left nothing). */
static int describe_lost(braid_bootstrap_t *bs, int r, int with_reason,
                         char *msg, size_t len, size_t *off)
{
    char    desc[BRAID_BS_HOST_LEN + 64];
    char    text[BRAID_BS_ABORT_TEXT_LEN + 1];
    uint8_t payload[BRAID_BS_ABORT_LEN];
    int     failed = peek_abort(bs->fds[r], payload);
    if (failed != with_reason || *off >= len)
        return 0;
    braid_bs_rank_desc(bs, r, desc, sizeof(desc));
    if (failed)
        braid_bs_abort_text(payload, text, sizeof(text));
    int k =
        snprintf(msg + *off, len - *off, "%s%s %s%s", *off ? "; " : "", desc,
                 failed ? "failed: " : "was lost", failed ? text : "");
    if (k > 0)
        *off += (size_t)k;
    return 1;
}

braid_status_t braid_bs_lost(braid_bootstrap_t *bs, const int *lost, int n,
                             const char *why)
{
    char   msg[512];
    size_t off    = 0;
    int    named  = 0;
    int    victim = -1;
    if (bs->failed != BRAID_OK)
        return braid_error(bs->failed, "%s", bs->failed_msg);
    /* Which call failed, and was the lost rank the cause: the survivors
     * say, if the communicator can ask them. */
    if (braid_bs_can_inquire(bs))
        return braid_bs_lost_inquiry(bs, lost, n);
    msg[0] = '\0';
    /* The dead first: a rank that failed on its own is most often reporting
     * one of them, and the others' copy of this message (the ABORT text) is
     * cut at BRAID_BS_ABORT_TEXT_LEN. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n && named < NAMED_MAX; i++) {
            if (describe_lost(bs, lost[i], pass, msg, sizeof(msg), &off)) {
                named++;
                if (pass == 0 && victim < 0)
                    victim = lost[i];
            }
        }
    }
    if (named < n && off < sizeof(msg))
        off += (size_t)snprintf(msg + off, sizeof(msg) - off,
                                "; and %d more "
                                "rank%s",
                                n - named, n - named == 1 ? "" : "s");
    if (n == 1 && why != NULL && off < sizeof(msg))
        snprintf(msg + off, sizeof(msg) - off, " (%s)", why);
    braid_error(BRAID_ERR_PEER, "%s", msg);
    BRAID_LOG(BRAID_LOG_INFO, LOG_COMP, "%s", msg);
    for (int i = 0; i < n; i++)
        braid_sock_close(&bs->fds[lost[i]]); /* nothing to tell them */
    return fail_with(bs, BRAID_ERR_PEER, victim >= 0 ? victim : lost[0]);
}
