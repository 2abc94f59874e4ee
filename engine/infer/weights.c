/* Loading, generating and saving the weights (see weights.h).  One table of
 * tensors (name, full shape, which part this rank holds, where it goes)
 * drives all three, so they cannot disagree about names or splits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/strmap.h"
#include "engine/common/util.h"
#include "engine/infer/gpt.h"
#include "engine/infer/weights.h"

typedef enum {
    PART_WHOLE, /* every rank holds all of it */
    PART_ROWS,  /* rows [start, start + count) */
    PART_COLS,  /* columns [start, start + count) */
} part_t;

typedef struct {
    char             name[96];
    int              ndim;
    int64_t          shape[2]; /* as in the checkpoint */
    part_t           part;
    int64_t          start, count;
    braid_eng_mat_t *mat; /* destination of a matrix, or */
    float          **vec; /* of a norm vector (f32) */
} spec_t;

typedef struct {
    spec_t *s;
    size_t  n;
} specs_t;

static void add_spec(specs_t *sp, const char *name, int ndim, int64_t rows,
                     int64_t cols, part_t part, int64_t start, int64_t count,
                     braid_eng_mat_t *mat, float **vec)
{
    spec_t *s = &sp->s[sp->n++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->ndim     = ndim;
    s->shape[0] = rows;
    s->shape[1] = cols;
    s->part     = part;
    s->start    = start;
    s->count    = count;
    s->mat      = mat;
    s->vec      = vec;
}

/* The model's tensors for rank sp (w may be NULL: names and shapes only). */
static braid_status_t build_specs(specs_t *out, const braid_infer_config_t *c,
                                  const braid_infer_split_t *sp,
                                  braid_infer_weights_t     *w)
{
    out->n = 0;
    out->s = calloc((size_t)c->layers * 11 + 3, sizeof(spec_t));
    if (!out->s)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    int64_t H = c->hidden, hd = c->head_dim, r = sp->rank;
    char    n[96];
#define W(field) (w ? &w->field : NULL)
    add_spec(out, "model.embed_tokens.weight", 2, c->vocab, H, PART_ROWS,
             sp->vocab0, sp->vocab_n, W(embed), NULL);
    for (int64_t l = 0; l < c->layers; l++) {
        braid_infer_layer_t *ly = w ? &w->layer[l] : NULL;
#define L(field) (ly ? &ly->field : NULL)
#define NAME(suffix)                                                          \
    (snprintf(n, sizeof(n), "model.layers.%lld.%s", (long long)l, suffix), n)
        add_spec(out, NAME("input_layernorm.weight"), 1, 1, H, PART_WHOLE, 0,
                 0, NULL, L(ln1));
        add_spec(out, NAME("self_attn.q_proj.weight"), 2, c->heads * hd, H,
                 PART_ROWS, r * sp->q_dim, sp->q_dim, L(wq), NULL);
        add_spec(out, NAME("self_attn.k_proj.weight"), 2, c->kv_heads * hd, H,
                 PART_ROWS, r * sp->kv_dim, sp->kv_dim, L(wk), NULL);
        add_spec(out, NAME("self_attn.v_proj.weight"), 2, c->kv_heads * hd, H,
                 PART_ROWS, r * sp->kv_dim, sp->kv_dim, L(wv), NULL);
        add_spec(out, NAME("self_attn.q_norm.weight"), 1, 1, hd, PART_WHOLE, 0,
                 0, NULL, L(qn));
        add_spec(out, NAME("self_attn.k_norm.weight"), 1, 1, hd, PART_WHOLE, 0,
                 0, NULL, L(kn));
        add_spec(out, NAME("self_attn.o_proj.weight"), 2, H, c->heads * hd,
                 PART_COLS, r * sp->q_dim, sp->q_dim, L(wo), NULL);
        add_spec(out, NAME("post_attention_layernorm.weight"), 1, 1, H,
                 PART_WHOLE, 0, 0, NULL, L(ln2));
        add_spec(out, NAME("mlp.gate_proj.weight"), 2, c->inter, H, PART_ROWS,
                 r * sp->inter, sp->inter, L(wg), NULL);
        add_spec(out, NAME("mlp.up_proj.weight"), 2, c->inter, H, PART_ROWS,
                 r * sp->inter, sp->inter, L(wu), NULL);
        add_spec(out, NAME("mlp.down_proj.weight"), 2, H, c->inter, PART_COLS,
                 r * sp->inter, sp->inter, L(wd), NULL);
#undef NAME
#undef L
    }
    add_spec(out, "model.norm.weight", 1, 1, H, PART_WHOLE, 0, 0, NULL,
             W(norm));
    if (!c->tied)
        add_spec(out, "lm_head.weight", 2, c->vocab, H, PART_ROWS, sp->vocab0,
                 sp->vocab_n, W(head), NULL);
#undef W
    return BRAID_OK;
}

/* The block of spec s this rank holds, as rows x cols of the [rows, cols]
 * view (a vector is one row). */
static void block_of(const spec_t *s, int64_t *row0, int64_t *nrows,
                     int64_t *col0, int64_t *ncols)
{
    *row0 = 0, *nrows = s->shape[0], *col0 = 0, *ncols = s->shape[1];
    if (s->part == PART_ROWS)
        *row0 = s->start, *nrows = s->count;
    else if (s->part == PART_COLS)
        *col0 = s->start, *ncols = s->count;
}

/* Allocates the destination of s for the block it holds: a norm vector on
 * the heap, a matrix in the weights' arena. */
static braid_status_t alloc_dest(braid_infer_weights_t *w, const spec_t *s,
                                 braid_dtype_t dtype)
{
    int64_t row0, nrows, col0, ncols;
    block_of(s, &row0, &nrows, &col0, &ncols);
    if (s->vec) {
        *s->vec = malloc((size_t)ncols * sizeof(float));
        w->bytes += (uint64_t)ncols * sizeof(float);
        return *s->vec ? BRAID_OK
                       : braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    braid_status_t st =
        braid_eng_mat_from(s->mat, &w->arena, dtype, nrows, ncols);
    w->bytes += braid_eng_mat_bytes(s->mat);
    return st;
}

/* One arena for all matrices; dtype_of(i) is the type spec i is kept in. */
static braid_status_t alloc_arena(braid_infer_weights_t *w,
                                  const specs_t         *specs,
                                  const braid_dtype_t   *types)
{
    size_t need = 0;
    for (size_t i = 0; i < specs->n; i++) {
        int64_t row0, nrows, col0, ncols;
        if (!specs->s[i].mat)
            continue;
        block_of(&specs->s[i], &row0, &nrows, &col0, &ncols);
        need += braid_eng_arena_need((size_t)(nrows * ncols) *
                                     braid_dtype_size(types[i]));
    }
    return braid_eng_arena_init(&w->arena, need);
}

static braid_status_t alloc_layers(braid_infer_weights_t      *w,
                                   const braid_infer_config_t *c)
{
    memset(w, 0, sizeof(*w));
    w->layer = calloc((size_t)c->layers, sizeof(*w->layer));
    return w->layer ? BRAID_OK
                    : braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
}

static void share_tied_head(braid_infer_weights_t      *w,
                            const braid_infer_config_t *c)
{
    if (c->tied)
        w->head = w->embed; /* same data; freed once, as embed */
}

/* ---------------------------------------------------------------- loading */

/* Every tensor of the checkpoint is one the model has, with its shape. */
static braid_status_t check_names(const specs_t              *specs,
                                  const braid_infer_config_t *c,
                                  const braid_eng_st_t       *st)
{
    for (size_t i = 0; i < specs->n; i++) {
        const spec_t                *s = &specs->s[i];
        const braid_eng_st_tensor_t *t;
        int64_t shape[2] = {s->ndim == 1 ? s->shape[1] : s->shape[0],
                            s->shape[1]};
        braid_status_t e =
            braid_eng_st_expect(&t, st, s->name, s->ndim, shape);
        if (e != BRAID_OK)
            return e;
    }
    braid_eng_strmap_t known;
    braid_status_t     e = braid_eng_strmap_init(&known, specs->n);
    if (e != BRAID_OK)
        return e;
    for (size_t i = 0; i < specs->n; i++)
        braid_eng_strmap_put(&known, specs->s[i].name,
                             strlen(specs->s[i].name), (int32_t)i, NULL);
    for (size_t i = 0; i < braid_eng_st_count(st) && e == BRAID_OK; i++) {
        const braid_eng_st_tensor_t *t = braid_eng_st_at(st, i);
        if (braid_eng_strmap_get(&known, t->name, strlen(t->name)) >= 0)
            continue;
        if (c->tied && strcmp(t->name, "lm_head.weight") == 0) {
            const braid_eng_st_tensor_t *u;
            int64_t                      shape[2] = {c->vocab, c->hidden};
            e = braid_eng_st_expect(&u, st, t->name, 2, shape);
            continue;
        }
        e = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                           "tensor '%s' (%s) is not part of a Qwen3 model "
                           "with this config (%lld layers%s)",
                           t->name, braid_eng_st_file_name(st, t->file),
                           (long long)c->layers,
                           c->tied ? ", tied embeddings" : "");
    }
    braid_eng_strmap_free(&known);
    return e;
}

/* A tied checkpoint that still carries lm_head.weight must carry a copy of
 * embed_tokens (this rank's rows are compared). */
static braid_status_t check_tied_copy(const braid_infer_weights_t *w,
                                      const braid_infer_split_t   *sp,
                                      const braid_eng_st_t        *st)
{
    const braid_eng_st_tensor_t *t = braid_eng_st_find(st, "lm_head.weight");
    if (!t)
        return BRAID_OK;
    int64_t H = w->embed.cols;
    float  *a = malloc((size_t)H * sizeof(float)),
          *b  = malloc((size_t)H * sizeof(float));
    braid_status_t e =
        a && b ? BRAID_OK
               : braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    for (int64_t r = 0; r < sp->vocab_n && e == BRAID_OK; r++) {
        e = braid_eng_st_read(a, BRAID_F32, st, t, sp->vocab0 + r, 1, 0, H);
        braid_eng_convert(b, BRAID_F32,
                          (const char *)w->embed.data +
                              (size_t)(r * H) *
                                  braid_dtype_size(w->embed.dtype),
                          w->embed.dtype, (size_t)H);
        if (e == BRAID_OK && memcmp(a, b, (size_t)H * sizeof(float)) != 0)
            e = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                               "config says tie_word_embeddings: true, but "
                               "lm_head.weight row %lld differs from "
                               "model.embed_tokens.weight",
                               (long long)(sp->vocab0 + r));
    }
    free(a);
    free(b);
    return e;
}

