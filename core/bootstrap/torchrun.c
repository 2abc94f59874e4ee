/* Rendezvous under torchrun and torch-style variables (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT).
 *
 * MASTER_PORT is torch's: torchrun's agent serves its TCPStore there
 * (static rendezvous), and init_process_group(env://) starts one there in
 * rank 0.  braid never fights it for the port.  Rank 0 listens on an
 * ephemeral port of the interface facing the store and publishes where in
 * the store; the others read it there (kv.c).  When nobody holds the port
 * (torchrun's c10d rendezvous before any init_process_group, or variables
 * set by hand), rank 0 listens on it itself, as a plain braid rendezvous.
 * The others cannot know in advance which of the two it is: they ask
 * whoever answers on the port (tcpstore.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "bootstrap/kv.h"
#include "bootstrap/sock.h"
#include "bootstrap/tcpstore.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "bootstrap"

/* Every braid_init of a process under one store gets its own key; every
 * rank calls braid_init the same number of times, so the counts agree. */
static atomic_uint store_seq;

typedef struct {
    int            fd;
    double         deadline;
    const char    *name;
    braid_status_t st; /* of the last failed request */
} store_t;

static int store_set(void *ctx, const char *key, const void *value, size_t len,
                     char *err, size_t errlen)
{
    store_t *s = ctx;
    if (braid_tcpstore_set(s->fd, key, value, len, s->deadline, s->name) ==
        BRAID_OK)
        return 0;
    s->st = BRAID_ERR_IO;
    snprintf(err, errlen, "%s", braid_last_error());
    return -1;
}

static long store_get(void *ctx, const char *key, void *value, size_t cap,
                      char *err, size_t errlen)
{
    store_t *s = ctx;
    size_t   len;
    s->st =
        braid_tcpstore_get(s->fd, key, value, cap, &len, s->deadline, s->name);
    if (s->st == BRAID_OK)
        return (long)len;
    snprintf(err, errlen, "%s", braid_last_error());
    return -1;
}

/* Connects to host:port and asks who is there. */
static braid_status_t connect_probe(const braid_launch_t *l, double deadline,
                                    const char *name, int *fd, int *who)
{
    braid_status_t st = braid_sock_connect(l->host, l->port, deadline, fd);
    if (st == BRAID_OK &&
        (st = braid_tcpstore_probe(*fd, deadline, name, who)) != BRAID_OK) {
        braid_sock_close(fd);
        if (st == BRAID_ERR_PEER)
            st = braid_error(st,
                             "%s: neither torch's TCPStore (1.x) nor "
                             "braid's rank 0 answers there; set BRAID_ADDR to "
                             "a free host:port for braid",
                             braid_last_error());
    }
    return st;
}

/* Through the store on fd: rank 0 publishes, the others read. */
static braid_status_t via_store(braid_bootstrap_t *bs, const braid_launch_t *l,
                                int fd, const char *name, const char *key,
                                double deadline)
{
    store_t        s  = {fd, deadline, name, BRAID_OK};
    braid_kv_t     kv = {.ctx = &s, .set = store_set, .get = store_get};
    char           here[BRAID_ADDRSTR_LEN] = "";
    int            port;
    braid_status_t st = BRAID_OK;
    /* The interface this rank reaches the store by is the one the others
     * reach this host by. */
    if (l->rank == 0 &&
        (st = braid_sock_local(fd, here, sizeof(here), &port)) != BRAID_OK) {
        braid_kv_publish_error(&kv, key);
        return st;
    }
    braid_kv_rdv_t r = {.kv          = &kv,
                        .key         = key,
                        .listen_host = here,
                        .from        = l->addr_from,
                        .key_given   = l->key_set};
    st               = braid_kv_rendezvous(bs, &r, deadline);
    /* The store's own status (a timeout, a lost store) says more than the
     * generic one of a failed get. */
    if (st != BRAID_OK && s.st != BRAID_OK)
        st = braid_error(s.st, "%s", braid_last_error());
    return st;
}

braid_status_t braid_bs_torch_init(braid_bootstrap_t    *bs,
                                   const braid_launch_t *l, double deadline)
{
    char           name[400], key[200];
    int            fd = -1, who = 0;
    braid_status_t st;
    snprintf(name, sizeof(name), "%s%.256s%s:%d (%s)",
             strchr(l->host, ':') ? "[" : "", l->host,
             strchr(l->host, ':') ? "]" : "", l->port, l->addr_from);
    snprintf(key, sizeof(key), "/braid/%s/%u", l->job_id,
             atomic_fetch_add(&store_seq, 1));

    if (l->rank == 0 && l->rdv == BRAID_RDV_PROBE) {
        int lfd = -1, in_use = 0;
        st = braid_sock_listen_try(l->host, l->port, &lfd, &in_use);
        if (st == BRAID_OK) {
            BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
                      "%s was free: rank 0 listens "
                      "there",
                      name);
            return braid_bs_serve(bs, &lfd, NULL, deadline);
        }
        if (!in_use)
            return st;
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
                  "%s is taken: publishing rank "
                  "0's address in the TCPStore there",
                  name);
    }
    if ((st = connect_probe(l, deadline, name, &fd, &who)) != BRAID_OK)
        return st;
    if (who == BRAID_PORT_BRAID) {
        braid_sock_close(&fd);
        if (l->rank == 0 || l->rdv == BRAID_RDV_STORE)
            return braid_error(BRAID_ERR_IO,
                               "%s is held by braid's rank 0 of "
                               "another job, not by torch's TCPStore",
                               name);
        /* Rank 0 listens there itself: this connection spent its
         * challenge, so join on a new one. */
        return braid_bs_join(bs, l->host, l->port, deadline, deadline);
    }
    st = via_store(bs, l, fd, name, key, deadline);
    braid_sock_close(&fd);
    return st;
}
