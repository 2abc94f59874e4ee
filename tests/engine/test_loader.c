/* braid-infer's checkpoint loader: a checkpoint written by
 * braid_infer_save_generated (single file and sharded) loads back to the
 * weights generate() makes, for every rank's shard; config.json problems and
 * checkpoints that do not fit the config are refused naming the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/safetensors.h"
#include "engine/common/util.h"
#include "engine/infer/config.h"
#include "engine/infer/weights.h"
#include "tests/unit/check.h"

static char dir[256];

static const char *in_dir(const char *sub, const char *name)
{
    static char buf[4][600];
    static int  k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s%s%s", dir, sub, name[0] ? "/" : "",
             name);
    return buf[k];
}

static int same_mat(const braid_eng_mat_t *a, const braid_eng_mat_t *b)
{
    return a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols &&
           memcmp(a->data, b->data, braid_eng_mat_bytes(a)) == 0;
}

static int same_weights(const braid_infer_weights_t *a,
                        const braid_infer_weights_t *b,
                        const braid_infer_config_t  *c)
{
    int ok = same_mat(&a->embed, &b->embed) && same_mat(&a->head, &b->head) &&
             !memcmp(a->norm, b->norm, (size_t)c->hidden * 4);
    for (int64_t l = 0; ok && l < c->layers; l++) {
        const braid_infer_layer_t *x = &a->layer[l], *y = &b->layer[l];
        ok = same_mat(&x->wq, &y->wq) && same_mat(&x->wk, &y->wk) &&
             same_mat(&x->wv, &y->wv) && same_mat(&x->wo, &y->wo) &&
             same_mat(&x->wg, &y->wg) && same_mat(&x->wu, &y->wu) &&
             same_mat(&x->wd, &y->wd) &&
             !memcmp(x->ln1, y->ln1, (size_t)c->hidden * 4) &&
             !memcmp(x->ln2, y->ln2, (size_t)c->hidden * 4) &&
             !memcmp(x->qn, y->qn, (size_t)c->head_dim * 4) &&
             !memcmp(x->kn, y->kn, (size_t)c->head_dim * 4);
    }
    return ok;
}

/* Loads sub/ with config.json as the config and returns the status. */
static braid_status_t try_load(const char *sub, int rank, int size,
                               braid_dtype_t dtype, braid_infer_weights_t *w,
                               braid_infer_config_t *c)
{
    braid_infer_split_t sp;
    braid_eng_st_t     *st = NULL;
    braid_status_t s = braid_infer_config_load(c, in_dir(sub, "config.json"));
    if (s == BRAID_OK)
        s = braid_infer_split(&sp, c, rank, size);
    if (s == BRAID_OK)
        s = braid_eng_st_open(&st, in_dir(sub, ""));
    if (s == BRAID_OK)
        s = braid_infer_weights_load(w, c, &sp, st, dtype);
    braid_eng_st_close(st);
    return s;
}

static void test_roundtrip(const char *sub, const char *preset,
                           braid_dtype_t dtype, int shards)
{
    braid_infer_config_t c, c2;
    braid_infer_config_preset(&c, preset);
    c.tied = shards > 1; /* both: tied sharded, untied single file */
    CHECK(braid_infer_save_generated(in_dir(sub, ""), &c, 5, dtype, shards) ==
              BRAID_OK,
          "save %s: %s", sub, braid_eng_error());
    if (shards > 1)
        CHECK(access(in_dir(sub, "model.safetensors.index.json"), F_OK) == 0 &&
                  access(in_dir(sub, "model-00002-of-00003.safetensors"),
                         F_OK) == 0,
              "%s: sharded files", sub);
    for (int size = 1; size <= 2; size++)
        for (int rank = 0; rank < size; rank++) {
            braid_infer_weights_t loaded, made;
            braid_infer_split_t   sp;
            CHECK(try_load(sub, rank, size, BRAID_DTYPE_COUNT, &loaded, &c2) ==
                      BRAID_OK,
                  "%s: load rank %d of %d: %s", sub, rank, size,
                  braid_eng_error());
            braid_infer_split(&sp, &c2, rank, size);
            braid_infer_weights_generate(&made, &c2, &sp, 5, dtype);
            CHECK(c2.tied == c.tied && c2.kv_heads == c.kv_heads &&
                      c2.rope_theta == c.rope_theta && c2.dtype == dtype,
                  "%s: config.json round trip", sub);
            CHECK(same_weights(&loaded, &made, &c2),
                  "%s: rank %d of %d: loaded weights differ from generated",
                  sub, rank, size);
            CHECK(loaded.bytes == made.bytes, "%s: byte counts", sub);
            braid_infer_weights_free(&loaded, &c2);
            braid_infer_weights_free(&made, &c2);
        }
    /* --dtype conversion at load: bf16 file kept as f32 */
    braid_infer_weights_t w;
    CHECK(try_load(sub, 0, 1, BRAID_F32, &w, &c2) == BRAID_OK &&
              w.layer[0].wq.dtype == BRAID_F32,
          "%s: load as f32", sub);
    braid_infer_weights_free(&w, &c2);
}

