/* File rendezvous: how ranks on one host find rank 0 when the launcher
 * (mpirun, srun) gives no address.  Rank 0 listens on an ephemeral port and
 * publishes "host port key-hex" in a 0600 file named after the user and the
 * job; the others poll for the file.  The file is the only channel the key
 * travels on, so its owner and mode are checked before it is believed. */
#ifndef BRAID_BOOTSTRAP_RENDEZVOUS_H
#define BRAID_BOOTSTRAP_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"

/* <rendezvous_dir or /tmp>/braid-<uid>-<job_id>. */
braid_status_t braid_rdv_path(const braid_launch_t *launch, char *path,
                              size_t n);
/* Writes the file atomically (temporary file, then rename), mode 0600. */
braid_status_t braid_rdv_publish(const char *path, const char *host, int port,
                                 const uint8_t key[16]);
/* Polls for the file until the deadline, then parses it. */
braid_status_t braid_rdv_read(const char *path, double deadline, char *host,
                              size_t n, int *port, uint8_t key[16]);
void           braid_rdv_remove(const char *path);

#endif
