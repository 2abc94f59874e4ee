/* safetensors reader: files mapped, everything validated up front (see
 * safetensors.h; the writer is safetensors_write.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/safetensors.h"
#include "engine/common/st_types.h"
#include "engine/common/strmap.h"
#include "engine/common/util.h"

/* The reference implementation refuses headers above 100 MB too. */
#define ST_MAX_HEADER  (100u << 20)
#define ST_INDEX_NAME  "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

typedef struct {
    char          *path;
    unsigned char *map;
    size_t         size;
    size_t         data_off; /* 8 + header length */
} st_file_t;

struct braid_eng_st {
    st_file_t             *files;
    int                    nfiles;
    braid_eng_st_tensor_t *tensors;
    size_t                 n, cap;
    braid_eng_strmap_t     by_name;
    cJSON                 *meta; /* first file's __metadata__, or NULL */
};

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "",
                              (long long)shape[d]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

/* ---------------------------------------------------------------- reading */

static int by_offset(const void *a, const void *b)
{
    const braid_eng_st_tensor_t *x = a, *y = b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static braid_status_t add_tensor(braid_eng_st_t              *st,
                                 const braid_eng_st_tensor_t *t)
{
    if (braid_eng_grow((void **)&st->tensors, &st->cap, st->n + 1,
                       sizeof(*st->tensors)))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    st->tensors[st->n++] = *t;
    return BRAID_OK;
}

/* One header entry -> *t (name not set).  `path` and `name` for messages. */
static braid_status_t parse_entry(braid_eng_st_tensor_t *t, const cJSON *e,
                                  const char *path, const char *name,
                                  const unsigned char *data, size_t data_size)
{
    const char    *dt;
    braid_status_t st;
    char           what[512];
    snprintf(what, sizeof(what), "%s: tensor '%s'", path, name);
    if (!cJSON_IsObject(e))
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: expected an object", what);
    if ((st = braid_eng_json_str(&dt, e, "dtype", 1, what)) != BRAID_OK)
        return st;
    if (braid_eng_st_type_parse(dt, &t->elem_size, &t->dtype) != 0)
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: unknown dtype '%s'", what,
                              dt);
    snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", dt);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(shape))
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: missing shape array",
                              what);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > BRAID_ENG_ST_MAX_DIMS)
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: %d dimensions, at most %d supported", what,
                              ndim, BRAID_ENG_ST_MAX_DIMS);
    t->ndim  = ndim;
    t->numel = 1;
    const cJSON *d;
    int          k = 0;
    cJSON_ArrayForEach(d, shape)
    {
        double v = cJSON_IsNumber(d) ? d->valuedouble : -1;
        if (v < 0 || v != (double)(int64_t)v || v > 9007199254740992.0)
            return braid_eng_fail(BRAID_ERR_PARSE,
                                  "%s: shape entry %d is not a non-negative "
                                  "integer",
                                  what, k);
        t->shape[k++] = (int64_t)v;
        if (v > 0 && t->numel > UINT64_MAX / 16 / (uint64_t)v)
            return braid_eng_fail(BRAID_ERR_PARSE, "%s: shape too large",
                                  what);
        t->numel *= (uint64_t)v;
    }

    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    const cJSON *b    = cJSON_GetArrayItem(offs, 0),
                *en   = cJSON_GetArrayItem(offs, 1);
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !cJSON_IsNumber(b) || !cJSON_IsNumber(en) || b->valuedouble < 0 ||
        en->valuedouble < b->valuedouble ||
        b->valuedouble != (double)(uint64_t)b->valuedouble ||
        en->valuedouble != (double)(uint64_t)en->valuedouble)
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: data_offsets must be [begin, end] with "
                              "0 <= begin <= end",
                              what);
    uint64_t begin = (uint64_t)b->valuedouble, end = (uint64_t)en->valuedouble;
    t->nbytes = end - begin;
    if (t->nbytes != t->numel * t->elem_size) {
        char sh[256];
        shape_str(sh, sizeof(sh), t->ndim, t->shape);
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: data_offsets [%llu, %llu] hold %llu bytes, "
                              "but %s %s needs %llu (wrong dtype or shape?)",
                              what, (unsigned long long)begin,
                              (unsigned long long)end,
                              (unsigned long long)t->nbytes, t->dtype_name, sh,
                              (unsigned long long)(t->numel * t->elem_size));
    }
    if (end > data_size)
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: ends at byte %llu of the data section, but "
                              "the file holds only %zu bytes of data: "
                              "truncated file",
                              what, (unsigned long long)end, data_size);
    t->data = data + begin;
    return BRAID_OK;
}

