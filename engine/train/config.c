/* Model configurations: presets and JSON files. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "gpt.h"
#include "util.h"

braid_status_t braid_gpt_config_check(const braid_gpt_config_t *c)
{
    /* Bounds keep every size product well inside size_t and int rows. */
    if (c->n_layer < 1 || c->n_layer > 256 || c->n_head < 1 || c->n_embd < 1 ||
        c->n_embd > 16384 || c->n_embd % c->n_head != 0 || c->block_size < 1 ||
        c->block_size > 65536 || c->vocab_size < 2 || c->vocab_size > 1 << 20)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "model configuration "
                              "n_layer=%d n_head=%d n_embd=%d "
                              "block_size=%d vocab_size=%d: need 1 <= "
                              "n_layer <= 256, n_embd <= 16384 divisible "
                              "by n_head, 1 <= block_size <= 65536, 2 <= "
                              "vocab_size <= 1048576",
                              c->n_layer, c->n_head, c->n_embd, c->block_size,
                              c->vocab_size);
    return BRAID_OK;
}

braid_status_t braid_gpt_config_preset(braid_gpt_config_t *cfg,
                                       const char         *name)
{
    if (strcmp(name, "tiny") == 0) {
        *cfg = (braid_gpt_config_t){.n_layer    = 2,
                                    .n_head     = 4,
                                    .n_embd     = 64,
                                    .block_size = 64,
                                    .vocab_size = 256};
        return BRAID_OK;
    }
    /* dN: depth N, 64 channels per layer of depth, heads of 64 */
    char *end;
    errno      = 0;
    long depth = name[0] == 'd' ? strtol(name + 1, &end, 10) : 0;
    if (name[0] == 'd' && end != name + 1 && *end == '\0' && errno == 0 &&
        depth >= 1 && depth <= 64) {
        *cfg = (braid_gpt_config_t){.n_layer    = (int)depth,
                                    .n_head     = (int)depth,
                                    .n_embd     = 64 * (int)depth,
                                    .block_size = 1024,
                                    .vocab_size = 256};
        return BRAID_OK;
    }
    return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                          "unknown preset '%s': "
                          "use tiny or dN (N = 1..64 layers; d12 is "
                          "GPT-2 small's size)",
                          name);
}

braid_status_t braid_gpt_config_from(braid_gpt_config_t *cfg, const cJSON *obj,
                                     const char *const keys[5],
                                     const char       *what)
{
    int64_t        v[5];
    braid_status_t st = BRAID_OK;
    /* vocab_size may be left out: bytes */
    for (int k = 0; k < 5 && st == BRAID_OK; k++)
        st = braid_eng_json_int(&v[k], obj, keys[k], k < 4, 256, 1, 1 << 30,
                                what);
    if (st != BRAID_OK)
        return st;
    braid_gpt_config_t c = {.n_layer    = (int)v[0],
                            .n_head     = (int)v[1],
                            .n_embd     = (int)v[2],
                            .block_size = (int)v[3],
                            .vocab_size = (int)v[4]};
    st                   = braid_gpt_config_check(&c);
    if (st == BRAID_OK)
        *cfg = c;
    return st;
}

braid_status_t braid_gpt_config_json(braid_gpt_config_t *cfg, const char *path)
{
    static const char *const keys[] = {"n_layer", "n_head", "n_embd",
                                       "block_size", "vocab_size"};
    cJSON                   *root;
    braid_status_t           st = braid_eng_json_load(&root, path);
    if (st != BRAID_OK)
        return st;
    if (!cJSON_IsObject(root)) {
        st = braid_eng_fail(BRAID_ERR_PARSE, "%s: not a JSON object", path);
        goto out;
    }
    /* a misspelt key would silently leave a default: refuse it */
    for (cJSON *it = root->child; it != NULL; it = it->next) {
        size_t k = 0;
        while (k < 5 && strcmp(it->string, keys[k]) != 0)
            k++;
        if (k == 5) {
            st = braid_eng_fail(BRAID_ERR_PARSE,
                                "%s: unknown key \"%s\" "
                                "(known: n_layer, n_head, n_embd, block_size, "
                                "vocab_size)",
                                path, it->string);
            goto out;
        }
    }
    st = braid_gpt_config_from(cfg, root, keys, path);
out:
    cJSON_Delete(root);
    return st;
}

braid_status_t braid_gpt_config_hf(braid_gpt_config_t *cfg, const cJSON *obj,
                                   const char *what)
{
    static const char *const keys[5] = {"n_layer", "n_head", "n_embd",
                                        "n_positions", "vocab_size"};
    const char              *type = NULL, *act = NULL;
    double                   eps;
    int64_t                  inner;
    int                      tied, scaled, by_layer, cross;
    braid_status_t st = braid_eng_json_str(&type, obj, "model_type", 1, what);
    if (st == BRAID_OK && strcmp(type, "gpt2") != 0)
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "%s: model_type "
                              "\"%s\", braid-train's models are \"gpt2\"",
                              what, type);
    braid_gpt_config_t c;
    if (st == BRAID_OK)
        st = braid_gpt_config_from(&c, obj, keys, what);
    /* GPT2Config's defaults where a key is absent */
    if (st == BRAID_OK)
        st = braid_eng_json_str(&act, obj, "activation_function", 0, what);
    if (st == BRAID_OK)
        st = braid_eng_json_num(&eps, obj, "layer_norm_epsilon", 0, 1e-5, 0, 1,
                                what);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(obj, "n_inner");
    if (st == BRAID_OK && in != NULL && !cJSON_IsNull(in))
        st =
            braid_eng_json_int(&inner, obj, "n_inner", 1, 0, 1, 1 << 30, what);
    else
        inner = 4 * (int64_t)c.n_embd;
    if (st == BRAID_OK)
        st =
            braid_eng_json_bool(&tied, obj, "tie_word_embeddings", 0, 1, what);
    if (st == BRAID_OK)
        st = braid_eng_json_bool(&scaled, obj, "scale_attn_weights", 0, 1,
                                 what);
    if (st == BRAID_OK)
        st = braid_eng_json_bool(
            &by_layer, obj, "scale_attn_by_inverse_layer_idx", 0, 0, what);
    if (st == BRAID_OK)
        st = braid_eng_json_bool(&cross, obj, "add_cross_attention", 0, 0,
                                 what);
    if (st != BRAID_OK)
        return st;
    const char *unsupported =
        act != NULL && strcmp(act, "gelu_new") != 0 &&
                strcmp(act, "gelu_pytorch_tanh") != 0
            ? "activation_function other than gelu_new"
        : fabs(eps - 1e-5) > 1e-12       ? "layer_norm_epsilon other than 1e-5"
        : inner != 4 * (int64_t)c.n_embd ? "n_inner other than 4 n_embd"
        : !tied                          ? "tie_word_embeddings: false"
        : !scaled                        ? "scale_attn_weights: false"
        : by_layer ? "scale_attn_by_inverse_layer_idx: true"
        : cross    ? "add_cross_attention: true"
                   : NULL;
    if (unsupported != NULL)
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "%s: %s is not "
                              "supported (braid-train's GPT)",
                              what, unsupported);
    *cfg = c;
    return BRAID_OK;
}
