/* Reading a small text file whole: the calibration cache and the tuning
 * file share the checks (the size bound, no NUL byte) and their messages. */
#ifndef BRAID_CORE_TEXTFILE_H
#define BRAID_CORE_TEXTFILE_H

#include <stddef.h>

#include <braid/braid.h>

/* *text = the file's bytes and a final NUL (free() it), or NULL on error.
 * Errors name `label` (how the caller's messages name the file):
 * BRAID_ERR_IO when it cannot be opened (errno is open's, so a caller can
 * tell a missing file) or read, BRAID_ERR_PARSE when it holds more than
 * max bytes or a NUL byte, BRAID_ERR_NO_MEMORY.  errno is 0 otherwise. */
braid_status_t braid_text_read(char **text, const char *path,
                               const char *label, size_t max);

#endif
