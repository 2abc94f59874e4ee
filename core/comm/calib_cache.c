/* The calibration cache file: where it lives, its text, and reading and
 * writing it.
 *
 *   # comment lines
 *   key <the communicator's shape, one line>
 *   measured <seconds since the epoch> took <seconds>
 *   reduce_gbps <GB/s>
 *   tl <name> <version> sr <path> put <path> [get <path> [mget <path>]]
 * where each <path> is
 *   <pair_us> <all_us> <gbps> <bytes> <big_gbps> <big_bytes>
 * (the latencies, the bandwidth in the caches and the message size it was
 * measured with, the bandwidth beyond the last-level cache and its size).
 * The key starts with the format's version (v2 since the out-of-cache
 * figures came, v3 since their receive buffer is faulted in before the
 * timing, v4 since their exchange is warmed up once, v5 since the small
 * exchanges of all transports take turns, v6 since the out-of-cache
 * bandwidth is the lower quartile rank's, not the slowest's, v7 since
 * the get path is measured on braid_mem_alloc's memory too, v8 since shm
 * puts and cells copy with vector moves, not memcpy's rep movsb): a file
 * of another version has another key, hence another name, and is never
 * read; one whose lines lack fields is refused.
 * A path a transport lacks is written "sr -" or "put -"; the get path
 * (single-copy reads) is written only where the communicator has one, and
 * mget (the same reads of braid_mem_alloc's memory) only after it.  The
 * file is braid's own, but it sits in the user's folder and may be damaged: a
 * fault is a BRAID_ERR_PARSE naming the line, and the caller measures
 * again rather than fail.  Numbers are read and written in the C locale. */
#include <errno.h>
#include <locale.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/calib.h"
#include "util/env.h"
#include "util/log.h"
#include "util/textfile.h"

#define CACHE_MAX_BYTES 65536 /* a cache file is a few hundred bytes */
#define MAX_TOKENS      40

braid_status_t braid_calib_mode_parse(braid_calib_mode_t *mode,
                                      const char         *value)
{
    *mode = BRAID_CALIB_ON;
    if (value == NULL || *value == '\0' || strcmp(value, "1") == 0)
        return BRAID_OK;
    if (strcmp(value, "0") == 0) {
        *mode = BRAID_CALIB_OFF;
        return BRAID_OK;
    }
    if (strcmp(value, "force") == 0) {
        *mode = BRAID_CALIB_FORCE;
        return BRAID_OK;
    }
    /* Point at the first character where value leaves every keyword. */
    static const char *words[] = {"0", "1", "force"};
    size_t             best    = 0;
    for (int w = 0; w < 3; w++) {
        size_t i = 0;
        while (value[i] && value[i] == words[w][i])
            i++;
        if (i > best)
            best = i;
    }
    return braid_error(
        BRAID_ERR_PARSE,
        "BRAID_CALIBRATE='%s': %s at position %zu (expected 0, 1 or force)",
        braid_quote(value, strlen(value), best).s,
        value[best] ? "unexpected character" : "value ends early", best);
}

