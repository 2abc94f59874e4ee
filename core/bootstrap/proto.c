/* Framing and handshake primitives of the bootstrap wire format. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap/proto.h"
#include "bootstrap/sock.h"
#include "util/log.h"
#include "util/siphash.h"

void braid_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

void braid_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

uint32_t braid_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = (v << 8) | p[i];
    return v;
}

uint64_t braid_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

const char *braid_bs_type_name(uint32_t type)
{
    static const char *names[] = {
        [BRAID_BS_CHALLENGE]     = "challenge",
        [BRAID_BS_HELLO]         = "hello",
        [BRAID_BS_WELCOME]       = "welcome",
        [BRAID_BS_REFUSE]        = "refuse",
        [BRAID_BS_READY]         = "ready",
        [BRAID_BS_GATHER]        = "allgather",
        [BRAID_BS_GATHER_RESULT] = "allgather result",
        [BRAID_BS_BCAST_UP]      = "bcast (to rank 0)",
        [BRAID_BS_BCAST]         = "bcast",
        [BRAID_BS_BARRIER]       = "barrier",
        [BRAID_BS_BARRIER_DONE]  = "barrier release",
        [BRAID_BS_IDENT]         = "identity",
        [BRAID_BS_ABORT]         = "abort",
        [BRAID_BS_QUERY]         = "inquiry",
        [BRAID_BS_STATUS]        = "status",
    };
    if (type == 0 || type >= BRAID_BS_TYPE_END)
        return "unknown";
    return names[type];
}

const char *braid_bs_refuse_str(uint32_t reason)
{
    switch (reason) {
    case BRAID_BS_REFUSE_MALFORMED: return "malformed hello";
    case BRAID_BS_REFUSE_VERSION: return "protocol version mismatch";
    case BRAID_BS_REFUSE_KEY:
        return "wrong job key (MAC mismatch: "
               "another BRAID_JOB_KEY than rank "
               "0's, or another job)";
    case BRAID_BS_REFUSE_SIZE:
        return "job size mismatch (rank 0 was "
               "started for another number of "
               "ranks)";
    case BRAID_BS_REFUSE_RANK: return "rank out of range";
    case BRAID_BS_REFUSE_DUPLICATE: return "rank already connected";
    }
    return "unknown reason";
}

int braid_bs_hdr_is_abort(const braid_bs_hdr_t *h)
{
    return h->magic == BRAID_BS_MAGIC && h->type == BRAID_BS_ABORT &&
           h->length == BRAID_BS_ABORT_LEN;
}

void braid_bs_hdr_pack(uint8_t out[BRAID_BS_HDR_LEN], uint32_t type,
                       uint64_t length)
{
    braid_put_u32(out, BRAID_BS_MAGIC);
    braid_put_u32(out + 4, type);
    braid_put_u64(out + 8, length);
}

void braid_bs_hdr_unpack(const uint8_t in[BRAID_BS_HDR_LEN], braid_bs_hdr_t *h)
{
    h->magic  = braid_get_u32(in);
    h->type   = braid_get_u32(in + 4);
    h->length = braid_get_u64(in + 8);
}

braid_status_t braid_bs_hdr_check(const braid_bs_hdr_t *h, uint32_t type,
                                  uint64_t length, const char *peer)
{
    if (h->magic != BRAID_BS_MAGIC)
        return braid_error(BRAID_ERR_PEER,
                           "%s sent a message with bad magic 0x%08x (not a "
                           "braid bootstrap peer, or the stream is out of "
                           "step)",
                           peer, h->magic);
    if (h->type != type)
        return braid_error(BRAID_ERR_MISMATCH,
                           "%s sent a '%s' message (type %u) while this rank "
                           "waits for '%s': the ranks called different "
                           "collectives",
                           peer, braid_bs_type_name(h->type), h->type,
                           braid_bs_type_name(type));
    if (h->length != length)
        return braid_error(BRAID_ERR_PEER,
                           "%s sent a %s '%s' message of %llu bytes, expected "
                           "%llu (ranks disagree on the length, or a corrupt "
                           "peer)",
                           peer, h->length > length ? "oversized" : "short",
                           braid_bs_type_name(type),
                           (unsigned long long)h->length,
                           (unsigned long long)length);
    return BRAID_OK;
}

braid_status_t braid_bs_send(int fd, uint32_t type, const void *payload,
                             size_t len, double deadline, const char *peer)
{
    /* Small messages go out as one segment (TCP_NODELAY is on). */
    uint8_t buf[BRAID_BS_HDR_LEN + 256];
    braid_bs_hdr_pack(buf, type, len);
    if (len <= sizeof(buf) - BRAID_BS_HDR_LEN) {
        if (len > 0)
            memcpy(buf + BRAID_BS_HDR_LEN, payload, len);
        return braid_sock_send(fd, buf, BRAID_BS_HDR_LEN + len, deadline,
                               peer);
    }
    braid_status_t st =
        braid_sock_send(fd, buf, BRAID_BS_HDR_LEN, deadline, peer);
    if (st == BRAID_OK)
        st = braid_sock_send(fd, payload, len, deadline, peer);
    return st;
}

braid_status_t braid_bs_recv(int fd, uint32_t type, void *payload, size_t len,
                             double deadline, const char *peer)
{
    uint8_t        raw[BRAID_BS_HDR_LEN];
    braid_bs_hdr_t h;
    const char    *what = braid_bs_type_name(type);
    braid_status_t st =
        braid_sock_recv(fd, raw, sizeof(raw), deadline, peer, what);
    if (st != BRAID_OK)
        return st;
    braid_bs_hdr_unpack(raw, &h);
    st = braid_bs_hdr_check(&h, type, len, peer);
    if (st != BRAID_OK || len == 0)
        return st;
    return braid_sock_recv(fd, payload, len, deadline, peer, what);
}

uint64_t braid_bs_mac(const uint8_t key[16], char dir,
                      const uint8_t nonce_a[BRAID_BS_NONCE_LEN], int32_t rank,
                      int32_t size, const uint8_t nonce_b[BRAID_BS_NONCE_LEN])
{
    uint8_t msg[1 + BRAID_BS_NONCE_LEN + 4 + 4 + BRAID_BS_NONCE_LEN];
    size_t  off = 0;
    msg[off++]  = (uint8_t)dir;
    memcpy(msg + off, nonce_a, BRAID_BS_NONCE_LEN);
    off += BRAID_BS_NONCE_LEN;
    braid_put_u32(msg + off, (uint32_t)rank);
    off += 4;
    braid_put_u32(msg + off, (uint32_t)size);
    off += 4;
    memcpy(msg + off, nonce_b, BRAID_BS_NONCE_LEN);
    return braid_siphash24(key, msg, sizeof(msg));
}

braid_status_t braid_random_bytes(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return braid_error(BRAID_ERR_IO, "getrandom: %s", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
    }
    return BRAID_OK;
}
