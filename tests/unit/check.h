/* CHECK(cond, fmt, ...): counts a check, reports a failed one with its place.
 * Shared by the core's unit tests; main() ends with check_summary(). */
#ifndef BRAID_TEST_CHECK_H
#define BRAID_TEST_CHECK_H

#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        check_count++;                                                        \
        if (!(cond)) {                                                        \
            check_failures++;                                                 \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
        }                                                                     \
    } while (0)

/* Prints "<name>: N checks, M failed"; returns the exit status. */
static inline int check_summary(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures != 0;
}

#endif