void braid_calib_cache_dir(char *buf, size_t len)
{
    const char *dir = getenv("BRAID_CALIB_DIR");
    if (dir != NULL) {
        snprintf(buf, len, "%s", dir);
        return;
    }
    const char *xdg  = braid_env_get("XDG_CACHE_HOME");
    const char *home = braid_env_get("HOME");
    if (xdg != NULL && xdg[0] == '/')
        snprintf(buf, len, "%s/braid", xdg);
    else if (home != NULL)
        snprintf(buf, len, "%s/.cache/braid", home);
    else
        buf[0] = '\0';
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void braid_calib_cache_path(char *buf, size_t len, const char *dir,
                            const char *key)
{
    snprintf(buf, len, "%s/calib-%016llx.txt", dir,
             (unsigned long long)fnv1a64(key));
}

/* The C locale for numbers, whatever the program set. */
static locale_t c_numeric(void)
{
    static locale_t loc;
    if (loc == (locale_t)0)
        loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    return loc;
}

static void append(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (*off < len) {
        int n = vsnprintf(buf + *off, len - *off, fmt, ap);
        *off += n > 0 ? (size_t)n : 0;
    }
    va_end(ap);
}

static void append_path(char *buf, size_t len, size_t *off, const char *tag,
                        int has, const braid_calib_path_t *p)
{
    if (has)
        append(buf, len, off, " %s %.6g %.6g %.6g %.0f %.6g %.0f", tag,
               p->pair_us, p->all_us, p->beta_gbps, p->bytes, p->big_beta_gbps,
               p->big_bytes);
    else
        append(buf, len, off, " %s -", tag);
}

braid_status_t braid_calib_format(char *buf, size_t len, const char *key,
                                  const braid_calib_t *c)
{
    locale_t loc = c_numeric(), old = (locale_t)0;
    if (loc != (locale_t)0)
        old = uselocale(loc);
    size_t off = 0;
    append(buf, len, &off,
           "# braid link calibration (docs/tuning.md): "
           "written by braid_init.\n# Delete this file or set "
           "BRAID_CALIBRATE=force to measure again.\nkey %s\nmeasured %.0f "
           "took %.3f\nreduce_gbps %.6g\n",
           key, c->when, c->took_s, c->reduce_gbps);
    for (int i = 0; i < c->ntl; i++) {
        const braid_calib_tl_t *t = &c->tl[i];
        append(buf, len, &off, "tl %s %s", t->name, t->version);
        append_path(buf, len, &off, "sr", t->has_sr, &t->sr);
        append_path(buf, len, &off, "put", t->has_put, &t->put);
        if (t->has_get)
            append_path(buf, len, &off, "get", 1, &t->get);
        if (t->has_get && t->has_mget)
            append_path(buf, len, &off, "mget", 1, &t->mget);
        append(buf, len, &off, "\n");
    }
    if (old != (locale_t)0)
        uselocale(old);
    if (off >= len)
        return braid_error(BRAID_ERR_INTERNAL,
                           "calibration cache: text "
                           "longer than %zu bytes",
                           len);
    return BRAID_OK;
}

/* ------------------------------------------------------------- parsing */

typedef struct line {
    const char *where; /* "file:12" */
    char       *tok[MAX_TOKENS];
    int         ntok;
} line_t;

static braid_status_t bad(const line_t *ln, const char *what)
{
    return braid_error(BRAID_ERR_PARSE, "%s: %s", ln->where, what);
}

static braid_status_t number(const line_t *ln, int i, double max, double *out)
{
    if (i >= ln->ntok)
        return braid_error(BRAID_ERR_PARSE,
                           "%s: the line ends before field "
                           "%d (a number)",
                           ln->where, i + 1);
    char name[640]; /* where (600) and " field N" */
    snprintf(name, sizeof(name), "%s field %d", ln->where, i + 1);
    return braid_parse_double(name, ln->tok[i], 0.0, max, out);
}

/* "sr", "put", "get" or "mget" at tok[*i], then "-" or six numbers. */
static braid_status_t parse_path(const line_t *ln, int *i, const char *tag,
                                 int *has, braid_calib_path_t *p)
{
    char msg[96];
    if (*i >= ln->ntok || strcmp(ln->tok[*i], tag) != 0) {
        snprintf(msg, sizeof(msg), "expected '%s' as field %d", tag, *i + 1);
        return bad(ln, msg);
    }
    (*i)++;
    if (*i < ln->ntok && strcmp(ln->tok[*i], "-") == 0) {
        (*i)++;
        *has = 0;
        return BRAID_OK;
    }
    braid_status_t st;
    if ((st = number(ln, *i, 1e9, &p->pair_us)) != BRAID_OK ||
        (st = number(ln, *i + 1, 1e9, &p->all_us)) != BRAID_OK ||
        (st = number(ln, *i + 2, 1e6, &p->beta_gbps)) != BRAID_OK ||
        (st = number(ln, *i + 3, 1e12, &p->bytes)) != BRAID_OK ||
        (st = number(ln, *i + 4, 1e6, &p->big_beta_gbps)) != BRAID_OK ||
        (st = number(ln, *i + 5, 1e12, &p->big_bytes)) != BRAID_OK)
        return st;
    int zero = p->beta_gbps <= 0.0 ? 3 : p->big_beta_gbps <= 0.0 ? 5 : 0;
    if (zero) {
        snprintf(msg, sizeof(msg), "field %d: a bandwidth must be above 0",
                 *i + zero);
        return bad(ln, msg);
    }
    if (p->bytes <= 0.0 || p->big_bytes <= p->bytes) {
        snprintf(msg, sizeof(msg),
                 "fields %d and %d: the sizes must be above 0, the second "
                 "above the first",
                 *i + 4, *i + 6);
        return bad(ln, msg);
    }
    *i += 6;
    *has = 1;
    return BRAID_OK;
}

static braid_status_t parse_tl(braid_calib_t *c, const line_t *ln)
{
    if (c->ntl >= BRAID_CALIB_MAX_TLS)
        return bad(ln, "more transports than a cache file holds");
    if (ln->ntok < 3)
        return bad(ln, "expected 'tl NAME VERSION sr ... put ...'");
    braid_calib_tl_t *t = &c->tl[c->ntl];
    memset(t, 0, sizeof(*t));
    if (strlen(ln->tok[1]) >= sizeof(t->name) ||
        strlen(ln->tok[2]) >= sizeof(t->version))
        return bad(ln, "transport name or version too long");
    if (braid_calib_find(c, ln->tok[1], ln->tok[2]) != NULL)
        return bad(ln, "the same transport twice");
    strcpy(t->name, ln->tok[1]);
    strcpy(t->version, ln->tok[2]);
    int            i = 3;
    braid_status_t st;
    if ((st = parse_path(ln, &i, "sr", &t->has_sr, &t->sr)) != BRAID_OK ||
        (st = parse_path(ln, &i, "put", &t->has_put, &t->put)) != BRAID_OK)
        return st;
    if (i < ln->ntok && strcmp(ln->tok[i], "get") == 0 &&
        (st = parse_path(ln, &i, "get", &t->has_get, &t->get)) != BRAID_OK)
        return st;
    if (t->has_get && i < ln->ntok && strcmp(ln->tok[i], "mget") == 0 &&
        (st = parse_path(ln, &i, "mget", &t->has_mget, &t->mget)) != BRAID_OK)
        return st;
    if (i != ln->ntok)
        return bad(ln, "unexpected fields after the put and get paths");
    c->ntl++;
    return BRAID_OK;
}

/* Splits line (modified in place) into blank-separated tokens. */
static int tokenize(line_t *ln, char *line)
{
    ln->ntok = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t != NULL;
         t = strtok_r(NULL, " \t\r", &save)) {
        if (ln->ntok == MAX_TOKENS)
            return -1;
        ln->tok[ln->ntok++] = t;
    }
    return 0;
}

