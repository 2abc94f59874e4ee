/* Challenge-response admission of the bootstrap star (see proto.h). */
#ifndef BRAID_BOOTSTRAP_AUTH_H
#define BRAID_BOOTSTRAP_AUTH_H

#include <stdint.h>

#include <braid/braid.h>

/* Root side.  Accepts connections on the listening socket lfd until ranks
 * 1..size-1 have all proven the key.  fds[r] gets
 * rank r's socket (fds[0] is left alone).  Connections that fail the proof,
 * claim a rank out of range or already taken, or a wrong size are refused,
 * logged and closed; they do not end the rendezvous.  Handshakes run
 * concurrently, so a silent connection cannot hold up the others.  On
 * failure (BRAID_ERR_TIMEOUT naming the missing ranks) every socket is
 * closed. */
braid_status_t braid_auth_serve(int lfd, const uint8_t key[16], int size,
                                int *fds, double deadline);
/* Root side, after serve: READY to every rank (closing all on failure).
 * Separate so that the root can first retire the listener and the
 * rendezvous file: a rank that has READY may start its next rendezvous at
 * once, and must not find the old ones. */
braid_status_t braid_auth_release(int *fds, int size, double deadline);

/* Client side, on a socket connected to the root: answers the challenge as
 * rank of size, checks the root's proof, and waits for READY.  A refusal is
 * BRAID_ERR_AUTH with the root's reason. */
braid_status_t braid_auth_join(int fd, const uint8_t key[16], int rank,
                               int size, double deadline, const char *root);

#endif
