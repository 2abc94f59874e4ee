/* config.json, presets and the tensor-parallel split (see config.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/util.h"
#include "engine/infer/config.h"
#include "engine/infer/gpt.h"

static braid_status_t check(const braid_infer_config_t *c, const char *what)
{
    if (c->heads % c->kv_heads != 0)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: num_attention_heads %lld is not a multiple "
                              "of num_key_value_heads %lld",
                              what, (long long)c->heads,
                              (long long)c->kv_heads);
    if (c->head_dim % 2 != 0)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: head_dim %lld is odd (RoPE rotates pairs)",
                              what, (long long)c->head_dim);
    return BRAID_OK;
}

/* eos_token_id of a config (a number or a list), added to c's. */
static void add_eos(braid_infer_config_t *c, const cJSON *j)
{
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    const cJSON *e;
    if (cJSON_IsNumber(eos) && c->n_eos < BRAID_INFER_MAX_EOS)
        c->eos[c->n_eos++] = (int32_t)eos->valuedouble;
    if (cJSON_IsArray(eos))
        cJSON_ArrayForEach(e, eos) if (cJSON_IsNumber(e) &&
                                       c->n_eos < BRAID_INFER_MAX_EOS)
            c->eos[c->n_eos++] = (int32_t)e->valuedouble;
}

braid_status_t braid_infer_config_add_eos(braid_infer_config_t *c,
                                          const char           *path)
{
    cJSON         *j;
    braid_status_t s = braid_eng_json_load(&j, path);
    if (s != BRAID_OK)
        return s;
    add_eos(c, j);
    cJSON_Delete(j);
    return BRAID_OK;
}

braid_status_t braid_infer_config_load(braid_infer_config_t *c,
                                       const char           *path)
{
    cJSON         *j;
    braid_status_t s = braid_eng_json_load(&j, path);
    if (s != BRAID_OK)
        return s;
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", path);
    const int64_t big = (int64_t)1 << 31;
    const char   *mt = NULL, *act = NULL, *dt = NULL;
    int64_t       hd_default = 0;
    int           bias = 0, sliding = 0;
    if ((s = braid_eng_json_str(&mt, j, "model_type", 0, path)) != BRAID_OK)
        goto out;
    if (mt && strcmp(mt, "gpt2") == 0) {
        if ((s = braid_infer_gpt_config(c, j, path)) == BRAID_OK)
            add_eos(c, j);
        goto out;
    }
    if (mt && strcmp(mt, "qwen3") != 0) {
        s = braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                           "%s: model_type '%s' is not supported (qwen3, "
                           "gpt2)",
                           path, mt);
        goto out;
    }
    if ((s = braid_eng_json_int(&c->hidden, j, "hidden_size", 1, 0, 1, big,
                                path)) ||
        (s = braid_eng_json_int(&c->layers, j, "num_hidden_layers", 1, 0, 1,
                                4096, path)) ||
        (s = braid_eng_json_int(&c->heads, j, "num_attention_heads", 1, 0, 1,
                                65536, path)) ||
        (s = braid_eng_json_int(&c->kv_heads, j, "num_key_value_heads", 0,
                                c->heads, 1, 65536, path)))
        goto out;
    hd_default = c->hidden / c->heads;
    if ((s = braid_eng_json_int(&c->head_dim, j, "head_dim", 0, hd_default, 2,
                                65536, path)) ||
        (s = braid_eng_json_int(&c->inter, j, "intermediate_size", 1, 0, 1,
                                big, path)) ||
        (s = braid_eng_json_int(&c->vocab, j, "vocab_size", 1, 0, 1, big,
                                path)) ||
        (s = braid_eng_json_int(&c->max_pos, j, "max_position_embeddings", 0,
                                32768, 1, big, path)) ||
        (s = braid_eng_json_num(&c->rope_theta, j, "rope_theta", 0, 10000.0,
                                1e-3, 1e12, path)) ||
        (s = braid_eng_json_num(&c->rms_eps, j, "rms_norm_eps", 0, 1e-6, 0, 1,
                                path)) ||
        (s = braid_eng_json_bool(&c->tied, j, "tie_word_embeddings", 0, 0,
                                 path)) ||
        (s = braid_eng_json_bool(&bias, j, "attention_bias", 0, 0, path)) ||
        (s = braid_eng_json_bool(&sliding, j, "use_sliding_window", 0, 0,
                                 path)) ||
        (s = braid_eng_json_str(&act, j, "hidden_act", 0, path)) ||
        (s = braid_eng_json_str(&dt, j, "torch_dtype", 0, path)))
        goto out;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    const char  *unsupported = bias      ? "attention_bias: true"
                               : sliding ? "use_sliding_window: true"
                               : (act && strcmp(act, "silu") != 0)
                                   ? "hidden_act other than silu"
                               : (rs && !cJSON_IsNull(rs)) ? "rope_scaling"
                                                           : NULL;
    if (unsupported) {
        s = braid_eng_fail(BRAID_ERR_NOT_SUPPORTED, "%s: %s is not supported",
                           path, unsupported);
        goto out;
    }
    c->dtype = !dt || strcmp(dt, "bfloat16") == 0 ? BRAID_BF16
               : strcmp(dt, "float16") == 0       ? BRAID_F16
                                                  : BRAID_F32;
    add_eos(c, j);
    s = check(c, path);
out:
    cJSON_Delete(j);
    return s;
}

