/* safetensors writer: header planned first, the file mapped and filled in
 * place, renamed into place when complete (see safetensors.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/safetensors.h"
#include "engine/common/st_types.h"
#include "engine/common/strmap.h"
#include "engine/common/util.h"

typedef struct {
    char         *name;
    braid_dtype_t dtype;
    int           ndim;
    int64_t       shape[BRAID_ENG_ST_MAX_DIMS];
    uint64_t      begin, end;
} st_plan_t;

struct braid_eng_st_writer {
    char              *path, *tmp;
    st_plan_t         *t;
    size_t             n, cap;
    uint64_t           data_size;
    cJSON             *meta;
    braid_eng_strmap_t by_name;
    int                fd;
    unsigned char     *map;
    size_t             size, data_off;
};

braid_status_t braid_eng_st_writer_new(braid_eng_st_writer_t **out,
                                       const char             *path)
{
    braid_eng_st_writer_t *w = calloc(1, sizeof(*w));
    if (!w)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    w->fd      = -1;
    size_t len = strlen(path);
    w->path    = strdup(path);
    w->tmp     = malloc(len + 5);
    if (!w->path || !w->tmp ||
        braid_eng_strmap_init(&w->by_name, 64) != BRAID_OK) {
        braid_eng_st_writer_abort(w);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(w->tmp, path, len);
    memcpy(w->tmp + len, ".tmp", 5);
    *out = w;
    return BRAID_OK;
}

braid_status_t braid_eng_st_writer_meta(braid_eng_st_writer_t *w,
                                        const char *key, const char *value)
{
    if (w->map)
        return braid_eng_fail(BRAID_ERR_STATE,
                              "%s: metadata after the header was written",
                              w->path);
    if (!w->meta && !(w->meta = cJSON_CreateObject()))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(w->meta, key);
    if (!cJSON_AddStringToObject(w->meta, key, value))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    return BRAID_OK;
}

braid_status_t braid_eng_st_writer_add(braid_eng_st_writer_t *w,
                                       const char *name, braid_dtype_t dtype,
                                       int ndim, const int64_t *shape)
{
    if (w->map)
        return braid_eng_fail(BRAID_ERR_STATE,
                              "%s: tensor '%s' added after the header was "
                              "written",
                              w->path, name);
    if (!braid_eng_st_type_name(dtype) || ndim < 0 ||
        ndim > BRAID_ENG_ST_MAX_DIMS || strcmp(name, "__metadata__") == 0 ||
        !name[0])
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: tensor '%s': bad name, dtype or rank",
                              w->path, name);
    if (braid_eng_grow((void **)&w->t, &w->cap, w->n + 1, sizeof(*w->t)))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    st_plan_t *p = &w->t[w->n];
    memset(p, 0, sizeof(*p));
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "%s: tensor '%s': negative dimension",
                                  w->path, name);
        p->shape[d] = shape[d];
        numel *= (uint64_t)shape[d];
    }
    if (!(p->name = strdup(name)))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    int32_t old;
    if (braid_eng_strmap_put(&w->by_name, p->name, strlen(p->name),
                             (int32_t)w->n, &old) != BRAID_OK) {
        free(p->name);
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "%s: tensor '%s' added twice", w->path, name);
    }
    p->dtype     = dtype;
    p->ndim      = ndim;
    p->begin     = w->data_size;
    p->end       = p->begin + numel * braid_dtype_size(dtype);
    w->data_size = p->end;
    w->n++;
    return BRAID_OK;
}

/* The header JSON, padded with spaces to a multiple of 8 bytes as the
 * reference writer does (so the data section starts 8-byte aligned). */
static braid_status_t build_header(char **out, size_t *len,
                                   const braid_eng_st_writer_t *w)
{
    cJSON *h = cJSON_CreateObject();
    if (!h)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    if (w->meta)
        cJSON_AddItemToObject(h, "__metadata__", cJSON_Duplicate(w->meta, 1));
    for (size_t i = 0; i < w->n; i++) {
        const st_plan_t *p   = &w->t[i];
        cJSON           *e   = cJSON_AddObjectToObject(h, p->name);
        cJSON           *sh  = cJSON_AddArrayToObject(e, "shape");
        cJSON           *off = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddStringToObject(e, "dtype", braid_eng_st_type_name(p->dtype));
        for (int d = 0; d < p->ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)p->shape[d]));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)p->begin));
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)p->end));
    }
    char *text = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    if (!text)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char  *buf = malloc(padded);
    if (!buf) {
        free(text);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    memcpy(buf, text, n);
    memset(buf + n, ' ', padded - n);
    free(text);
    *out = buf;
    *len = padded;
    return BRAID_OK;
}

