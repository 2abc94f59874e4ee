/* Rendezvous through a key-value store: rank 0 listens and publishes where
 * (and, on loopback without a job key, a fresh random key); the others read
 * it and join.  Used with torch's TCPStore under torchrun (torchrun.c) and
 * with a caller's store (braid_init_kv).
 *
 * Value: "braid1 <host> <port> <key hex | ->" or, when rank 0 failed before
 * it could listen, "error <message>", so that the others fail at once with
 * rank 0's reason instead of at their timeout. */
#ifndef BRAID_BOOTSTRAP_KV_H
#define BRAID_BOOTSTRAP_KV_H

#include "bootstrap/channel.h"

typedef struct braid_kv_rdv {
    const braid_kv_t *kv;
    const char       *key;         /* where rank 0's address goes */
    const char       *listen_host; /* rank 0: numeric address to listen on */
    const char       *from;        /* what listen_host came from (messages) */
    int               key_given;   /* bs->key is the job key */
} braid_kv_rdv_t;

/* Collective over bs's ranks, on a channel from braid_bs_create. */
braid_status_t braid_kv_rendezvous(braid_bootstrap_t    *bs,
                                   const braid_kv_rdv_t *r, double deadline);
/* Rank 0, having failed before publishing: publish the failure (best
 * effort; keeps the thread's last error). */
void braid_kv_publish_error(const braid_kv_t *kv, const char *key);

#endif
