/* Checkpoints: GPT-2 layout for the model, plus what resuming needs (see
 * ckpt.h). */
#include "ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/linalg.h"
#include "engine/common/safetensors.h"
#include "engine/common/util.h"

/* ----------------------------------------------------------------------------
 * tensors */

/* The shape a tensor has in a checkpoint. */
static int stored_shape(int64_t shape[2], const braid_gpt_tensor_t *t)
{
    shape[0] = t->conv1d ? t->shape[1] : t->shape[0];
    shape[1] = t->conv1d ? t->shape[0] : t->shape[1];
    return t->ndim;
}

static size_t largest_conv1d(const braid_gpt_t *m)
{
    size_t n = 0;
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].conv1d && m->tensors[i].numel > n)
            n = m->tensors[i].numel;
    return n;
}

/* A set of arrays laid out like model->params, stored together in one
 * file, array k's tensors named prefix[k] + the parameter's name. */
typedef struct {
    int         n;
    float      *base[2];
    const char *prefix[2];
} arrays_t;

static braid_status_t save_tensors(const char *path, const braid_gpt_t *m,
                                   const arrays_t *a)
{
    braid_eng_st_writer_t *w;
    char                   name[128];
    float *scratch = malloc(largest_conv1d(m) * sizeof(float) + 1);
    if (scratch == NULL)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "%s: out of memory", path);
    braid_status_t st = braid_eng_st_writer_new(&w, path);
    if (st != BRAID_OK) {
        free(scratch);
        return st;
    }
    st = braid_eng_st_writer_meta(w, "format", "pt");
    for (int k = 0; k < a->n; k++) {
        for (int i = 0; st == BRAID_OK && i < m->ntensors; i++) {
            int64_t shape[2];
            int     ndim = stored_shape(shape, &m->tensors[i]);
            snprintf(name, sizeof(name), "%s%s", a->prefix[k],
                     m->tensors[i].name);
            st = braid_eng_st_writer_add(w, name, BRAID_F32, ndim, shape);
        }
    }
    if (st == BRAID_OK)
        st = braid_eng_st_writer_map(w);
    for (int k = 0; st == BRAID_OK && k < a->n; k++) {
        for (int i = 0; i < m->ntensors; i++) {
            const braid_gpt_tensor_t *t   = &m->tensors[i];
            const float              *src = a->base[k] + t->offset;
            snprintf(name, sizeof(name), "%s%s", a->prefix[k], t->name);
            void *dst = braid_eng_st_writer_data(w, name);
            if (t->conv1d) {
                braid_eng_transpose(scratch, src, t->shape[0], t->shape[1]);
                src = scratch;
            }
            memcpy(dst, src, t->numel * sizeof(float)); /* may be unaligned */
        }
    }
    free(scratch);
    if (st != BRAID_OK) {
        braid_eng_st_writer_abort(w);
        return st;
    }
    return braid_eng_st_writer_finish(w);
}

static int known_name(const braid_gpt_t *m, const arrays_t *a,
                      const char *name)
{
    /* Hugging Face may store the tied LM head as well */
    if (strcmp(name, "lm_head.weight") == 0)
        return 1;
    for (int k = 0; k < a->n; k++) {
        size_t lp = strlen(a->prefix[k]);
        if (strncmp(name, a->prefix[k], lp) != 0)
            continue;
        for (int i = 0; i < m->ntensors; i++)
            if (strcmp(name + lp, m->tensors[i].name) == 0)
                return 1;
    }
    return 0;
}

