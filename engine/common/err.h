/* Errors of the engines (braid-infer, braid-train) and their shared code.
 *
 * Every engine function returns a braid_status_t (braid.h) and, on failure,
 * leaves a message naming what failed and why in a per-thread buffer:
 *
 *     if ((st = braid_eng_st_open(&st, dir)) != BRAID_OK)
 *         fprintf(stderr, "braid-infer: %s\n", braid_eng_error());
 *
 * The core's braid_last_error() stays the place for failures inside braid
 * calls; braid_eng_fail_braid() copies it over so that an engine reports
 * one message either way. */
#ifndef BRAID_ENG_ERR_H
#define BRAID_ENG_ERR_H

#include <braid/braid.h>

/* Sets this thread's message (printf format) and returns st, so that a
 * failure reads `return braid_eng_fail(BRAID_ERR_IO, "%s: %s", path, why);`.
 * A message longer than 1 KiB is cut. */
braid_status_t braid_eng_fail(braid_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* For a failed braid_* call: "<what>: <braid_last_error()>". */
braid_status_t braid_eng_fail_braid(braid_status_t st, const char *what);
/* Prepends "<prefix>: " to the current message (adds context on the way
 * up, e.g. the file name); returns st. */
braid_status_t braid_eng_wrap(braid_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The message of the last failure on this thread ("" if none). */
const char *braid_eng_error(void);

#endif