braid_status_t braid_infer_weights_load(braid_infer_weights_t      *w,
                                        const braid_infer_config_t *c,
                                        const braid_infer_split_t  *sp,
                                        const braid_eng_st_t       *st,
                                        braid_dtype_t               dtype)
{
    specs_t        specs = {0};
    braid_status_t e     = alloc_layers(w, c);
    if (e == BRAID_OK)
        e = build_specs(&specs, c, sp, w);
    if (e == BRAID_OK)
        e = check_names(&specs, c, st);
    braid_dtype_t *types =
        e == BRAID_OK ? calloc(specs.n, sizeof(*types)) : NULL;
    if (e == BRAID_OK && !types)
        e = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < specs.n && e == BRAID_OK; i++) {
        const braid_eng_st_tensor_t *t =
            braid_eng_st_find(st, specs.s[i].name);
        types[i] = specs.s[i].vec               ? BRAID_F32
                   : dtype == BRAID_DTYPE_COUNT ? t->dtype
                                                : dtype;
    }
    if (e == BRAID_OK)
        e = alloc_arena(w, &specs, types);
    for (size_t i = 0; i < specs.n && e == BRAID_OK; i++) {
        const spec_t                *s    = &specs.s[i];
        const braid_eng_st_tensor_t *t    = braid_eng_st_find(st, s->name);
        braid_dtype_t                keep = types[i];
        int64_t                      row0, nrows, col0, ncols;
        block_of(s, &row0, &nrows, &col0, &ncols);
        if (s->ndim == 1)
            row0 = 0, nrows = 1;
        e = alloc_dest(w, s, keep);
        if (e == BRAID_OK)
            e = braid_eng_st_read(s->vec ? (void *)*s->vec : s->mat->data,
                                  keep, st, t, row0, nrows, col0, ncols);
    }
    free(types);
    free(specs.s);
    if (e == BRAID_OK) {
        share_tied_head(w, c);
        if (c->tied)
            e = check_tied_copy(w, sp, st);
    }
    if (e != BRAID_OK)
        braid_infer_weights_free(w, c);
    return e;
}