/* Writes a tiny checkpoint to sub/, lets edit() change the file's bytes
 * or config.json, and expects loading to fail with `want` in the message. */
static void expect_refused(const char *what, const char              *sub,
                           void (*edit)(const char *sub), const char *want)
{
    braid_infer_config_t c;
    braid_infer_config_preset(&c, "tiny");
    braid_infer_save_generated(in_dir(sub, ""), &c, 5, BRAID_BF16, 1);
    edit(sub);
    braid_infer_weights_t w;
    braid_status_t        s = try_load(sub, 0, 1, BRAID_DTYPE_COUNT, &w, &c);
    CHECK(s != BRAID_OK && strstr(braid_eng_error(), want),
          "%s: status %d, message '%s', expected '%s'", what, s,
          braid_eng_error(), want);
    if (s == BRAID_OK)
        braid_infer_weights_free(&w, &c);
}

/* Replaces `from` by `to` (same length) in a file. */
static void patch(const char *path, const char *from, const char *to)
{
    char  *buf;
    size_t len;
    if (braid_eng_read_file(&buf, &len, path) != BRAID_OK)
        return;
    char *p = memmem(buf, len, from, strlen(from));
    if (p)
        memcpy(p, to, strlen(to));
    else
        fprintf(stderr, "patch: '%s' not in %s\n", from, path);
    braid_eng_write_file(path, buf, len);
    free(buf);
}

static void set_config(const char *sub, const char *key, const char *value)
{
    char  *buf;
    size_t len;
    if (braid_eng_read_file(&buf, &len, in_dir(sub, "config.json")) !=
        BRAID_OK)
        return;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    cJSON_DeleteItemFromObject(j, key);
    if (value)
        cJSON_AddItemToObject(j, key, cJSON_Parse(value));
    char *text = cJSON_Print(j);
    braid_eng_write_file(in_dir(sub, "config.json"), text, strlen(text));
    free(text);
    cJSON_Delete(j);
}

#define MODEL(sub) in_dir(sub, "model.safetensors")
static void renamed(const char *s)
{
    patch(MODEL(s), "layers.1.mlp.up_proj", "layers.1.mlp.up_prej");
}
static void other_layer(const char *s)
{
    patch(MODEL(s), "layers.1.mlp.up_proj", "layers.7.mlp.up_proj");
}
static void as_i16(const char *s) { patch(MODEL(s), "\"BF16\"", "\"I16\" "); }
static void truncated(const char *s)
{
    char  *buf;
    size_t len;
    if (braid_eng_read_file(&buf, &len, MODEL(s)) == BRAID_OK) {
        braid_eng_write_file(MODEL(s), buf, len - 100);
        free(buf);
    }
}
static void bigger_ffn(const char *s)
{
    set_config(s, "intermediate_size", "192");
}
static void tied(const char *s)
{
    set_config(s, "tie_word_embeddings", "true");
}
static void more_layers(const char *s)
{
    set_config(s, "num_hidden_layers", "3");
}
static void llama(const char *s) { set_config(s, "model_type", "\"llama\""); }
static void scaling(const char *s)
{
    set_config(s, "rope_scaling", "{\"type\": \"yarn\"}");
}
static void no_hidden(const char *s) { set_config(s, "hidden_size", NULL); }
static void text_heads(const char *s)
{
    set_config(s, "num_attention_heads", "\"4\"");
}
static void odd_groups(const char *s)
{
    set_config(s, "num_key_value_heads", "3");
}

