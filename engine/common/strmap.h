/* A string -> int32 hash map (open addressing, linear probing).
 *
 * Keys are byte strings given as (pointer, length) and are borrowed: they
 * must outlive the map (the tokenizer keeps them in its own arena, the
 * safetensors reader in its tensor table). */
#ifndef BRAID_ENG_STRMAP_H
#define BRAID_ENG_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

typedef struct {
    const char **keys; /* [cap], NULL = empty slot */
    uint32_t    *lens; /* [cap] */
    int32_t     *vals; /* [cap] */
    size_t       cap;  /* power of two, at least twice n */
    size_t       n;
} braid_eng_strmap_t;

/* Sized for `expect` keys (grows as needed). */
braid_status_t braid_eng_strmap_init(braid_eng_strmap_t *m, size_t expect);
void           braid_eng_strmap_free(braid_eng_strmap_t *m);
/* Inserts key -> val.  Returns BRAID_OK, or BRAID_ERR_INVALID_ARG with
 * *old set to the existing value if the key is already there (the map is
 * unchanged). */
braid_status_t braid_eng_strmap_put(braid_eng_strmap_t *m, const char *key,
                                    size_t len, int32_t val, int32_t *old);
/* The value of key, or -1 if absent. */
int32_t braid_eng_strmap_get(const braid_eng_strmap_t *m, const char *key,
                             size_t len);

#endif
