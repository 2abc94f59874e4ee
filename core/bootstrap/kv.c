/* Rendezvous through a key-value store (see kv.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/kv.h"
#include "bootstrap/sock.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP  "bootstrap"
#define VALUE_LEN 512

static braid_status_t kv_set(const braid_kv_t *kv, const char *key,
                             const char *value)
{
    char err[256] = "";
    if (kv->set(kv->ctx, key, value, strlen(value), err, sizeof(err)) != 0)
        return braid_error(BRAID_ERR_IO,
                           "cannot publish '%s' in the "
                           "key-value store: %s",
                           key, err[0] ? err : "its set failed");
    return BRAID_OK;
}

void braid_kv_publish_error(const braid_kv_t *kv, const char *key)
{
    char saved[1024], value[VALUE_LEN];
    snprintf(saved, sizeof(saved), "%s", braid_last_error());
    snprintf(value, sizeof(value), "error %.500s", saved);
    if (kv_set(kv, key, value) != BRAID_OK)
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "%s", braid_last_error());
    braid_error(BRAID_ERR_IO, "%s", saved); /* the status is the caller's */
}

static braid_status_t serve(braid_bootstrap_t *bs, const braid_kv_rdv_t *r,
                            double deadline)
{
    char           host[BRAID_ADDRSTR_LEN], value[VALUE_LEN], hex[33] = "-";
    int            lfd = -1, port;
    braid_status_t st;
    if ((st = braid_sock_listen(r->listen_host, 0, &lfd)) != BRAID_OK ||
        (st = braid_sock_local(lfd, host, sizeof(host), &port)) != BRAID_OK)
        goto fail;
    if (!r->key_given) {
        /* A key that travels through the store is only as secret as the
         * store, which anyone on the network may reach: fine on loopback
         * only, like the key derived from the job id. */
        if (!braid_host_is_loopback(host)) {
            st = braid_key_required_error(host, port, r->from);
            goto fail;
        }
        if ((st = braid_random_bytes(bs->key, sizeof(bs->key))) != BRAID_OK)
            goto fail;
        braid_format_job_key(bs->key, hex);
    }
    snprintf(value, sizeof(value), "braid1 %s %d %s", host, port, hex);
    if ((st = kv_set(r->kv, r->key, value)) != BRAID_OK)
        goto fail;
    BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "published %s:%d as '%s'", host, port,
              r->key);
    return braid_bs_serve(bs, &lfd, NULL, deadline);
fail:
    braid_sock_close(&lfd);
    braid_kv_publish_error(r->kv, r->key);
    return st;
}

/* "braid1 host port key|-" or "error text". */
static braid_status_t parse(const braid_kv_rdv_t *r, char *v, char *host,
                            size_t n, int *port, int *has_key, uint8_t key[16])
{
    if (strncmp(v, "error ", 6) == 0)
        return braid_error(BRAID_ERR_PEER,
                           "rank 0 failed before the "
                           "rendezvous: %s",
                           v + 6);
    char h[BRAID_ADDRSTR_LEN], k[40];
    int  p, used = 0;
    if (sscanf(v, "braid1 %95s %d %39s%n", h, &p, k, &used) != 3 ||
        v[used] != '\0' || p < 1 || p > 65535 || strlen(h) >= n)
        return braid_error(BRAID_ERR_PEER,
                           "'%s' in the key-value store is "
                           "not a braid rendezvous address: '%s'",
                           r->key, braid_quote(v, strlen(v), 0).s);
    snprintf(host, n, "%s", h);
    *port    = p;
    *has_key = strcmp(k, "-") != 0;
    return *has_key ? braid_parse_job_key(r->key, k, key) : BRAID_OK;
}