braid_status_t braid_eng_st_writer_map(braid_eng_st_writer_t *w)
{
    if (w->map)
        return BRAID_OK;
    char          *hdr  = NULL;
    size_t         hlen = 0;
    braid_status_t s    = build_header(&hdr, &hlen, w);
    if (s != BRAID_OK)
        return s;
    w->data_off = 8 + hlen;
    w->size     = w->data_off + (size_t)w->data_size;
    w->fd       = open(w->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0 || ftruncate(w->fd, (off_t)w->size) != 0) {
        free(hdr);
        return braid_eng_fail(BRAID_ERR_IO, "%s: %s", w->tmp, strerror(errno));
    }
    w->map = mmap(NULL, w->size, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0);
    if (w->map == MAP_FAILED) {
        w->map = NULL;
        free(hdr);
        return braid_eng_fail(BRAID_ERR_IO, "%s: mmap: %s", w->tmp,
                              strerror(errno));
    }
    for (int i = 0; i < 8; i++)
        w->map[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(w->map + 8, hdr, hlen);
    free(hdr);
    return BRAID_OK;
}

void *braid_eng_st_writer_data(braid_eng_st_writer_t *w, const char *name)
{
    int32_t i = braid_eng_strmap_get(&w->by_name, name, strlen(name));
    if (i < 0 || !w->map)
        return NULL;
    return w->map + w->data_off + w->t[i].begin;
}

static void writer_free(braid_eng_st_writer_t *w)
{
    if (w->map)
        munmap(w->map, w->size);
    if (w->fd >= 0)
        close(w->fd);
    for (size_t i = 0; i < w->n; i++)
        free(w->t[i].name);
    braid_eng_strmap_free(&w->by_name);
    cJSON_Delete(w->meta);
    free(w->t);
    free(w->path);
    free(w->tmp);
    free(w);
}

braid_status_t braid_eng_st_writer_finish(braid_eng_st_writer_t *w)
{
    braid_status_t s = braid_eng_st_writer_map(w); /* a file of no tensors */
    if (s == BRAID_OK) {
        int bad = munmap(w->map, w->size) != 0;
        w->map  = NULL;
        bad |= fsync(w->fd) != 0;
        bad |= close(w->fd) != 0;
        w->fd = -1;
        if (bad || rename(w->tmp, w->path) != 0)
            s = braid_eng_fail(BRAID_ERR_IO, "%s: %s", w->path,
                               strerror(errno));
    }
    if (s != BRAID_OK)
        unlink(w->tmp);
    writer_free(w);
    return s;
}

void braid_eng_st_writer_abort(braid_eng_st_writer_t *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        unlink(w->tmp);
    writer_free(w);
}

braid_status_t braid_eng_st_save(const char                 *path,
                                 const braid_eng_st_entry_t *entries, size_t n)
{
    braid_eng_st_writer_t *w;
    braid_status_t         s = braid_eng_st_writer_new(&w, path);
    if (s != BRAID_OK)
        return s;
    for (size_t i = 0; i < n && s == BRAID_OK; i++)
        s = braid_eng_st_writer_add(w, entries[i].name, entries[i].dtype,
                                    entries[i].ndim, entries[i].shape);
    if (s == BRAID_OK)
        s = braid_eng_st_writer_map(w);
    if (s != BRAID_OK) {
        braid_eng_st_writer_abort(w);
        return s;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(braid_eng_st_writer_data(w, entries[i].name), entries[i].data,
               (size_t)(w->t[i].end - w->t[i].begin));
    return braid_eng_st_writer_finish(w);
}

braid_status_t braid_eng_st_write_index(const char        *path,
                                        const char *const *names,
                                        const char *const *files, size_t n,
                                        uint64_t total_size)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *map  = cJSON_AddObjectToObject(root, "weight_map");
    cJSON_AddNumberToObject(meta, "total_size", (double)total_size);
    for (size_t i = 0; i < n; i++)
        cJSON_AddStringToObject(map, names[i], files[i]);
    braid_status_t s = braid_eng_json_save(path, root, 1);
    cJSON_Delete(root);
    return s;
}
