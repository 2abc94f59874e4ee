/* Wire format of the bootstrap channel.
 *
 * Every message is a 16-byte header {magic u32, type u32, length u64} (big
 * endian) followed by length bytes.  The receiver always knows how long the
 * message it waits for must be and refuses any other length before reading
 * the payload, so a corrupt or hostile peer can neither make us allocate nor
 * desynchronize the stream silently.
 *
 * Handshake (challenge-response; the job key never crosses the wire):
 *   root   -> client  CHALLENGE {version u32, root nonce[16]}
 *   client -> root    HELLO     {version u32, rank i32, size i32,
 *                                client nonce[16], mac u64}
 *                     mac = SipHash-2-4(key, 'C' || root nonce || rank ||
 *                                       size || client nonce)
 *   root   -> client  WELCOME   {mac u64}: SipHash-2-4(key, 'S' || client
 *                                nonce || rank || size || root nonce)
 *                  or REFUSE    {reason u32}, then close
 *   root   -> client  READY     {} once every rank has joined.
 *   client -> root    IDENT     {pid u32, host[BRAID_BS_HOST_LEN]}: who this
 *                                rank is, so that the root can name a rank
 *                                it loses by host and pid.
 *
 * After the handshake, any root -> client message may be replaced by
 *   root   -> client  ABORT     {status i32, lost rank i32 (-1: none,
 *                                BRAID_BS_VERDICT: text is a verdict),
 *                                text[BRAID_BS_ABORT_TEXT_LEN]}
 * which the root sends to every live rank when the channel fails on its
 * side (a rank was lost, or the root gave up), just before it closes the
 * connections.  It tells the others why, instead of a bare end of stream.
 *
 * A failure inquiry (inquiry.c) after a call of the communicator failed:
 *   root   -> client  QUERY     {}: say how far you got
 *   client -> root    STATUS    {the communicator's report, of the length
 *                                it set for the channel}, asked or not:
 *                                a rank whose own call failed sends it
 *                                first
 *   root   -> client  ABORT     with the verdict (lost = BRAID_BS_VERDICT)
 * QUERY may arrive in place of any root -> client message, and STATUS in
 * place of any client -> root one.
 * The direction byte keeps a proof made for one side from being replayed as
 * the other's; fresh nonces on both sides keep old proofs from being
 * replayed at all. */
#ifndef BRAID_BOOTSTRAP_PROTO_H
#define BRAID_BOOTSTRAP_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

#define BRAID_BS_MAGIC 0x62726431u /* "brd1" */
/* 2: IDENT after READY, and ABORT.  3: QUERY/STATUS, verdicts, longer
 * ABORT text.  Ranks of different versions are refused at the handshake
 * with a clear reason. */
#define BRAID_BS_VERSION   3u
#define BRAID_BS_HDR_LEN   16
#define BRAID_BS_NONCE_LEN 16

enum {
    BRAID_BS_CHALLENGE = 1,
    BRAID_BS_HELLO,
    BRAID_BS_WELCOME,
    BRAID_BS_REFUSE,
    BRAID_BS_READY,
    BRAID_BS_GATHER,        /* allgather contribution, rank -> root */
    BRAID_BS_GATHER_RESULT, /* allgather concatenation, root -> rank */
    BRAID_BS_BCAST_UP,      /* bcast data, bcast root -> rank 0 */
    BRAID_BS_BCAST,         /* bcast data, rank 0 -> rank */
    BRAID_BS_BARRIER,       /* rank -> root: arrived */
    BRAID_BS_BARRIER_DONE,  /* root -> rank: everyone arrived */
    BRAID_BS_IDENT,         /* rank -> root after READY: pid and host */
    BRAID_BS_ABORT,         /* root -> rank: the channel failed, and why */
    BRAID_BS_QUERY,         /* root -> rank: a failure inquiry asks */
    BRAID_BS_STATUS,        /* rank -> root: its report for the inquiry */
    BRAID_BS_TYPE_END
};

#define BRAID_BS_CHALLENGE_LEN  (4 + BRAID_BS_NONCE_LEN)
#define BRAID_BS_HELLO_LEN      (4 + 4 + 4 + BRAID_BS_NONCE_LEN + 8)
#define BRAID_BS_WELCOME_LEN    8
#define BRAID_BS_REFUSE_LEN     4
#define BRAID_BS_HOST_LEN       60
#define BRAID_BS_IDENT_LEN      (4 + BRAID_BS_HOST_LEN)
#define BRAID_BS_ABORT_TEXT_LEN 480
#define BRAID_BS_VERDICT        (-2) /* ABORT's lost field: a verdict */
#define BRAID_BS_ABORT_LEN      (4 + 4 + BRAID_BS_ABORT_TEXT_LEN)

/* Why the root refused a connection (REFUSE payload). */
typedef enum {
    BRAID_BS_REFUSE_MALFORMED = 1,
    BRAID_BS_REFUSE_VERSION,
    BRAID_BS_REFUSE_KEY,
    BRAID_BS_REFUSE_SIZE,
    BRAID_BS_REFUSE_RANK,
    BRAID_BS_REFUSE_DUPLICATE,
} braid_bs_refuse_t;

typedef struct {
    uint32_t magic;
    uint32_t type;
    uint64_t length;
} braid_bs_hdr_t;

void     braid_put_u32(uint8_t *p, uint32_t v);
void     braid_put_u64(uint8_t *p, uint64_t v);
uint32_t braid_get_u32(const uint8_t *p);
uint64_t braid_get_u64(const uint8_t *p);

const char *braid_bs_type_name(uint32_t type);
const char *braid_bs_refuse_str(uint32_t reason);

void braid_bs_hdr_pack(uint8_t out[BRAID_BS_HDR_LEN], uint32_t type,
                       uint64_t length);
void braid_bs_hdr_unpack(const uint8_t   in[BRAID_BS_HDR_LEN],
                         braid_bs_hdr_t *h);
/* Checks a received header: magic (BRAID_ERR_PEER), type
 * (BRAID_ERR_MISMATCH: the peer is in another collective) and length
 * (BRAID_ERR_PEER: oversized or short), naming peer. */
braid_status_t braid_bs_hdr_check(const braid_bs_hdr_t *h, uint32_t type,
                                  uint64_t length, const char *peer);

/* Whether h announces an ABORT frame (abort.c's payload follows). */
int braid_bs_hdr_is_abort(const braid_bs_hdr_t *h);

/* One framed message: header and payload. */
braid_status_t braid_bs_send(int fd, uint32_t type, const void *payload,
                             size_t len, double deadline, const char *peer);
/* Receives a message that must be of this type and exactly len bytes. */
braid_status_t braid_bs_recv(int fd, uint32_t type, void *payload, size_t len,
                             double deadline, const char *peer);

/* Handshake MACs (see above); dir is 'C' (client proof) or 'S' (root). */
uint64_t braid_bs_mac(const uint8_t key[16], char dir,
                      const uint8_t nonce_a[BRAID_BS_NONCE_LEN], int32_t rank,
                      int32_t size, const uint8_t nonce_b[BRAID_BS_NONCE_LEN]);
/* Fills buf with len random bytes from the kernel (getrandom). */
braid_status_t braid_random_bytes(void *buf, size_t len);

#endif