/* Maps one .safetensors file and appends its tensors (sorted by offset). */
static braid_status_t open_file(braid_eng_st_t *st, const char *path)
{
    st_file_t *nf = realloc(st->files, (size_t)(st->nfiles + 1) * sizeof(*nf));
    if (!nf)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    st->files    = nf;
    st_file_t *f = &st->files[st->nfiles];
    memset(f, 0, sizeof(*f));
    if (!(f->path = strdup(path)))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    st->nfiles++;
    int fileno = st->nfiles - 1;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return braid_eng_fail(BRAID_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return braid_eng_fail(BRAID_ERR_IO, "%s: not a regular file", path);
    }
    f->size = (size_t)sb.st_size;
    if (f->size < 8) {
        close(fd);
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: %zu bytes, too short for a safetensors "
                              "header",
                              path, f->size);
    }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return braid_eng_fail(BRAID_ERR_IO, "%s: mmap: %s", path,
                              strerror(errno));
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | f->map[i];
    if (hlen > ST_MAX_HEADER || hlen > f->size - 8)
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: header length %llu does not fit in the "
                              "file (%zu bytes): truncated or not a "
                              "safetensors file",
                              path, (unsigned long long)hlen, f->size);
    f->data_off = 8 + (size_t)hlen;
    if (hlen == 0 || f->map[8] != '{')
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: header does not start with '{': not a "
                              "safetensors file",
                              path);

    cJSON         *hdr;
    braid_status_t s = braid_eng_json_parse(&hdr, (const char *)f->map + 8,
                                            (size_t)hlen, path);
    if (s != BRAID_OK)
        return braid_eng_wrap(s, "header");
    if (!cJSON_IsObject(hdr)) {
        cJSON_Delete(hdr);
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: header is not an object",
                              path);
    }
    const unsigned char *data      = f->map + f->data_off;
    size_t               data_size = f->size - f->data_off;
    size_t               first     = st->n;
    const cJSON         *e;
    cJSON_ArrayForEach(e, hdr)
    {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e)) {
                s = braid_eng_fail(BRAID_ERR_PARSE,
                                   "%s: __metadata__ is not an object", path);
                break;
            }
            if (fileno == 0 && !st->meta &&
                !(st->meta = cJSON_Duplicate(e, 1))) {
                s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
                break;
            }
            continue;
        }
        braid_eng_st_tensor_t t;
        memset(&t, 0, sizeof(t));
        t.file = fileno;
        if ((s = parse_entry(&t, e, path, e->string, data, data_size)) !=
            BRAID_OK)
            break;
        if (!(t.name = strdup(e->string))) {
            s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
            break;
        }
        if ((s = add_tensor(st, &t)) != BRAID_OK) {
            free((char *)t.name);
            break;
        }
    }
    cJSON_Delete(hdr);
    if (s != BRAID_OK)
        return s;

    /* Packed: sorted by offset, each tensor starts where the previous one
     * ended, and the last ends at the end of the file. */
    braid_eng_st_tensor_t *ts = st->tensors + first;
    size_t                 nt = st->n - first;
    qsort(ts, nt, sizeof(*ts), by_offset);
    const unsigned char *at = data;
    for (size_t i = 0; i < nt; i++) {
        if (ts[i].data != at)
            return braid_eng_fail(BRAID_ERR_PARSE,
                                  "%s: tensor '%s' starts at byte %zu of the "
                                  "data section, expected %zu: tensors "
                                  "overlap or leave a gap",
                                  path, ts[i].name,
                                  (size_t)(ts[i].data - data),
                                  (size_t)(at - data));
        at += ts[i].nbytes;
    }
    if ((size_t)(at - data) != data_size)
        return braid_eng_fail(BRAID_ERR_PARSE,
                              "%s: %zu bytes after the last tensor's data: "
                              "the header does not describe the whole file",
                              path, data_size - (size_t)(at - data));
    return BRAID_OK;
}