braid_status_t braid_infer_config_preset(braid_infer_config_t *c,
                                         const char           *name)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    if (strcmp(name, "tiny") == 0) {
        /* For tests: grouped-query (2 query heads per kv head), untied,
         * splits over 1 or 2 ranks. */
        c->hidden = 64, c->layers = 2, c->heads = 4, c->kv_heads = 2;
        c->head_dim = 16, c->inter = 128, c->vocab = 300, c->max_pos = 512;
        c->rope_theta = 10000.0, c->rms_eps = 1e-6, c->tied = 0;
        c->dtype = BRAID_F32;
        return BRAID_OK;
    }
    if (strcmp(name, "qwen3-0.6b") == 0) {
        /* Qwen/Qwen3-0.6B's config.json */
        c->hidden = 1024, c->layers = 28, c->heads = 16, c->kv_heads = 8;
        c->head_dim = 128, c->inter = 3072, c->vocab = 151936;
        c->max_pos = 40960, c->rope_theta = 1000000.0, c->rms_eps = 1e-6;
        c->tied = 1, c->dtype = BRAID_BF16;
        return BRAID_OK;
    }
    return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                          "unknown preset '%s' (tiny, qwen3-0.6b)", name);
}

braid_status_t braid_infer_config_save(const braid_infer_config_t *c,
                                       const char                 *path)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(
        j, "architectures",
        cJSON_CreateStringArray((const char *[]){"Qwen3ForCausalLM"}, 1));
    cJSON_AddStringToObject(j, "model_type", "qwen3");
    cJSON_AddNumberToObject(j, "hidden_size", (double)c->hidden);
    cJSON_AddNumberToObject(j, "num_hidden_layers", (double)c->layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", (double)c->heads);
    cJSON_AddNumberToObject(j, "num_key_value_heads", (double)c->kv_heads);
    cJSON_AddNumberToObject(j, "head_dim", (double)c->head_dim);
    cJSON_AddNumberToObject(j, "intermediate_size", (double)c->inter);
    cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab);
    cJSON_AddNumberToObject(j, "max_position_embeddings", (double)c->max_pos);
    cJSON_AddNumberToObject(j, "rope_theta", c->rope_theta);
    cJSON_AddNumberToObject(j, "rms_norm_eps", c->rms_eps);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", c->tied);
    cJSON_AddBoolToObject(j, "attention_bias", 0);
    cJSON_AddStringToObject(j, "hidden_act", "silu");
    cJSON_AddStringToObject(j, "torch_dtype",
                            c->dtype == BRAID_BF16  ? "bfloat16"
                            : c->dtype == BRAID_F16 ? "float16"
                                                    : "float32");
    if (c->n_eos == 1)
        cJSON_AddNumberToObject(j, "eos_token_id", c->eos[0]);
    braid_status_t s = braid_eng_json_save(path, j, 1);
    cJSON_Delete(j);
    return s;
}

static int64_t gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a         = b;
        b         = t;
    }
    return a;
}

braid_status_t braid_infer_split(braid_infer_split_t        *sp,
                                 const braid_infer_config_t *c, int rank,
                                 int size)
{
    int gpt = c->arch == BRAID_INFER_GPT2; /* its names in the message */
    const char *what = c->kv_heads % size ? "num_key_value_heads"
                       : c->heads % size  ? "num_attention_heads"
                       : c->inter % size  ? "intermediate_size"
                                          : NULL;
    if (what) {
        int64_t g = gcd(gcd(c->heads, c->kv_heads), c->inter);
        char    ok[256];
        size_t  k = 0;
        for (int64_t d = 1; d <= g && k < sizeof(ok) - 16; d++)
            if (g % d == 0)
                k += (size_t)snprintf(ok + k, sizeof(ok) - k, "%s%lld",
                                      k ? ", " : "", (long long)d);
        int64_t v = !strcmp(what, "num_key_value_heads")   ? c->kv_heads
                    : !strcmp(what, "num_attention_heads") ? c->heads
                                                           : c->inter;
        if (gpt) /* kv_heads = heads; heads dividing makes 4 n_embd do */
            what = "n_head";
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "tensor parallelism over %d ranks: %s %lld is "
                              "not divisible by %d (rank counts that work: "
                              "%s)",
                              size, what, (long long)v, size, ok);
    }
    sp->rank        = rank;
    sp->size        = size;
    sp->heads       = c->heads / size;
    sp->kv_heads    = c->kv_heads / size;
    sp->q_dim       = sp->heads * c->head_dim;
    sp->kv_dim      = sp->kv_heads * c->head_dim;
    sp->inter       = c->inter / size;
    sp->vocab_chunk = (c->vocab + size - 1) / size;
    sp->vocab0      = sp->vocab_chunk * rank;
    if (sp->vocab0 > c->vocab)
        sp->vocab0 = c->vocab;
    sp->vocab_n = c->vocab - sp->vocab0 < sp->vocab_chunk
                      ? c->vocab - sp->vocab0
                      : sp->vocab_chunk;
    return BRAID_OK;
}

uint64_t braid_infer_bytes_per_token(const braid_infer_config_t *c,
                                     const braid_infer_split_t  *sp,
                                     braid_dtype_t               dtype)
{
    if (c->arch == BRAID_INFER_GPT2)
        return braid_infer_gpt_bytes_per_token(c, sp);
    uint64_t es = braid_dtype_size(dtype), H = (uint64_t)c->hidden;
    uint64_t per_layer = H * (uint64_t)(2 * sp->q_dim + 2 * sp->kv_dim) +
                         3 * H * (uint64_t)sp->inter;
    uint64_t norms = 4 * (2 * H + 2 * (uint64_t)c->head_dim);
    return (uint64_t)c->layers * (per_layer * es + norms) +
           (uint64_t)sp->vocab_n * H * es + H * es + 4 * H;
}