/* ---------------------------------------------------------------- generating
 */

/* Block [row0, +nrows) x [col0, +ncols) of the seeded tensor s, stored as
 * dtype in dst (row-major, ncols a row).  Values are rounded to dtype
 * whatever the destination, so a norm kept in f32 equals the one a saved
 * bf16 checkpoint gives back. */
static void generate_block(void *dst, braid_dtype_t dst_type,
                           braid_dtype_t round_type, const spec_t *s,
                           uint64_t seed, int64_t row0, int64_t nrows,
                           int64_t col0, int64_t ncols, float *tmp)
{
    uint64_t  key   = braid_eng_mix64(seed ^ braid_eng_hash_str(s->name));
    int64_t   cols  = s->shape[1];
    int       vec   = s->ndim == 1;
    float     scale = vec ? 0.1f : sqrtf(3.0f / (float)cols);
    uint16_t *h     = (uint16_t *)(tmp + ncols);
    size_t    es    = braid_dtype_size(dst_type);
    for (int64_t r = 0; r < nrows; r++) {
        uint64_t base = key + (uint64_t)((row0 + r) * cols + col0);
        for (int64_t j = 0; j < ncols; j++)
            tmp[j] =
                (vec ? 1.0f : 0.0f) +
                scale * (2.0f * braid_eng_uniform(base + (uint64_t)j) - 1.0f);
        if (round_type != BRAID_F32) {
            braid_eng_convert(h, round_type, tmp, BRAID_F32, (size_t)ncols);
            braid_eng_convert(tmp, BRAID_F32, h, round_type, (size_t)ncols);
        }
        braid_eng_convert((char *)dst + (size_t)(r * ncols) * es, dst_type,
                          tmp, BRAID_F32, (size_t)ncols);
    }
}

