/* Clocks, /proc figures, parsing and files for the engines (see util.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/common/err.h"
#include "engine/common/util.h"

double braid_eng_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void braid_eng_rss(uint64_t *rss, uint64_t *peak)
{
    *rss = *peak = 0;
    FILE *f      = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char               line[256];
    unsigned long long kb;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            *rss = (uint64_t)kb << 10;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            *peak = (uint64_t)kb << 10;
    }
    fclose(f);
}

braid_status_t braid_eng_parse_int(int64_t *out, const char *s, int64_t lo,
                                   int64_t hi, int suffixes, const char *what)
{
    char *end;
    errno       = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno == ERANGE)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: '%s' is not an integer", what, s);
    int shift = 0;
    if (suffixes && *end) {
        switch (*end) {
        case 'K':
        case 'k':
            shift = 10;
            end++;
            break;
        case 'M':
        case 'm':
            shift = 20;
            end++;
            break;
        case 'G':
        case 'g':
            shift = 30;
            end++;
            break;
        default: break;
        }
    }
    if (*end)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: '%s': unexpected '%s' after the number",
                              what, s, end);
    if (shift && (v > (INT64_MAX >> shift) || v < -(INT64_MAX >> shift)))
        return braid_eng_fail(BRAID_ERR_INVALID_ARG, "%s: '%s' is too large",
                              what, s);
    v *= (long long)1 << shift;
    if (v < lo || v > hi)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: %lld is out of range [%lld, %lld]", what, v,
                              (long long)lo, (long long)hi);
    *out = v;
    return BRAID_OK;
}

braid_status_t braid_eng_parse_double(double *out, const char *s, double lo,
                                      double hi, const char *what)
{
    char *end;
    errno    = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: '%s' is not a finite number", what, s);
    if (v < lo || v > hi)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: %g is out of range [%g, %g]", what, v, lo,
                              hi);
    *out = v;
    return BRAID_OK;
}

braid_status_t braid_eng_parse_ids(int32_t **ids, size_t *n, const char *s,
                                   int64_t hi, const char *what)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = malloc(cap * sizeof(*v));
    if (!v)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "%s: out of memory", what);
    size_t      k = 0;
    const char *p = s;
    for (;;) {
        size_t pos  = (size_t)(p - s) + 1;
        char  *end  = (char *)p;
        errno       = 0;
        long long x = (*p >= '0' && *p <= '9') ? strtoll(p, &end, 10) : 0;
        if (end == p || (*end && *end != ',')) {
            free(v);
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "%s: expected a non-negative integer at "
                                  "character %zu of '%s'",
                                  what, pos, s);
        }
        if (errno == ERANGE || x > hi) {
            free(v);
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "%s: id %.*s at character %zu is out of "
                                  "range [0, %lld]",
                                  what, (int)(end - p), p, pos, (long long)hi);
        }
        v[k++] = (int32_t)x;
        if (!*end)
            break;
        p = end + 1;
    }
    *ids = v;
    *n   = k;
    return BRAID_OK;
}

uint64_t braid_eng_hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

int braid_eng_grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *nb = realloc(*buf, n * elem);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = n;
    return 0;
}

braid_status_t braid_eng_read_file(char **data, size_t *len, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return braid_eng_fail(BRAID_ERR_IO, "%s: %s", path, strerror(errno));
    char  *buf  = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (cap - size < 65536) {
            cap      = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return braid_eng_fail(BRAID_ERR_NO_MEMORY, "%s: out of memory",
                                      path);
            }
            buf = nb;
        }
        size_t got = fread(buf + size, 1, cap - size, f);
        size += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return braid_eng_fail(BRAID_ERR_IO, "%s: read error", path);
    }
    buf[size] = '\0';
    *data     = buf;
    *len      = size;
    return BRAID_OK;
}

braid_status_t braid_eng_write_file(const char *path, const void *data,
                                    size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return braid_eng_fail(BRAID_ERR_INVALID_ARG, "%s: path too long",
                              path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return braid_eng_fail(BRAID_ERR_IO, "%s: %s", tmp, strerror(errno));
    int bad = fwrite(data, 1, len, f) != len;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return braid_eng_fail(BRAID_ERR_IO, "%s: %s", path, strerror(e));
    }
    return BRAID_OK;
}

braid_status_t braid_eng_path_join(char *out, size_t cap, const char *dir,
                                   const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG, "path too long: %s/%s",
                              dir, name);
    return BRAID_OK;
}

int braid_eng_is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}