static braid_status_t join(braid_bootstrap_t *bs, const braid_kv_rdv_t *r,
                           double deadline)
{
    char    value[VALUE_LEN], host[BRAID_ADDRSTR_LEN], err[256] = "";
    int     port = 0, has_key = 0;
    uint8_t key[16];
    long    len = r->kv->get(r->kv->ctx, r->key, value, sizeof(value) - 1, err,
                             sizeof(err));
    if (len < 0)
        return braid_error(BRAID_ERR_IO,
                           "cannot read rank 0's address '%s' "
                           "from the key-value store: %s",
                           r->key, err[0] ? err : "its get failed");
    if ((size_t)len >= sizeof(value))
        return braid_error(BRAID_ERR_PEER,
                           "'%s' in the key-value store is "
                           "%ld bytes long: not a braid rendezvous address",
                           r->key, len);
    value[len] = '\0';
    braid_status_t st =
        parse(r, value, host, sizeof(host), &port, &has_key, key);
    if (st != BRAID_OK)
        return st;
    /* A key given here wins: if rank 0 had none (or another), the handshake
     * fails on both sides at once, naming the key. */
    if (!r->key_given)
        memcpy(bs->key, has_key ? key : (const uint8_t[16]){0}, 16);
    st = braid_bs_join(bs, host, port, deadline, deadline);
    if (st == BRAID_ERR_AUTH && !r->key_given && !has_key)
        return braid_error(st,
                           "%s (rank 0 has a BRAID_JOB_KEY, this rank "
                           "has none)",
                           braid_last_error());
    if (st == BRAID_ERR_AUTH && r->key_given && has_key)
        return braid_error(st,
                           "%s (this rank has a BRAID_JOB_KEY, rank 0 "
                           "has none)",
                           braid_last_error());
    return st;
}

braid_status_t braid_kv_rendezvous(braid_bootstrap_t    *bs,
                                   const braid_kv_rdv_t *r, double deadline)
{
    return braid_bootstrap_rank(bs) == 0 ? serve(bs, r, deadline)
                                         : join(bs, r, deadline);
}

braid_status_t braid_bootstrap_init_kv(int rank, int size,
                                       const braid_kv_t   *kv,
                                       braid_bootstrap_t **out)
{
    braid_bootstrap_t *bs = NULL;
    braid_launch_t     l;
    braid_status_t     st;
    char               key[64], here[BRAID_ADDRSTR_LEN], from[160];
    const char        *v;

    *out = NULL;
    if (size < 1 || rank < 0 || rank >= size)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "braid_init_kv: rank %d of "
                           "size %d",
                           rank, size);
    if (kv == NULL || kv->set == NULL || kv->get == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_init_kv: %s is NULL",
                           kv == NULL        ? "kv"
                           : kv->set == NULL ? "kv->set"
                                             : "kv->get");
    memset(&l, 0, sizeof(l));
    if ((v = braid_env_get("BRAID_JOB_KEY")) != NULL) {
        if ((st = braid_parse_job_key("BRAID_JOB_KEY", v, l.key)) != BRAID_OK)
            return st;
        l.key_set = 1;
    }
    if ((st = braid_bs_create(rank, size, l.key, &bs)) != BRAID_OK)
        return st;
    /* One key: a counter of calls would differ between the members of a
     * subgroup (each has its own history), and the caller's store is
     * fresh per communicator anyway. */
    snprintf(key, sizeof(key), "braid/rdv");
    if (size == 1)
        goto out;

    /* Where rank 0 listens: BRAID_IFADDR, else the interface facing the
     * store's host, else loopback (every rank on this host). */
    snprintf(here, sizeof(here), "127.0.0.1");
    snprintf(from, sizeof(from), "braid_init_kv without a host: loopback");
    if ((v = braid_env_get("BRAID_IFADDR")) != NULL) {
        snprintf(here, sizeof(here), "%s", v);
        snprintf(from, sizeof(from), "BRAID_IFADDR");
    } else if (kv->host != NULL && kv->host[0] != '\0' && rank == 0) {
        if ((st = braid_sock_route_src(kv->host, here, sizeof(here))) !=
            BRAID_OK) {
            braid_kv_publish_error(kv, key);
            goto out;
        }
        snprintf(from, sizeof(from),
                 "the interface facing the store's host "
                 "%.100s",
                 kv->host);
    }
    braid_kv_rdv_t r = {.kv          = kv,
                        .key         = key,
                        .listen_host = here,
                        .from        = from,
                        .key_given   = l.key_set};
    st               = braid_kv_rendezvous(bs, &r, braid_deadline_from_now());
out:
    if (st != BRAID_OK) {
        braid_bootstrap_destroy(bs);
        return st;
    }
    *out = bs;
    return BRAID_OK;
}