static braid_status_t load_tensors(const braid_gpt_t *m, const arrays_t *a,
                                   const char *path)
{
    braid_eng_st_t *f = NULL;
    char            name[128];
    float          *scratch = malloc(largest_conv1d(m) * sizeof(float) + 1);
    if (scratch == NULL)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "%s: out of memory", path);
    braid_status_t st = braid_eng_st_open(&f, path);
    /* anything else in the file means it holds another model */
    for (size_t i = 0; st == BRAID_OK && i < braid_eng_st_count(f); i++) {
        const char *n = braid_eng_st_at(f, i)->name;
        if (!known_name(m, a, n))
            st = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                "%s: tensor '%s' is "
                                "not part of this model (%d layers, %d "
                                "channels)",
                                path, n, m->cfg.n_layer, m->cfg.n_embd);
    }
    for (int k = 0; k < a->n; k++) {
        for (int i = 0; st == BRAID_OK && i < m->ntensors; i++) {
            const braid_gpt_tensor_t    *t = &m->tensors[i];
            const braid_eng_st_tensor_t *ft;
            int64_t                      shape[2];
            int                          ndim = stored_shape(shape, t);
            snprintf(name, sizeof(name), "%s%s", a->prefix[k], t->name);
            st = braid_eng_st_expect(&ft, f, name, ndim, shape);
            if (st != BRAID_OK)
                break;
            int64_t rows = ndim == 2 ? shape[0] : 1, cols = shape[ndim - 1];
            float  *dst = t->conv1d ? scratch : a->base[k] + t->offset;
            st = braid_eng_st_read(dst, BRAID_F32, f, ft, 0, rows, 0, cols);
            if (st == BRAID_OK && t->conv1d)
                braid_eng_transpose(a->base[k] + t->offset, scratch, rows,
                                    cols);
        }
    }
    if (f != NULL)
        braid_eng_st_close(f);
    free(scratch);
    return st;
}

/* ----------------------------------------------------------------------------
 * JSON files */

static braid_status_t write_json(const char *path, cJSON *root)
{
    char *text = root != NULL ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "%s: out of memory", path);
    braid_status_t st = braid_eng_write_file(path, text, strlen(text));
    free(text);
    return st;
}