braid_status_t braid_calib_parse(braid_calib_t *c, int *match,
                                 const char *text, const char *key,
                                 const char *source)
{
    memset(c, 0, sizeof(*c));
    *match      = 0;
    size_t len  = strlen(text);
    char  *copy = malloc(len + 1);
    if (copy == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "%s: out of memory", source);
    memcpy(copy, text, len + 1);
    braid_status_t st = BRAID_OK;
    int    have_key = 0, have_measured = 0, have_reduce = 0, lineno = 0;
    char  *save = NULL;
    char   where[600];
    line_t ln = {.where = where};
    /* strtok_r skips empty lines, so count them from the positions. */
    for (char *p = copy, *nl; st == BRAID_OK && p < copy + len; p = nl + 1) {
        nl = strchr(p, '\n');
        if (nl == NULL)
            nl = copy + len;
        *nl = '\0';
        lineno++;
        snprintf(where, sizeof(where), "%s:%d", source, lineno);
        if (p[strspn(p, " \t\r")] == '#' || p[strspn(p, " \t\r")] == '\0')
            continue;
        if (strncmp(p, "key ", 4) == 0) {
            if (have_key++)
                st = bad(&ln, "a second key line");
            else
                *match = key != NULL && strcmp(p + 4, key) == 0;
            continue;
        }
        if (tokenize(&ln, p) < 0) {
            st = bad(&ln, "too many fields");
            break;
        }
        if (strcmp(ln.tok[0], "measured") == 0) {
            if (ln.ntok != 4 || strcmp(ln.tok[2], "took") != 0)
                st = bad(&ln, "expected 'measured SECONDS took SECONDS'");
            else if ((st = number(&ln, 1, 1e13, &c->when)) == BRAID_OK)
                st = number(&ln, 3, 1e6, &c->took_s);
            have_measured = 1;
        } else if (strcmp(ln.tok[0], "reduce_gbps") == 0) {
            if (ln.ntok != 2)
                st = bad(&ln, "expected 'reduce_gbps GBPS'");
            else
                st = number(&ln, 1, 1e6, &c->reduce_gbps);
            if (st == BRAID_OK && c->reduce_gbps <= 0.0)
                st = bad(&ln, "reduce_gbps must be above 0");
            have_reduce = 1;
        } else if (strcmp(ln.tok[0], "tl") == 0) {
            st = parse_tl(c, &ln);
        } else {
            st = bad(&ln, "expected key, measured, reduce_gbps or tl");
        }
    }
    (void)save;
    free(copy);
    if (st == BRAID_OK && (!have_key || !have_measured || !have_reduce))
        st = braid_error(BRAID_ERR_PARSE, "%s: lacks the %s line", source,
                         !have_key        ? "key"
                         : !have_measured ? "measured"
                                          : "reduce_gbps");
    if (st != BRAID_OK)
        *match = 0;
    return st;
}

