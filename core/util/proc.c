/* What /proc says of a process (proc.h). */
#include <stdio.h>
#include <string.h>

#include "util/proc.h"

char braid_proc_state(long pid)
{
    char  path[64], buf[512];
    FILE *f;
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if (pid <= 0 || (f = fopen(path, "re")) == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold anything, so look after the last
     * parenthesis. */
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}
