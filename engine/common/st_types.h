/* The safetensors format's dtype names (internal to engine/common). */
#ifndef BRAID_ENG_ST_TYPES_H
#define BRAID_ENG_ST_TYPES_H

#include <stddef.h>

#include <braid/braid.h>

/* "BF16" -> its element size and braid's type (BRAID_DTYPE_COUNT where
 * braid has none); 0, or -1 for a name the format does not have. */
int braid_eng_st_type_parse(const char *name, size_t *size,
                            braid_dtype_t *dtype);
/* braid's type -> the format's name, or NULL. */
const char *braid_eng_st_type_name(braid_dtype_t dtype);

#endif
