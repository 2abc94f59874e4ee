/* JSON through cJSON (Debian's libcjson), with checked getters.
 *
 * The getters fail with a message that names the file's role (`what`, e.g.
 * "config.json") and the key, so a bad config reads
 * "config.json: num_attention_heads: expected an integer, found a string". */
#ifndef BRAID_ENG_JSON_H
#define BRAID_ENG_JSON_H

#include <stdint.h>

#include <braid/braid.h>
#include <cjson/cJSON.h>

/* Parses the file at path into *root (free it with cJSON_Delete).  A syntax
 * error names the line and column. */
braid_status_t braid_eng_json_load(cJSON **root, const char *path);
/* Parses len bytes of text (need not be NUL-terminated); `what` names the
 * text in errors. */
braid_status_t braid_eng_json_parse(cJSON **root, const char *text, size_t len,
                                    const char *what);

/* obj[key] as an integer in [lo, hi].  If the key is missing: *out = dflt
 * when `required` is 0, an error otherwise.  A number with a fractional
 * part or beyond 2^53 is an error. */
braid_status_t braid_eng_json_int(int64_t *out, const cJSON *obj,
                                  const char *key, int required, int64_t dflt,
                                  int64_t lo, int64_t hi, const char *what);
/* obj[key] as a finite number in [lo, hi]; missing as for json_int. */
braid_status_t braid_eng_json_num(double *out, const cJSON *obj,
                                  const char *key, int required, double dflt,
                                  double lo, double hi, const char *what);
/* obj[key] as true/false; missing as for json_int. */
braid_status_t braid_eng_json_bool(int *out, const cJSON *obj, const char *key,
                                   int required, int dflt, const char *what);
/* obj[key] as a string (borrowed from obj), NULL when missing and not
 * required. */
braid_status_t braid_eng_json_str(const char **out, const cJSON *obj,
                                  const char *key, int required,
                                  const char *what);

/* Writes root to path (atomically: path.tmp, then rename), pretty-printed
 * or on one line, with a final newline. */
braid_status_t braid_eng_json_save(const char *path, const cJSON *root,
                                   int pretty);

#endif
