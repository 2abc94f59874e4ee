/* SipHash-2-4, written from the description in the paper: 2 compression
 * rounds per 8-byte message word, 4 finalization rounds.  Byte order is
 * fixed (little-endian loads), so results do not depend on the host. */
#include "util/siphash.h"

static uint64_t rotl64(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64u - b));
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

typedef struct {
    uint64_t v0, v1, v2, v3;
} sip_state_t;

static void sip_round(sip_state_t *s)
{
    s->v0 += s->v1;
    s->v1 = rotl64(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = rotl64(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = rotl64(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = rotl64(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = rotl64(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = rotl64(s->v2, 32);
}

static void sip_compress(sip_state_t *s, uint64_t m)
{
    s->v3 ^= m;
    sip_round(s);
    sip_round(s);
    s->v0 ^= m;
}

uint64_t braid_siphash24(const uint8_t key[16], const void *data, size_t len)
{
    const uint8_t *in = data;
    uint64_t       k0 = load_le64(key);
    uint64_t       k1 = load_le64(key + 8);
    /* The initialization constants spell "somepseudorandomlygeneratedbytes".
     */
    sip_state_t s = {
        .v0 = k0 ^ 0x736f6d6570736575ull,
        .v1 = k1 ^ 0x646f72616e646f6dull,
        .v2 = k0 ^ 0x6c7967656e657261ull,
        .v3 = k1 ^ 0x7465646279746573ull,
    };

    size_t full = len - (len % 8);
    for (size_t off = 0; off < full; off += 8)
        sip_compress(&s, load_le64(in + off));

    /* Last word: the 0..7 leftover bytes, and the length mod 256 in the top
     * byte, so that messages differing only in trailing zeros differ. */
    uint64_t last = (uint64_t)(len & 0xff) << 56;
    for (size_t i = 0; i < len % 8; i++)
        last |= (uint64_t)in[full + i] << (8 * i);
    sip_compress(&s, last);

    s.v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        sip_round(&s);
    return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
