/* Internals of a bootstrap channel, shared by channel.c and split.c. */
#ifndef BRAID_BOOTSTRAP_CHANNEL_H
#define BRAID_BOOTSTRAP_CHANNEL_H

#include <poll.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/proto.h"
#include "bootstrap/sock.h"

/* Who a rank is, as it told the root in its IDENT message. */
typedef struct braid_bs_ident {
    long pid; /* 0: not known */
    char host[BRAID_BS_HOST_LEN + 1];
} braid_bs_ident_t;

struct braid_bootstrap {
    int               rank;
    int               size;
    uint8_t           key[16];
    int              *fds; /* root: fds[r] = rank r's socket (fds[0] = -1) */
    int               root_fd; /* others: the socket to the root */
    braid_bs_ident_t *idents;  /* root: every rank's identity */
    struct pollfd    *pfd;     /* root: scratch, one entry per other rank */
    int              *lost;    /* root: scratch, ranks found lost */
    uint8_t          *busy;    /* root: scratch, ranks ahead in an operation */
    braid_status_t    failed;  /* first error; the channel is unusable after */
    char            failed_msg[512]; /* its message, repeated to later calls */
    char            root_name[BRAID_ADDRSTR_LEN + 32]; /* for messages */
    braid_inquiry_t inq;       /* report_len 0: no inquiry, plain ABORTs */
    int             inquiring; /* an inquiry is running: no other */
};

/* An inherited listening socket serves one rendezvous only: once
 * braid_bootstrap_init took it, braid_launch_from_env ignores
 * BRAID_LISTEN_FD, whose number may by then belong to something else, and a
 * later init binds BRAID_ADDR itself. */
void braid_launch_listen_fd_taken(void);
int  braid_launch_listen_fd_was_taken(void);

/* A channel without connections yet. */
braid_status_t braid_bs_create(int rank, int size, const uint8_t key[16],
                               braid_bootstrap_t **bs);
/* Root: admits ranks 1..size-1 on lfd, then closes *lfd (and removes the
 * rendezvous file rdv_path unless NULL) before releasing the ranks. */
braid_status_t braid_bs_serve(braid_bootstrap_t *bs, int *lfd,
                              const char *rdv_path, double deadline);
/* Others: connects to the root at host:port (retrying until
 * connect_deadline) and joins (until deadline). */
braid_status_t braid_bs_join(braid_bootstrap_t *bs, const char *host, int port,
                             double connect_deadline, double deadline);
/* torchrun.c: rendezvous of a BRAID_RDV_STORE or BRAID_RDV_PROBE launch,
 * on a channel from braid_bs_create. */
braid_status_t braid_bs_torch_init(braid_bootstrap_t    *bs,
                                   const braid_launch_t *l, double deadline);
/* Any socket of the channel (to learn which interface it uses), or -1. */
int braid_bs_any_fd(const braid_bootstrap_t *bs);

/* ident.c.  Others: tell the root who we are (right after READY).  Root:
 * read every rank's identity (before any operation's message). */
braid_status_t braid_bs_ident_send(int fd, double deadline, const char *root);
braid_status_t braid_bs_ident_gather(braid_bootstrap_t *bs, double deadline);
/* "rank 3 (host h, pid 42)" into buf; what the root knows of rank r. */
const char *braid_bs_rank_desc(const braid_bootstrap_t *bs, int r, char *buf,
                               size_t len);

/* abort.c: how a channel fails.
 * braid_bs_fail records st and the current braid_last_error() as the
 * channel's failure (the first one wins), and closes every socket.  The root
 * first sends every live rank an ABORT frame carrying the message, so they
 * fail with the reason rather than with a bare end of stream; another rank
 * first looks for such a frame from the root and reports it if there is
 * one.  Returns the channel's failure status, with its message recorded. */
braid_status_t braid_bs_fail(braid_bootstrap_t *bs, braid_status_t st);
/* Root: ranks lost[0..n) are gone (their connection closed or broke).
 * BRAID_ERR_PEER "rank 3 (host h, pid p) was lost: why" (why may be NULL),
 * and the channel fails with it. */