braid_status_t braid_calib_load(braid_calib_t *c, int *match, const char *path,
                                const char *key)
{
    char *text;
    memset(c, 0, sizeof(*c));
    *match            = 0;
    braid_status_t st = braid_text_read(&text, path, path, CACHE_MAX_BYTES);
    if (st != BRAID_OK)
        return st; /* errno: open's, for a missing file */
    st = braid_calib_parse(c, match, text, key, path);
    free(text);
    errno = 0;
    return st;
}

/* mkdir -p for the cache's folder (0700: it describes this user's jobs). */
static int make_dirs(const char *dir)
{
    char path[1024];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return -1;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

braid_status_t braid_calib_store(const char *path, const char *key,
                                 const braid_calib_t *c)
{
    char           text[4096], dir[1024], tmp[1100];
    braid_status_t st = braid_calib_format(text, sizeof(text), key, c);
    if (st != BRAID_OK)
        return st;
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (make_dirs(dir) != 0)
            return braid_error(BRAID_ERR_IO,
                               "cannot create the calibration "
                               "cache folder %s: %s",
                               dir, strerror(errno));
    }
    /* Ranks of several jobs may write at once: each its own temporary
     * file, renamed over the old one in one step. */
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "we");
    if (f == NULL)
        return braid_error(BRAID_ERR_IO, "cannot write %s: %s", tmp,
                           strerror(errno));
    size_t n  = strlen(text);
    int    ok = fwrite(text, 1, n, f) == n;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return braid_error(BRAID_ERR_IO, "cannot write %s: %s", path,
                           strerror(err));
    }
    return BRAID_OK;
}

const braid_calib_tl_t *braid_calib_find(const braid_calib_t *c,
                                         const char *name, const char *version)
{
    for (int i = 0; i < c->ntl; i++)
        if (strcmp(c->tl[i].name, name) == 0 &&
            strcmp(c->tl[i].version, version) == 0)
            return &c->tl[i];
    return NULL;
}
