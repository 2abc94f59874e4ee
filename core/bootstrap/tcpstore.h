/* A client of torch.distributed's TCPStore, enough to publish and read one
 * key: how braid finds rank 0 under torchrun, where the store owns
 * MASTER_PORT.
 *
 * Wire format of torch 1.x (checked against Debian's 1.13 by watching its
 * own client): every request is a query-type byte followed by its
 * arguments; strings and byte arrays are a little-endian u64 length and the
 * bytes.
 *   SET (0)        key, value                    no answer
 *   GET (2)        key                           value (the key must exist)
 *   WAIT (5)       u64 count, keys               u8 0 once all exist
 *   GETNUMKEYS (6)                               i64 count
 * The server never speaks first, while braid's rank 0 sends its CHALLENGE
 * as soon as it accepts: a GETNUMKEYS tells which of the two is on a port. */
#ifndef BRAID_BOOTSTRAP_TCPSTORE_H
#define BRAID_BOOTSTRAP_TCPSTORE_H

#include <stddef.h>

#include <braid/braid.h>

/* Who answered on a port. */
enum { BRAID_PORT_STORE = 1, BRAID_PORT_BRAID = 2 };

/* Sends GETNUMKEYS on the connected fd and reads the first answer: *who is
 * BRAID_PORT_STORE or BRAID_PORT_BRAID.  A peer that closes the connection
 * is neither (BRAID_ERR_PEER, naming peer); one that stays silent past the
 * deadline is BRAID_ERR_TIMEOUT. */
braid_status_t braid_tcpstore_probe(int fd, double deadline, const char *peer,
                                    int *who);
braid_status_t braid_tcpstore_set(int fd, const char *key, const void *value,
                                  size_t len, double deadline,
                                  const char *peer);
/* Waits until key exists, then reads it: *len is the value's length, of
 * which at most cap bytes were copied. */
braid_status_t braid_tcpstore_get(int fd, const char *key, void *value,
                                  size_t cap, size_t *len, double deadline,
                                  const char *peer);

#endif