static void test_refusals(void)
{
    expect_refused("renamed tensor", "bad", renamed,
                   "'model.layers.1.mlp.up_proj.weight': missing");
    expect_refused("tensor of another layer", "bad", other_layer, "up_proj");
    expect_refused("integer dtype", "bad", as_i16,
                   "dtype I16, expected F32, BF16 or F16");
    expect_refused("truncated", "bad", truncated, "truncated file");
    expect_refused("config with another FFN size", "bad", bigger_ffn,
                   "'model.layers.0.mlp.gate_proj.weight' (");
    expect_refused("config with another FFN size, shapes", "bad", bigger_ffn,
                   "shape [128, 64], expected [192, 64]");
    expect_refused("tied config, different lm_head", "bad", tied,
                   "lm_head.weight row 0 differs");
    expect_refused("more layers than the file", "bad", more_layers,
                   "'model.layers.2.input_layernorm.weight': missing");
    expect_refused("llama config", "bad", llama, "model_type 'llama'");
    expect_refused("rope scaling", "bad", scaling,
                   "rope_scaling is not supported");
    expect_refused("no hidden_size", "bad", no_hidden,
                   "missing key 'hidden_size'");
    expect_refused("heads as a string", "bad", text_heads,
                   "num_attention_heads: expected an integer, found a string");
    expect_refused("heads not a multiple of kv heads", "bad", odd_groups,
                   "not a multiple of num_key_value_heads 3");

    braid_infer_config_t c;
    braid_infer_config_preset(&c, "tiny");
    /* An uneven split names the rank counts that work. */
    braid_infer_split_t sp;
    CHECK(braid_infer_split(&sp, &c, 0, 3) == BRAID_ERR_INVALID_ARG &&
              strstr(braid_eng_error(),
                     "num_key_value_heads 2 is not divisible by 3") &&
              strstr(braid_eng_error(), "work: 1, 2)"),
          "split: %s", braid_eng_error());
}

/* A file with an extra tensor, listed: the loader names it. */
static void test_extra_tensor(void)
{
    braid_infer_config_t c;
    braid_infer_config_preset(&c, "tiny");
    braid_infer_save_generated(in_dir("extra1", ""), &c, 5, BRAID_F32, 1);
    braid_eng_st_t *st;
    if (braid_eng_st_open(&st, in_dir("extra1", "")) != BRAID_OK)
        return;
    /* rewrite with every tensor plus one */
    size_t                n = braid_eng_st_count(st);
    braid_eng_st_entry_t *e = calloc(n + 1, sizeof(*e));
    for (size_t i = 0; i < n; i++) {
        const braid_eng_st_tensor_t *t = braid_eng_st_at(st, i);
        e[i].name = t->name, e[i].dtype = t->dtype, e[i].ndim = t->ndim;
        memcpy(e[i].shape, t->shape, sizeof(e[i].shape));
        e[i].data = t->data;
    }
    float one = 1;
    e[n] =
        (braid_eng_st_entry_t){"model.layers.0.self_attn.rotary_emb.inv_freq",
                               BRAID_F32,
                               1,
                               {1},
                               &one};
    braid_eng_st_save(in_dir("extra1", "model2.safetensors"), e, n + 1);
    free(e);
    braid_eng_st_close(st);
    rename(in_dir("extra1", "model2.safetensors"),
           in_dir("extra1", "model.safetensors"));
    braid_infer_weights_t w;
    CHECK(try_load("extra1", 0, 1, BRAID_DTYPE_COUNT, &w, &c) ==
                  BRAID_ERR_INVALID_ARG &&
              strstr(braid_eng_error(),
                     "'model.layers.0.self_attn.rotary_emb.inv_freq'") &&
              strstr(braid_eng_error(), "not part of a Qwen3 model"),
          "extra tensor: %s", braid_eng_error());
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/braid-loader-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip("single-bf16", "tiny", BRAID_BF16, 1);
    test_roundtrip("sharded-f16", "tiny", BRAID_F16, 3);
    test_roundtrip("single-f32", "tiny", BRAID_F32, 1);
    test_refusals();
    test_extra_tensor();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("engine-loader");
}