/* Fills st->by_name; duplicate names (within or across files) fail. */
static braid_status_t index_names(braid_eng_st_t *st)
{
    braid_status_t s = braid_eng_strmap_init(&st->by_name, st->n);
    if (s != BRAID_OK)
        return s;
    for (size_t i = 0; i < st->n; i++) {
        int32_t     old;
        const char *nm = st->tensors[i].name;
        if (braid_eng_strmap_put(&st->by_name, nm, strlen(nm), (int32_t)i,
                                 &old) != BRAID_OK)
            return braid_eng_fail(BRAID_ERR_PARSE,
                                  "tensor '%s' appears twice (in %s and %s)",
                                  nm, st->files[st->tensors[old].file].path,
                                  st->files[st->tensors[i].file].path);
    }
    return BRAID_OK;
}

/* A weight_map file name must stay inside the index's directory. */
static int safe_name(const char *f)
{
    return f[0] && f[0] != '/' && strstr(f, "..") == NULL;
}

static braid_status_t open_index(braid_eng_st_t *st, const char *index)
{
    cJSON         *root;
    braid_status_t s = braid_eng_json_load(&root, index);
    if (s != BRAID_OK)
        return s;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return braid_eng_fail(BRAID_ERR_PARSE, "%s: no weight_map object",
                              index);
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", index);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");

    /* Open each file once, in the order the index first names them. */
    const cJSON *e;
    cJSON_ArrayForEach(e, map)
    {
        if (!cJSON_IsString(e) || !safe_name(e->valuestring)) {
            s = braid_eng_fail(BRAID_ERR_PARSE,
                               "%s: weight_map['%s'] must be a file name in "
                               "the index's directory",
                               index, e->string);
            goto out;
        }
        int seen = 0;
        for (const cJSON *p = map->child; p != e && !seen; p = p->next)
            seen = strcmp(p->valuestring, e->valuestring) == 0;
        if (seen)
            continue;
        char path[4096];
        if ((s = braid_eng_path_join(path, sizeof(path), dir,
                                     e->valuestring)) != BRAID_OK ||
            (s = open_file(st, path)) != BRAID_OK)
            goto out;
    }
    if ((s = index_names(st)) != BRAID_OK)
        goto out;
    /* Both directions: the index's every entry is where it says, and every
     * tensor of every file is in the index. */
    cJSON_ArrayForEach(e, map)
    {
        const braid_eng_st_tensor_t *t = braid_eng_st_find(st, e->string);
        char                         want[4096];
        if ((s = braid_eng_path_join(want, sizeof(want), dir,
                                     e->valuestring)) != BRAID_OK)
            goto out;
        if (!t || strcmp(st->files[t->file].path, want) != 0) {
            s = braid_eng_fail(
                BRAID_ERR_PARSE, "%s: lists tensor '%s' in %s, but %s", index,
                e->string, e->valuestring,
                t ? "it is in another file" : "that file has no such tensor");
            goto out;
        }
    }
    for (size_t i = 0; i < st->n; i++)
        if (!cJSON_GetObjectItemCaseSensitive(map, st->tensors[i].name)) {
            s = braid_eng_fail(BRAID_ERR_PARSE,
                               "%s: tensor '%s' is not in the index %s",
                               st->files[st->tensors[i].file].path,
                               st->tensors[i].name, index);
            goto out;
        }
out:
    cJSON_Delete(root);
    return s;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

braid_status_t braid_eng_st_open(braid_eng_st_t **out, const char *path)
{
    braid_eng_st_t *st = calloc(1, sizeof(*st));
    if (!st)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t s;
    char           buf[4096];
    if (braid_eng_is_dir(path)) {
        if ((s = braid_eng_path_join(buf, sizeof(buf), path, ST_INDEX_NAME)) !=
            BRAID_OK)
            goto fail;
        if (access(buf, F_OK) == 0) {
            s = open_index(st, buf);
        } else {
            if ((s = braid_eng_path_join(buf, sizeof(buf), path,
                                         ST_SINGLE_NAME)) != BRAID_OK)
                goto fail;
            if (access(buf, F_OK) != 0) {
                s = braid_eng_fail(BRAID_ERR_NOT_FOUND,
                                   "%s: neither %s nor %s found", path,
                                   ST_INDEX_NAME, ST_SINGLE_NAME);
                goto fail;
            }
            if ((s = open_file(st, buf)) == BRAID_OK)
                s = index_names(st);
        }
    } else if (ends_with(path, ".json")) {
        s = open_index(st, path);
    } else if ((s = open_file(st, path)) == BRAID_OK) {
        s = index_names(st);
    }
    if (s != BRAID_OK)
        goto fail;
    *out = st;
    return BRAID_OK;
fail:
    braid_eng_st_close(st);
    return s;
}

