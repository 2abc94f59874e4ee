/* BRAID_PLUGINS parser: "ucx,lowhop" keeps, "^nccl" excludes. */
#include <ctype.h>
#include <string.h>

#include "loader/loader.h"
#include "util/log.h"

static int is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

static braid_status_t fail(const char *spec, size_t pos, const char *what)
{
    return braid_error(BRAID_ERR_PARSE,
                       "BRAID_PLUGINS: %s at position %zu: "
                       "'%s'",
                       what, pos, braid_quote(spec, strlen(spec), pos).s);
}

braid_status_t braid_plugin_filter_parse(braid_plugin_filter_t *filter,
                                         const char            *spec)
{
    memset(filter, 0, sizeof(*filter));
    filter->exclude = 1; /* no spec: exclude nothing */
    if (spec == NULL || *spec == '\0')
        return BRAID_OK;

    size_t pos      = 0;
    filter->exclude = 0;
    if (spec[0] == '^') {
        filter->exclude = 1;
        pos             = 1;
    }
    for (;;) {
        size_t start = pos;
        while (is_name_char(spec[pos]))
            pos++;
        size_t len = pos - start;
        if (len == 0)
            return fail(spec, pos,
                        spec[pos] == '\0' || spec[pos] == ','
                            ? "empty plugin name"
                            : "unexpected character (names are "
                              "letters, digits, '_' and '-'; '^' "
                              "only at the start)");
        if (len >= sizeof(filter->names[0]))
            return fail(spec, start, "name longer than 63 characters");
        if (filter->n ==
            (int)(sizeof(filter->names) / sizeof(filter->names[0])))
            return fail(spec, start, "more than 32 names");
        memcpy(filter->names[filter->n], spec + start, len);
        filter->names[filter->n][len] = '\0';
        filter->n++;
        if (spec[pos] == '\0')
            return BRAID_OK;
        if (spec[pos] != ',')
            return fail(spec, pos,
                        spec[pos] == ';' || spec[pos] == ':' ||
                                spec[pos] == ' '
                            ? "unexpected character (names are "
                              "separated by ',': did you mean ','?)"
                            : "unexpected character (expected ',' or "
                              "the end)");
        pos++;
    }
}

int braid_plugin_filter_keeps(const braid_plugin_filter_t *filter,
                              const char                  *name)
{
    for (int i = 0; i < filter->n; i++)
        if (strcmp(filter->names[i], name) == 0)
            return !filter->exclude;
    return filter->exclude;
}
