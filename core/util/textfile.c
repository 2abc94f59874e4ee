#include "util/textfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

braid_status_t braid_text_read(char **text, const char *path,
                               const char *label, size_t max)
{
    *text   = NULL;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        int            err = errno;
        braid_status_t st  = braid_error(BRAID_ERR_IO, "%s: cannot open: %s",
                                         label, strerror(err));
        errno              = err;
        return st;
    }
    char  *buf = malloc(max + 1);
    size_t n   = buf ? fread(buf, 1, max + 1, f) : 0;
    int    err = ferror(f);
    fclose(f);
    const char    *nul = buf && !err && n <= max ? memchr(buf, '\0', n) : NULL;
    braid_status_t st  = BRAID_OK;
    if (buf == NULL)
        st = braid_error(BRAID_ERR_NO_MEMORY, "%s: out of memory", label);
    else if (err)
        st = braid_error(BRAID_ERR_IO, "%s: read error", label);
    else if (n > max)
        st = braid_error(BRAID_ERR_PARSE, "%s: larger than %zu bytes", label,
                         max);
    else if (nul != NULL)
        st = braid_error(BRAID_ERR_PARSE,
                         "%s: contains a NUL byte at offset %zu", label,
                         (size_t)(nul - buf));
    errno = 0;
    if (st != BRAID_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *text  = buf;
    return BRAID_OK;
}