braid_status_t braid_infer_weights_generate(braid_infer_weights_t      *w,
                                            const braid_infer_config_t *c,
                                            const braid_infer_split_t  *sp,
                                            uint64_t seed, braid_dtype_t dtype)
{
    specs_t        specs = {0};
    float         *tmp   = NULL;
    braid_status_t e     = alloc_layers(w, c);
    if (e == BRAID_OK)
        e = build_specs(&specs, c, sp, w);
    braid_dtype_t *types =
        e == BRAID_OK ? calloc(specs.n, sizeof(*types)) : NULL;
    if (e == BRAID_OK) {
        int64_t widest = c->hidden > c->inter ? c->hidden : c->inter;
        if (widest < c->heads * c->head_dim)
            widest = c->heads * c->head_dim;
        if (!(tmp = malloc((size_t)widest * 2 * sizeof(float))) || !types)
            e = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < specs.n && e == BRAID_OK; i++)
        types[i] = specs.s[i].vec ? BRAID_F32 : dtype;
    if (e == BRAID_OK)
        e = alloc_arena(w, &specs, types);
    for (size_t i = 0; i < specs.n && e == BRAID_OK; i++) {
        const spec_t *s = &specs.s[i];
        int64_t       row0, nrows, col0, ncols;
        block_of(s, &row0, &nrows, &col0, &ncols);
        braid_dtype_t keep = types[i];
        if ((e = alloc_dest(w, s, keep)) != BRAID_OK)
            break;
        generate_block(s->vec ? (void *)*s->vec : s->mat->data, keep, dtype, s,
                       seed, s->ndim == 1 ? 0 : row0, s->ndim == 1 ? 1 : nrows,
                       col0, ncols, tmp);
    }
    free(tmp);
    free(types);
    free(specs.s);
    if (e == BRAID_OK)
        share_tied_head(w, c);
    else
        braid_infer_weights_free(w, c);
    return e;
}

/* ---------------------------------------------------------------- saving */

static braid_status_t save_file(const char *path, const spec_t *s, size_t n,
                                const braid_infer_config_t *c, uint64_t seed,
                                braid_dtype_t dtype, float *tmp)
{
    braid_eng_st_writer_t *wr;
    braid_status_t         e = braid_eng_st_writer_new(&wr, path);
    if (e != BRAID_OK)
        return e;
    e = braid_eng_st_writer_meta(wr, "format", "pt");
    for (size_t i = 0; i < n && e == BRAID_OK; i++) {
        int64_t shape[2] = {s[i].ndim == 1 ? s[i].shape[1] : s[i].shape[0],
                            s[i].shape[1]};
        e = braid_eng_st_writer_add(wr, s[i].name, dtype, s[i].ndim, shape);
    }
    if (e == BRAID_OK)
        e = braid_eng_st_writer_map(wr);
    if (e != BRAID_OK) {
        braid_eng_st_writer_abort(wr);
        return e;
    }
    for (size_t i = 0; i < n; i++)
        generate_block(braid_eng_st_writer_data(wr, s[i].name), dtype, dtype,
                       &s[i], seed, 0, s[i].ndim == 1 ? 1 : s[i].shape[0], 0,
                       s[i].shape[1], tmp);
    (void)c;
    return braid_eng_st_writer_finish(wr);
}