braid_status_t braid_bs_lost(braid_bootstrap_t *bs, const int *lost, int n,
                             const char *why);
/* Others: the connection to the root ended: an ABORT frame from the root if
 * one is waiting, else BRAID_ERR_PEER "rank 0 was lost: why".  The channel
 * fails with it. */
braid_status_t braid_bs_root_lost(braid_bootstrap_t *bs, const char *why);
/* Others: the error an ABORT frame's payload describes (BRAID_ERR_PEER),
 * and the channel fails with it. */
braid_status_t braid_bs_aborted(braid_bootstrap_t *bs,
                                const uint8_t payload[BRAID_BS_ABORT_LEN]);
/* Root: rank r sent an ABORT frame (it failed on its own and is leaving):
 * BRAID_ERR_PEER "rank r (host h, pid p) failed: its text", and the channel
 * fails with it. */
braid_status_t braid_bs_rank_failed(braid_bootstrap_t *bs, int r,
                                    const uint8_t payload[BRAID_BS_ABORT_LEN]);
/* Others: looks, without blocking, for a complete ABORT frame among the
 * frames waiting on the root socket (up to 64 KiB of them).  Returns 1 and
 * copies its payload when there is one, 0 otherwise.  Consumes nothing. */
int braid_bs_abort_find(const braid_bootstrap_t *bs,
                        uint8_t                  payload[BRAID_BS_ABORT_LEN]);
/* An ABORT frame (header and payload) of status st, lost rank (-1: none) and
 * text; and the printable text of a received payload. */
void braid_bs_abort_pack(uint8_t frame[BRAID_BS_HDR_LEN + BRAID_BS_ABORT_LEN],
                         braid_status_t st, int lost, const char *text);
void braid_bs_abort_text(const uint8_t payload[BRAID_BS_ABORT_LEN], char *out,
                         size_t len);
/* Whether fd's peer has closed or broken the connection (poll, no wait);
 * data it sent before may still be unread. */
int braid_bs_hung_up(int fd);
/* Root: fails the channel with the current braid_last_error() as a
 * verdict: every rank gets its text as it is, with status st. */
braid_status_t braid_bs_fail_verdict(braid_bootstrap_t *bs, braid_status_t st);

/* inquiry.c, inside the channel's operations and failure detector. */
/* Whether an inquiry can run on this channel now. */
int braid_bs_can_inquire(const braid_bootstrap_t *bs);
/* Root: run an inquiry.  state[r] (size entries) says what is already
 * known (LOST, or ANSWERED with the report read into reports + r *
 * report_len); reports may be NULL when nothing is.  st/text: the root's
 * own failure (BRAID_OK, "" if none).  Returns the verdict's status. */
braid_status_t braid_bs_root_inquiry(braid_bootstrap_t *bs, uint8_t *state,
                                     uint8_t *reports, braid_status_t st,
                                     const char *text);
/* Root: the ranks lost[0..n) are gone: an inquiry among the others. */
braid_status_t braid_bs_lost_inquiry(braid_bootstrap_t *bs, const int *lost,
                                     int n);
/* Root: whether rank r's next frame is a failure report (STATUS: its call
 * failed, and it asks for an inquiry), whose header is then taken off the
 * stream.  Anything else waiting belongs to a later operation and stays;
 * busy (if not NULL) is then set. */
int braid_bs_report_waiting(braid_bootstrap_t *bs, int r, uint8_t *busy);
/* Root: rank r's STATUS header has been read: its payload, then an
 * inquiry. */
braid_status_t braid_bs_status_arrived(braid_bootstrap_t *bs, int r,
                                       double deadline);
/* Others: the root's QUERY header has been read: answer, and wait for the
 * verdict. */
braid_status_t braid_bs_query_arrived(braid_bootstrap_t *bs);

#endif
