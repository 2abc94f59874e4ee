/* Checked JSON getters over cJSON (see json.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/util.h"

braid_status_t braid_eng_json_parse(cJSON **root, const char *text, size_t len,
                                    const char *what)
{
    const char *end = NULL;
    cJSON      *j   = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) {
        /* cJSON points at where parsing stopped; count lines up to it. */
        size_t off  = end && end >= text ? (size_t)(end - text) : 0;
        size_t line = 1, col = 1;
        for (size_t i = 0; i < off && i < len; i++) {
            if (text[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: invalid JSON at line %zu, column %zu", what,
                              line, col);
    }
    *root = j;
    return BRAID_OK;
}

braid_status_t braid_eng_json_load(cJSON **root, const char *path)
{
    char          *text;
    size_t         len;
    braid_status_t st = braid_eng_read_file(&text, &len, path);
    if (st != BRAID_OK)
        return st;
    st = braid_eng_json_parse(root, text, len, path);
    free(text);
    return st;
}

static const char *kind(const cJSON *v)
{
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    return "an object";
}

/* obj[key] into *v if `is` accepts it; *v = NULL if it is missing and not
 * required.  `expected` names the type for the message. */
static braid_status_t lookup(const cJSON **v, const cJSON *obj,
                             const char *key, int required,
                             cJSON_bool (*is)(const cJSON *),
                             const char *expected, const char *what)
{
    *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key)
                             : NULL;
    if (!*v && required)
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: missing key '%s'", what,
                              key);
    if (*v && !is(*v))
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: %s: expected %s, found %s",
                              what, key, expected, kind(*v));
    return BRAID_OK;
}

braid_status_t braid_eng_json_int(int64_t *out, const cJSON *obj,
                                  const char *key, int required, int64_t dflt,
                                  int64_t lo, int64_t hi, const char *what)
{
    const cJSON   *v;
    braid_status_t st =
        lookup(&v, obj, key, required, cJSON_IsNumber, "an integer", what);
    double d = v ? v->valuedouble : (double)dflt;
    if (st != BRAID_OK)
        return st;
    if (d != floor(d) || fabs(d) > 9007199254740992.0)
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: %s: %g is not an integer",
                              what, key, d);
    if (v && (d < (double)lo || d > (double)hi))
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: %s: %.0f is out of range [%lld, %lld]",
                              what, key, d, (long long)lo, (long long)hi);
    *out = v ? (int64_t)d : dflt;
    return BRAID_OK;
}

braid_status_t braid_eng_json_num(double *out, const cJSON *obj,
                                  const char *key, int required, double dflt,
                                  double lo, double hi, const char *what)
{
    const cJSON   *v;
    braid_status_t st =
        lookup(&v, obj, key, required, cJSON_IsNumber, "a number", what);
    double d = v ? v->valuedouble : dflt;
    if (st != BRAID_OK)
        return st;
    if (v && (!isfinite(d) || d < lo || d > hi))
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: %s: %g is out of range [%g, %g]", what, key,
                              d, lo, hi);
    *out = d;
    return BRAID_OK;
}

braid_status_t braid_eng_json_bool(int *out, const cJSON *obj, const char *key,
                                   int required, int dflt, const char *what)
{
    const cJSON   *v;
    braid_status_t st =
        lookup(&v, obj, key, required, cJSON_IsBool, "true or false", what);
    if (st == BRAID_OK)
        *out = v ? cJSON_IsTrue(v) : dflt;
    return st;
}

braid_status_t braid_eng_json_str(const char **out, const cJSON *obj,
                                  const char *key, int required,
                                  const char *what)
{
    const cJSON   *v;
    braid_status_t st =
        lookup(&v, obj, key, required, cJSON_IsString, "a string", what);
    if (st == BRAID_OK)
        *out = v ? v->valuestring : NULL;
    return st;
}

braid_status_t braid_eng_json_save(const char *path, const cJSON *root,
                                   int pretty)
{
    char *text = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
    if (!text)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "%s: out of memory", path);
    size_t len  = strlen(text);
    char  *line = realloc(text, len + 2);
    if (!line) {
        free(text);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    line[len]         = '\n';
    braid_status_t st = braid_eng_write_file(path, line, len + 1);
    free(line);
    return st;
}
