/* torch TCPStore client (see tcpstore.h). */
#include <stdint.h>
#include <string.h>

#include "bootstrap/proto.h"
#include "bootstrap/sock.h"
#include "bootstrap/tcpstore.h"
#include "util/log.h"

enum {
    Q_SET        = 0,
    Q_GET        = 2,
    Q_WAIT       = 5,
    Q_GETNUMKEYS = 6,
};

/* Keys and values braid writes are short; anything longer is refused
 * before it is read. */
#define MAX_VALUE 4096

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* type, then each of the n strings as (le64 length, bytes); one send. */
static braid_status_t send_query(int fd, uint8_t type, const void *const *s,
                                 const size_t *len, int n, double deadline,
                                 const char *peer)
{
    uint8_t buf[2 * (8 + MAX_VALUE) + 1];
    size_t  off = 0;
    buf[off++]  = type;
    for (int i = 0; i < n; i++) {
        if (len[i] > MAX_VALUE)
            return braid_error(BRAID_ERR_INVALID_ARG,
                               "store request of %zu "
                               "bytes (at most %d)",
                               len[i], MAX_VALUE);
        put_le64(buf + off, len[i]);
        memcpy(buf + off + 8, s[i], len[i]);
        off += 8 + len[i];
    }
    return braid_sock_send(fd, buf, off, deadline, peer);
}

braid_status_t braid_tcpstore_probe(int fd, double deadline, const char *peer,
                                    int *who)
{
    uint8_t        q  = Q_GETNUMKEYS, ans[8];
    braid_status_t st = braid_sock_send(fd, &q, 1, deadline, peer);
    if (st == BRAID_OK)
        st = braid_sock_recv(fd, ans, 4, deadline, peer,
                             "an answer (as a torch TCPStore or braid's rank "
                             "0)");
    if (st != BRAID_OK)
        return st;
    /* braid's CHALLENGE starts with its magic, big-endian; a store's key
     * count never has these low bytes (it would be 828 million keys). */
    if (braid_get_u32(ans) == BRAID_BS_MAGIC) {
        *who = BRAID_PORT_BRAID;
        return BRAID_OK;
    }
    st = braid_sock_recv(fd, ans + 4, 4, deadline, peer, "a key count");
    if (st == BRAID_OK)
        *who = BRAID_PORT_STORE;
    return st;
}

braid_status_t braid_tcpstore_set(int fd, const char *key, const void *value,
                                  size_t len, double deadline,
                                  const char *peer)
{
    const void *s[2] = {key, value};
    size_t      n[2] = {strlen(key), len};
    return send_query(fd, Q_SET, s, n, 2, deadline, peer);
}

braid_status_t braid_tcpstore_get(int fd, const char *key, void *value,
                                  size_t cap, size_t *len, double deadline,
                                  const char *peer)
{
    /* WAIT {1, key} answers once the key exists: GET of a missing key is an
     * error on the server. */
    uint8_t        wait[1 + 8 + 8 + MAX_VALUE], ok, hdr[8];
    size_t         klen = strlen(key);
    braid_status_t st;
    if (klen > MAX_VALUE)
        return braid_error(BRAID_ERR_INVALID_ARG, "store key of %zu bytes",
                           klen);
    wait[0] = Q_WAIT;
    put_le64(wait + 1, 1);
    put_le64(wait + 9, klen);
    memcpy(wait + 17, key, klen);
    if ((st = braid_sock_send(fd, wait, 17 + klen, deadline, peer)) !=
            BRAID_OK ||
        (st = braid_sock_recv(fd, &ok, 1, deadline, peer, key)) != BRAID_OK)
        return st;
    if (ok != 0)
        return braid_error(BRAID_ERR_PEER,
                           "%s answered a wait for '%s' with "
                           "%u, not 0: not a torch 1.x TCPStore?",
                           peer, key, ok);
    const void *s[1] = {key};
    size_t      n[1] = {klen};
    if ((st = send_query(fd, Q_GET, s, n, 1, deadline, peer)) != BRAID_OK ||
        (st = braid_sock_recv(fd, hdr, 8, deadline, peer, key)) != BRAID_OK)
        return st;
    uint64_t vlen = get_le64(hdr);
    if (vlen > MAX_VALUE)
        return braid_error(BRAID_ERR_PEER,
                           "%s gave %llu bytes for '%s' (at "
                           "most %d expected)",
                           peer, (unsigned long long)vlen, key, MAX_VALUE);
    uint8_t buf[MAX_VALUE];
    if ((st = braid_sock_recv(fd, buf, (size_t)vlen, deadline, peer, key)) !=
        BRAID_OK)
        return st;
    memcpy(value, buf, (size_t)vlen < cap ? (size_t)vlen : cap);
    *len = (size_t)vlen;
    return BRAID_OK;
}