static braid_status_t save_config(const char               *path,
                                  const braid_gpt_config_t *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model_type", "gpt2");
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddNumberToObject(j, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(j, "n_positions", c->block_size);
    cJSON_AddNumberToObject(j, "n_embd", c->n_embd);
    cJSON_AddNumberToObject(j, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(j, "n_head", c->n_head);
    cJSON_AddNullToObject(j, "n_inner"); /* 4 n_embd */
    cJSON_AddStringToObject(j, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(j, "layer_norm_epsilon", 1e-5);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", 1);
    cJSON_AddNullToObject(j, "bos_token_id"); /* tokens are plain bytes */
    cJSON_AddNullToObject(j, "eos_token_id");
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    cJSON_AddStringToObject(j, "tokenizer", "bytes");
    return write_json(path, j);
}

braid_status_t braid_train_ckpt_config(braid_gpt_config_t *cfg,
                                       const char         *dir)
{
    char           path[4096];
    cJSON         *j;
    braid_status_t st =
        braid_eng_path_join(path, sizeof(path), dir, "config.json");
    if (st == BRAID_OK)
        st = braid_eng_json_load(&j, path);
    if (st != BRAID_OK)
        return st;
    st = braid_gpt_config_hf(cfg, j, path);
    cJSON_Delete(j);
    return st;
}

static braid_status_t save_state(const char                     *path,
                                 const braid_train_ckpt_state_t *s)
{
    char   buf[32];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "step", (double)s->step);
    cJSON_AddNumberToObject(j, "adam_t", (double)s->adam_t);
    /* 64-bit values as strings: JSON numbers are doubles */
    snprintf(buf, sizeof(buf), "%llu", s->seed);
    cJSON_AddStringToObject(j, "seed", buf);
    cJSON_AddNumberToObject(j, "batch", s->batch);
    cJSON_AddNumberToObject(j, "seq", s->seq);
    cJSON_AddNumberToObject(j, "data_bytes", (double)s->data_bytes);
    snprintf(buf, sizeof(buf), "%016" PRIx64, s->data_hash);
    cJSON_AddStringToObject(j, "data_hash", buf);
    cJSON_AddNumberToObject(j, "loss", s->loss);
    return write_json(path, j);
}

static braid_status_t load_state(braid_train_ckpt_state_t *s, const char *path)
{
    cJSON         *j;
    const char    *seed = NULL, *hash = NULL;
    int64_t        step, t, batch, seq, bytes;
    double         loss;
    braid_status_t st = braid_eng_json_load(&j, path);
    if (st != BRAID_OK)
        return st;
    if (st == BRAID_OK)
        st = braid_eng_json_int(&step, j, "step", 1, 0, 0, INT64_MAX, path);
    if (st == BRAID_OK)
        st = braid_eng_json_int(&t, j, "adam_t", 1, 0, 0, INT64_MAX, path);
    if (st == BRAID_OK)
        st = braid_eng_json_int(&batch, j, "batch", 1, 0, 1, 1 << 20, path);
    if (st == BRAID_OK)
        st = braid_eng_json_int(&seq, j, "seq", 1, 0, 1, 1 << 20, path);
    if (st == BRAID_OK)
        st = braid_eng_json_int(&bytes, j, "data_bytes", 1, 0, 0, INT64_MAX,
                                path);
    if (st == BRAID_OK)
        st = braid_eng_json_num(&loss, j, "loss", 0, 0, -1e30, 1e30, path);
    if (st == BRAID_OK)
        st = braid_eng_json_str(&seed, j, "seed", 1, path);
    if (st == BRAID_OK)
        st = braid_eng_json_str(&hash, j, "data_hash", 1, path);
    if (st == BRAID_OK) {
        char *e1, *e2;
        errno        = 0;
        s->seed      = strtoull(seed, &e1, 10);
        s->data_hash = strtoull(hash, &e2, 16);
        if (*seed == '\0' || *e1 != '\0' || *hash == '\0' || *e2 != '\0' ||
            errno != 0)
            st = braid_eng_fail(BRAID_ERR_PARSE,
                                "%s: seed \"%s\" or "
                                "data_hash \"%s\" is not a number",
                                path, seed, hash);
    }
    cJSON_Delete(j);
    if (st != BRAID_OK)
        return st;
    s->step       = (long)step;
    s->adam_t     = (long)t;
    s->batch      = (int)batch;
    s->seq        = (int)seq;
    s->data_bytes = (uint64_t)bytes;
    s->loss       = (float)loss;
    return BRAID_OK;
}

/* ----------------------------------------------------------------------------
 * checkpoints */

braid_status_t braid_train_ckpt_save(const char *dir, const braid_gpt_t *model,
                                     const braid_adamw_t            *opt,
                                     const braid_train_ckpt_state_t *state)
{
    char           path[4096];
    braid_status_t st;
    arrays_t       params = {1, {model->params}, {""}};
    arrays_t moments      = {2, {opt->m, opt->v}, {"exp_avg.", "exp_avg_sq."}};
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return braid_eng_fail(BRAID_ERR_IO, "checkpoint directory %s: %s", dir,
                              strerror(errno));
    /* train.json goes last, and a stale one first: until the new one is
     * there, the directory is not a complete checkpoint */
    st = braid_eng_path_join(path, sizeof(path), dir, "train.json");
    if (st == BRAID_OK && remove(path) != 0 && errno != ENOENT)
        st = braid_eng_fail(BRAID_ERR_IO, "%s: %s", path, strerror(errno));
    if (st == BRAID_OK)
        st = braid_eng_path_join(path, sizeof(path), dir, "config.json");
    if (st == BRAID_OK)
        st = save_config(path, &model->cfg);
    if (st == BRAID_OK)
        st = braid_eng_path_join(path, sizeof(path), dir, "model.safetensors");
    if (st == BRAID_OK)
        st = save_tensors(path, model, &params);
    if (st == BRAID_OK)
        st = braid_eng_path_join(path, sizeof(path), dir, "optim.safetensors");
    if (st == BRAID_OK)
        st = save_tensors(path, model, &moments);
    if (st == BRAID_OK)
        st = braid_eng_path_join(path, sizeof(path), dir, "train.json");
    if (st == BRAID_OK)
        st = save_state(path, state);
    return st != BRAID_OK ? braid_eng_wrap(st, "saving checkpoint %s", dir)
                          : BRAID_OK;
}

braid_status_t braid_train_ckpt_load(braid_gpt_t *model, braid_adamw_t *opt,
                                     braid_train_ckpt_state_t *state,
                                     const char               *dir)
{
    char           path[4096];
    arrays_t       params = {1, {model->params}, {""}};
    braid_status_t st =
        braid_eng_path_join(path, sizeof(path), dir, "model.safetensors");
    if (st == BRAID_OK)
        st = load_tensors(model, &params, path);
    if (st == BRAID_OK && opt != NULL) {
        arrays_t moments = {2, {opt->m, opt->v}, {"exp_avg.", "exp_avg_sq."}};
        st = braid_eng_path_join(path, sizeof(path), dir, "optim.safetensors");
        if (st == BRAID_OK)
            st = load_tensors(model, &moments, path);
    }
    if (st == BRAID_OK && state != NULL)
        st = braid_eng_path_join(path, sizeof(path), dir, "train.json");
    if (st == BRAID_OK && state != NULL)
        st = load_state(state, path);
    return st;
}
