/* Did-you-mean (see suggest.h). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "util/suggest.h"

#define MAX_NAME 64

int braid_edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    /* Three rows of the dynamic programme: i-2, i-1, i. */
    int rows[3][MAX_NAME + 1];
    if (na > MAX_NAME || nb > MAX_NAME)
        return (int)(na > nb ? na : nb);
    for (size_t j = 0; j <= nb; j++)
        rows[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int *cur = rows[i % 3], *up = rows[(i - 1) % 3],
            *up2 = rows[(i + 1) % 3]; /* (i - 2) % 3 */
        cur[0]   = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int ca = tolower((unsigned char)a[i - 1]);
            int cb = tolower((unsigned char)b[j - 1]);
            int d  = up[j - 1] + (ca != cb);
            if (up[j] + 1 < d)
                d = up[j] + 1;
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && up2[j - 2] + 1 < d)
                d = up2[j - 2] + 1;
            cur[j] = d;
        }
    }
    return rows[na % 3][nb];
}

const char *braid_suggest(const char *word, size_t len,
                          const char *const *names, int n)
{
    const char *best   = NULL;
    int         best_d = 0;
    for (int i = 0; i < n; i++) {
        int d = braid_edit_distance(word, len, names[i], strlen(names[i]));
        if (d > 0 && (best == NULL || d < best_d)) {
            best   = names[i];
            best_d = d;
        }
    }
    if (best == NULL || best_d > (len <= 3 ? 1 : 2))
        return NULL;
    return best;
}

const char *braid_suggest_phrase(char *buf, size_t n, const char *word,
                                 size_t len, const char *const *names,
                                 int count)
{
    const char *s = braid_suggest(word, len, names, count);
    if (n > 0)
        buf[0] = '\0';
    if (s != NULL)
        snprintf(buf, n, " (did you mean '%s'?)", s);
    return buf;
}
