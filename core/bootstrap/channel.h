/* Internals of a bootstrap channel, shared by channel.c and split.c. */
#ifndef BRAID_BOOTSTRAP_CHANNEL_H
#define BRAID_BOOTSTRAP_CHANNEL_H

#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/sock.h"

struct braid_bootstrap {
    int            rank;
    int            size;
    uint8_t        key[16];
    int           *fds;     /* root: fds[r] = rank r's socket (fds[0] = -1) */
    int            root_fd; /* others: the socket to the root */
    braid_status_t failed;  /* first error; the channel is unusable after */
    char           root_name[BRAID_ADDRSTR_LEN + 32]; /* for messages */
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
braid_status_t braid_bs_join(braid_bootstrap_t *bs, const char *host,
                             int port, double connect_deadline,
                             double deadline);
/* Any socket of the channel (to learn which interface it uses), or -1. */
int braid_bs_any_fd(const braid_bootstrap_t *bs);

#endif