void braid_eng_st_close(braid_eng_st_t *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->nfiles; i++) {
        if (st->files[i].map)
            munmap(st->files[i].map, st->files[i].size);
        free(st->files[i].path);
    }
    for (size_t i = 0; i < st->n; i++)
        free((char *)st->tensors[i].name);
    braid_eng_strmap_free(&st->by_name);
    cJSON_Delete(st->meta);
    free(st->files);
    free(st->tensors);
    free(st);
}

size_t braid_eng_st_count(const braid_eng_st_t *st) { return st->n; }

const braid_eng_st_tensor_t *braid_eng_st_at(const braid_eng_st_t *st,
                                             size_t                i)
{
    return i < st->n ? &st->tensors[i] : NULL;
}

const braid_eng_st_tensor_t *braid_eng_st_find(const braid_eng_st_t *st,
                                               const char           *name)
{
    int32_t i = braid_eng_strmap_get(&st->by_name, name, strlen(name));
    return i < 0 ? NULL : &st->tensors[i];
}

const char *braid_eng_st_file_name(const braid_eng_st_t *st, int file)
{
    return file >= 0 && file < st->nfiles ? st->files[file].path : "?";
}

const char *braid_eng_st_meta(const braid_eng_st_t *st, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st->meta, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

braid_status_t braid_eng_st_expect(const braid_eng_st_tensor_t **out,
                                   const braid_eng_st_t *st, const char *name,
                                   int ndim, const int64_t *shape)
{
    const braid_eng_st_tensor_t *t = braid_eng_st_find(st, name);
    if (!t)
        return braid_eng_fail(BRAID_ERR_NOT_FOUND, "tensor '%s': missing",
                              name);
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char got[256], want[256];
        shape_str(got, sizeof(got), t->ndim, t->shape);
        shape_str(want, sizeof(want), ndim, shape);
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "tensor '%s' (%s): shape %s, expected %s", name,
                              st->files[t->file].path, got, want);
    }
    if (!braid_eng_dtype_is_weight(t->dtype))
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "tensor '%s' (%s): dtype %s, expected F32, BF16 "
                              "or F16",
                              name, st->files[t->file].path, t->dtype_name);
    *out = t;
    return BRAID_OK;
}

braid_status_t braid_eng_st_read(void *dst, braid_dtype_t dst_dtype,
                                 const braid_eng_st_t        *st,
                                 const braid_eng_st_tensor_t *t, int64_t row0,
                                 int64_t nrows, int64_t col0, int64_t ncols)
{
    int64_t cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    int64_t rows = cols ? (int64_t)(t->numel / (uint64_t)cols) : 0;
    if (!braid_eng_dtype_is_weight(t->dtype) ||
        !braid_eng_dtype_is_weight(dst_dtype))
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "tensor '%s': cannot convert %s to %s", t->name,
                              t->dtype_name, braid_dtype_name(dst_dtype));
    if (row0 < 0 || nrows < 0 || col0 < 0 || ncols < 0 ||
        row0 + nrows > rows || col0 + ncols > cols)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "tensor '%s' [%lld, %lld]: block rows "
                              "[%lld, %lld) x cols [%lld, %lld) is outside it",
                              t->name, (long long)rows, (long long)cols,
                              (long long)row0, (long long)(row0 + nrows),
                              (long long)col0, (long long)(col0 + ncols));
    size_t es = t->elem_size, ds = braid_dtype_size(dst_dtype);
    for (int64_t r = 0; r < nrows; r++)
        braid_eng_convert(
            (unsigned char *)dst + (size_t)(r * ncols) * ds, dst_dtype,
            t->data + ((size_t)(row0 + r) * (size_t)cols + (size_t)col0) * es,
            t->dtype, (size_t)ncols);
    /* Give back the pages of the rows read (whole pages inside the file's
     * mapping; a neighbour's page dropped too is only read again later). */
    if (nrows > 0 && ncols > 0) {
        const st_file_t *f    = &st->files[t->file];
        size_t           page = (size_t)sysconf(_SC_PAGESIZE);
        size_t           lo =
            (size_t)(t->data - f->map) + (size_t)row0 * (size_t)cols * es;
        size_t hi = lo + (size_t)nrows * (size_t)cols * es;
        lo &= ~(page - 1);
        hi = (hi + page - 1) & ~(page - 1);
        if (hi > f->size)
            hi = (f->size + page - 1) & ~(page - 1);
        madvise(f->map + lo, hi - lo, MADV_DONTNEED);
    }
    return BRAID_OK;
}
