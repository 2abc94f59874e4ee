/* Model configurations: presets and JSON files. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "util.h"

braid_status_t braid_gpt_config_check(const braid_gpt_config_t *c)
{
    /* Bounds keep every size product well inside size_t and int rows. */
    if (c->n_layer < 1 || c->n_layer > 256 || c->n_head < 1 ||
        c->n_embd < 1 || c->n_embd > 16384 || c->n_embd % c->n_head != 0 ||
        c->block_size < 1 || c->block_size > 65536 || c->vocab_size < 2 ||
        c->vocab_size > 1 << 20)
        return braid_train_error(BRAID_ERR_INVALID_ARG, "model configuration "
                                 "n_layer=%d n_head=%d n_embd=%d "
                                 "block_size=%d vocab_size=%d: need 1 <= "
                                 "n_layer <= 256, n_embd <= 16384 divisible "
                                 "by n_head, 1 <= block_size <= 65536, 2 <= "
                                 "vocab_size <= 1048576",
                                 c->n_layer, c->n_head, c->n_embd,
                                 c->block_size, c->vocab_size);
    return BRAID_OK;
}

braid_status_t braid_gpt_config_preset(braid_gpt_config_t *cfg,
                                       const char *name)
{
    if (strcmp(name, "tiny") == 0) {
        *cfg = (braid_gpt_config_t){.n_layer = 2, .n_head = 4, .n_embd = 64,
                                    .block_size = 64, .vocab_size = 256};
        return BRAID_OK;
    }
    /* dN: depth N, 64 channels per layer of depth, heads of 64 */
    char *end;
    errno = 0;
    long depth = name[0] == 'd' ? strtol(name + 1, &end, 10) : 0;
    if (name[0] == 'd' && end != name + 1 && *end == '\0' && errno == 0 &&
        depth >= 1 && depth <= 64) {
        *cfg = (braid_gpt_config_t){.n_layer = (int)depth,
                                    .n_head = (int)depth,
                                    .n_embd = 64 * (int)depth,
                                    .block_size = 1024, .vocab_size = 256};
        return BRAID_OK;
    }
    return braid_train_error(BRAID_ERR_INVALID_ARG, "unknown preset '%s': "
                             "use tiny or dN (N = 1..64 layers; d12 is "
                             "GPT-2 small's size)", name);
}

static char *read_small_file(const char *path, size_t limit)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char  *buf = malloc(limit + 1);
    size_t n   = buf != NULL ? fread(buf, 1, limit + 1, f) : 0;
    fclose(f);
    if (buf == NULL || n > limit) {
        free(buf);
        errno = EFBIG;
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

braid_status_t braid_gpt_config_json(braid_gpt_config_t *cfg,
                                     const char *path)
{
    static const char *const keys[] = {"n_layer", "n_head", "n_embd",
                                       "block_size", "vocab_size"};
    braid_gpt_config_t c = {.vocab_size = 256};
    int *fields[] = {&c.n_layer, &c.n_head, &c.n_embd, &c.block_size,
                     &c.vocab_size};
    braid_status_t st = BRAID_OK;
    char *text = read_small_file(path, 1 << 16);
    if (text == NULL)
        return braid_train_error(BRAID_ERR_IO, "model configuration %s: %s",
                                 path, strerror(errno));
    cJSON *root = cJSON_Parse(text);
    if (root == NULL || !cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        st = braid_train_error(BRAID_ERR_PARSE, "model configuration %s: not "
                               "a JSON object (at byte %ld)", path,
                               at != NULL && root == NULL ? (long)(at - text)
                                                          : 0L);
        goto out;
    }
    for (cJSON *it = root->child; it != NULL; it = it->next) {
        size_t k = 0;
        while (k < sizeof(keys) / sizeof(keys[0]) &&
               strcmp(it->string, keys[k]) != 0)
            k++;
        if (k == sizeof(keys) / sizeof(keys[0])) {
            st = braid_train_error(BRAID_ERR_PARSE, "model configuration %s: "
                                   "unknown key \"%s\" (known: n_layer, "
                                   "n_head, n_embd, block_size, vocab_size)",
                                   path, it->string);
            goto out;
        }
        double v = it->valuedouble;
        if (!cJSON_IsNumber(it) || v != (double)(int)v || v < 1 ||
            v > INT_MAX) {
            st = braid_train_error(BRAID_ERR_PARSE, "model configuration %s: "
                                   "\"%s\" must be a positive integer", path,
                                   it->string);
            goto out;
        }
        *fields[k] = (int)v;
    }
    for (size_t k = 0; k < 4; k++) {
        if (*fields[k] == 0) {
            st = braid_train_error(BRAID_ERR_PARSE, "model configuration %s: "
                                   "\"%s\" is missing", path, keys[k]);
            goto out;
        }
    }
    st = braid_gpt_config_check(&c);
    if (st == BRAID_OK)
        *cfg = c;
out:
    cJSON_Delete(root);
    free(text);
    return st;
}
