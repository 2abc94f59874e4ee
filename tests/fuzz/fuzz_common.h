/* Helpers shared by the fuzz targets. */
#ifndef BRAID_FUZZ_COMMON_H
#define BRAID_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

/* Environment values are C strings: cut at the first NUL. */
static inline char *fuzz_cstring(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* A refusal must be a parse error that points inside (or just past) the
 * input: "position N" with N <= len.  Messages quote the input, which may
 * itself contain "position ", so any occurrence that fits will do. */
static inline void fuzz_check_position(braid_status_t st, size_t len)
{
    if (st != BRAID_ERR_PARSE)
        abort();
    for (const char *p = braid_last_error();
         (p = strstr(p, "position ")) != NULL; p += 9) {
        char         *end;
        unsigned long pos = strtoul(p + 9, &end, 10);
        if (end != p + 9 && pos <= len)
            return;
    }
    abort();
}

#endif