braid_status_t braid_infer_save_generated(const char                 *dir,
                                          const braid_infer_config_t *c,
                                          uint64_t seed, braid_dtype_t dtype,
                                          int shards)
{
    braid_infer_split_t whole;
    specs_t             specs = {0};
    char                path[4096];
    float              *tmp = NULL;
    braid_status_t      e   = braid_infer_split(&whole, c, 0, 1);
    if (e != BRAID_OK)
        return e;
    if (mkdir(dir, 0755) != 0 && !braid_eng_is_dir(dir))
        return braid_eng_fail(BRAID_ERR_IO, "%s: cannot create directory",
                              dir);
    braid_infer_config_t stored = *c; /* torch_dtype: what the file holds */
    stored.dtype                = dtype;
    if ((e = braid_eng_path_join(path, sizeof(path), dir, "config.json")) ||
        (e = braid_infer_config_save(&stored, path)) ||
        (e = build_specs(&specs, c, &whole, NULL)))
        return e;
    int64_t widest = c->hidden > c->inter ? c->hidden : c->inter;
    if (widest < c->heads * c->head_dim)
        widest = c->heads * c->head_dim;
    if (!(tmp = malloc((size_t)widest * 2 * sizeof(float)))) {
        free(specs.s);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    if (shards <= 1) {
        if ((e = braid_eng_path_join(path, sizeof(path), dir,
                                     "model.safetensors")) == BRAID_OK)
            e = save_file(path, specs.s, specs.n, c, seed, dtype, tmp);
    } else {
        /* Consecutive tensors per file, cut at equal shares of the bytes. */
        uint64_t total = 0, done = 0;
        size_t   es = braid_dtype_size(dtype);
        for (size_t i = 0; i < specs.n; i++)
            total +=
                (uint64_t)(specs.s[i].shape[0] * specs.s[i].shape[1]) * es;
        const char **names   = calloc(specs.n, sizeof(*names));
        char(*files)[64]     = calloc((size_t)shards, sizeof(*files));
        const char **file_of = calloc(specs.n, sizeof(*file_of));
        if (!names || !files || !file_of)
            e = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
        size_t first = 0;
        for (int k = 0; k < shards && e == BRAID_OK; k++) {
            snprintf(files[k], sizeof(files[k]),
                     "model-%05d-of-%05d.safetensors", k + 1, shards);
            size_t   end  = first;
            uint64_t goal = total * (uint64_t)(k + 1) / (uint64_t)shards;
            while (end < specs.n &&
                   (k == shards - 1 || done < goal || end == first)) {
                done +=
                    (uint64_t)(specs.s[end].shape[0] * specs.s[end].shape[1]) *
                    es;
                names[end]   = specs.s[end].name;
                file_of[end] = files[k];
                end++;
            }
            if ((e = braid_eng_path_join(path, sizeof(path), dir, files[k])) ==
                BRAID_OK)
                e = save_file(path, specs.s + first, end - first, c, seed,
                              dtype, tmp);
            first = end;
        }
        if (e == BRAID_OK && (e = braid_eng_path_join(
                                  path, sizeof(path), dir,
                                  "model.safetensors.index.json")) == BRAID_OK)
            e = braid_eng_st_write_index(path, names, file_of, specs.n, total);
        free(names);
        free(files);
        free(file_of);
    }
    free(tmp);
    free(specs.s);
    return e;
}

braid_dtype_t braid_infer_weights_dtype(const braid_infer_weights_t *w)
{
    return w->gpt ? BRAID_F32 : w->layer[0].wq.dtype;
}

void braid_infer_weights_free(braid_infer_weights_t      *w,
                              const braid_infer_config_t *c)
{
    if (w->gpt) {
        braid_infer_gpt_weights_free(w);
        return;
    }
    if (w->layer)
        for (int64_t l = 0; l < c->layers; l++) {
            braid_infer_layer_t *ly = &w->layer[l];
            braid_eng_mat_free(&ly->wq), braid_eng_mat_free(&ly->wk);
            braid_eng_mat_free(&ly->wv), braid_eng_mat_free(&ly->wo);
            braid_eng_mat_free(&ly->wg), braid_eng_mat_free(&ly->wu);
            braid_eng_mat_free(&ly->wd);
            free(ly->ln1), free(ly->ln2), free(ly->qn), free(ly->kn);
        }
    free(w->layer);
    if (!c->tied)
        braid_eng_mat_free(&w->head);
    braid_eng_mat_free(&w->embed);
    free(w->norm);
    braid_eng_arena_free(&w->arena);
    memset(w, 0, sizeof(*w));
}
