/* The safetensors format's dtype names (see st_types.h). */
#include <string.h>

#include "engine/common/st_types.h"

/* The format's dtype names, their sizes, and braid's type where it has one. */
static const struct {
    const char   *name;
    size_t        size;
    braid_dtype_t dtype;
} st_types[] = {
    {"F64", 8, BRAID_F64},
    {"F32", 4, BRAID_F32},
    {"F16", 2, BRAID_F16},
    {"BF16", 2, BRAID_BF16},
    {"I64", 8, BRAID_I64},
    {"I32", 4, BRAID_I32},
    {"U8", 1, BRAID_U8},
    {"I16", 2, BRAID_DTYPE_COUNT},
    {"U16", 2, BRAID_DTYPE_COUNT},
    {"U32", 4, BRAID_DTYPE_COUNT},
    {"U64", 8, BRAID_DTYPE_COUNT},
    {"I8", 1, BRAID_DTYPE_COUNT},
    {"BOOL", 1, BRAID_DTYPE_COUNT},
    {"F8_E4M3", 1, BRAID_DTYPE_COUNT},
    {"F8_E5M2", 1, BRAID_DTYPE_COUNT},
};
#define ST_NTYPES (sizeof(st_types) / sizeof(st_types[0]))

int braid_eng_st_type_parse(const char *name, size_t *size,
                            braid_dtype_t *dtype)
{
    for (size_t i = 0; i < ST_NTYPES; i++)
        if (strcmp(st_types[i].name, name) == 0) {
            *size  = st_types[i].size;
            *dtype = st_types[i].dtype;
            return 0;
        }
    return -1;
}

const char *braid_eng_st_type_name(braid_dtype_t dtype)
{
    for (size_t i = 0; i < ST_NTYPES; i++)
        if (st_types[i].dtype == dtype)
            return st_types[i].name;
    return NULL;
}
