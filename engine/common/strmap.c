/* String -> int32 map (see strmap.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/common/err.h"
#include "engine/common/strmap.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static braid_status_t alloc_slots(braid_eng_strmap_t *m, size_t cap)
{
    m->keys = calloc(cap, sizeof(*m->keys));
    m->lens = malloc(cap * sizeof(*m->lens));
    m->vals = malloc(cap * sizeof(*m->vals));
    m->cap  = cap;
    m->n    = 0;
    if (!m->keys || !m->lens || !m->vals) {
        braid_eng_strmap_free(m);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "hash map: out of memory");
    }
    return BRAID_OK;
}

braid_status_t braid_eng_strmap_init(braid_eng_strmap_t *m, size_t expect)
{
    size_t cap = 16;
    while (cap < 2 * expect)
        cap *= 2;
    return alloc_slots(m, cap);
}

void braid_eng_strmap_free(braid_eng_strmap_t *m)
{
    free(m->keys);
    free(m->lens);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

/* Slot holding key, or the empty slot where it would go. */
static size_t find_slot(const braid_eng_strmap_t *m, const char *key,
                        size_t len)
{
    size_t mask = m->cap - 1, i = hash_bytes(key, len) & mask;
    while (m->keys[i] &&
           (m->lens[i] != len || memcmp(m->keys[i], key, len) != 0))
        i = (i + 1) & mask;
    return i;
}

braid_status_t braid_eng_strmap_put(braid_eng_strmap_t *m, const char *key,
                                    size_t len, int32_t val, int32_t *old)
{
    if (2 * (m->n + 1) > m->cap) {
        braid_eng_strmap_t bigger;
        braid_status_t     st = alloc_slots(&bigger, 2 * m->cap);
        if (st != BRAID_OK)
            return st;
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t j       = find_slot(&bigger, m->keys[i], m->lens[i]);
                bigger.keys[j] = m->keys[i];
                bigger.lens[j] = m->lens[i];
                bigger.vals[j] = m->vals[i];
                bigger.n++;
            }
        braid_eng_strmap_free(m);
        *m = bigger;
    }
    size_t i = find_slot(m, key, len);
    if (m->keys[i]) {
        if (old)
            *old = m->vals[i];
        return BRAID_ERR_INVALID_ARG;
    }
    m->keys[i] = key;
    m->lens[i] = (uint32_t)len;
    m->vals[i] = val;
    m->n++;
    return BRAID_OK;
}

int32_t braid_eng_strmap_get(const braid_eng_strmap_t *m, const char *key,
                             size_t len)
{
    if (!m->cap)
        return -1;
    size_t i = find_slot(m, key, len);
    return m->keys[i] ? m->vals[i] : -1;
}
