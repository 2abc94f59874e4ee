/* Training data (see data.h). */
#include "data.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/common/err.h"
#include "util.h"

/* ----------------------------------------------------------------------------
 * reading */

typedef struct {
    char **paths;
    size_t n, cap;
} pathlist_t;

static int path_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static braid_status_t list_add(pathlist_t *l, const char *path)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **p   = realloc(l->paths, cap * sizeof(*p));
        if (p == NULL)
            return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                                  "out of memory "
                                  "listing the data files");
        l->paths = p;
        l->cap   = cap;
    }
    if ((l->paths[l->n] = strdup(path)) == NULL)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory listing "
                                                   "the data files");
    l->n++;
    return BRAID_OK;
}

/* Regular files under dir, recursively, hidden entries skipped. */
static braid_status_t list_dir(pathlist_t *l, const char *dir, int depth)
{
    if (depth > 32)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "data directory %s: "
                              "nested too deep (a link loop?)",
                              dir);
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return braid_eng_fail(BRAID_ERR_IO, "data directory %s: %s", dir,
                              strerror(errno));
    braid_status_t st = BRAID_OK;
    struct dirent *e;
    while (st == BRAID_OK && (e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char        path[4096];
        struct stat sb;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
            sizeof(path))
            continue;
        if (stat(path, &sb) != 0)
            continue; /* dangling link: not data */
        if (S_ISDIR(sb.st_mode))
            st = list_dir(l, path, depth + 1);
        else if (S_ISREG(sb.st_mode))
            st = list_add(l, path);
    }
    closedir(dp);
    return st;
}

static braid_status_t append_file(braid_train_data_t *d, size_t *cap,
                                  const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return braid_eng_fail(BRAID_ERR_IO, "data file %s: %s", path,
                              strerror(errno));
    braid_status_t st = BRAID_OK;
    for (;;) {
        if (d->n == *cap) {
            size_t         c = *cap ? 2 * *cap : (size_t)1 << 20;
            unsigned char *p = realloc(d->bytes, c);
            if (p == NULL) {
                st = braid_eng_fail(BRAID_ERR_NO_MEMORY,
                                    "out of memory "
                                    "reading %s (%zu bytes so far)",
                                    path, d->n);
                break;
            }
            d->bytes = p;
            *cap     = c;
        }
        size_t got = fread(d->bytes + d->n, 1, *cap - d->n, f);
        d->n += got;
        if (got == 0) {
            if (ferror(f))
                st = braid_eng_fail(BRAID_ERR_IO,
                                    "data file %s: read "
                                    "error",
                                    path);
            break;
        }
    }
    fclose(f);
    return st;
}

/* A single file is mapped, not read: ranks on one host then share its
 * pages, and only the windows drawn are ever loaded. */
static braid_status_t map_file(braid_train_data_t *d, const char *path,
                               size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return braid_eng_fail(BRAID_ERR_IO, "data file %s: %s", path,
                              strerror(errno));
    void *p   = size > 0 ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)
                         : MAP_FAILED;
    int   err = errno;
    close(fd);
    if (p == MAP_FAILED)
        return size == 0 ? BRAID_OK
                         : braid_eng_fail(BRAID_ERR_IO,
                                          "data file %s: mmap: "
                                          "%s",
                                          path, strerror(err));
    d->bytes  = p;
    d->n      = size;
    d->mapped = 1;
    return BRAID_OK;
}

braid_status_t braid_train_data_open(braid_train_data_t *d, const char *path,
                                     double val_frac, int T)
{
    struct stat    sb;
    pathlist_t     l   = {0};
    size_t         cap = 0;
    braid_status_t st;

    *d = (braid_train_data_t){0};
    if (val_frac < 0.0 || val_frac >= 1.0)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "validation fraction "
                              "%g: need 0 <= f < 1",
                              val_frac);
    if (stat(path, &sb) != 0)
        return braid_eng_fail(BRAID_ERR_IO, "data %s: %s", path,
                              strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        st        = map_file(d, path, (size_t)sb.st_size);
        d->nfiles = 1;
    } else {
        st = S_ISDIR(sb.st_mode) ? list_dir(&l, path, 0) : list_add(&l, path);
        if (st == BRAID_OK)
            qsort(l.paths, l.n, sizeof(*l.paths), path_cmp);
        for (size_t i = 0; st == BRAID_OK && i < l.n; i++)
            st = append_file(d, &cap, l.paths[i]);
        d->nfiles = (int)l.n;
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.paths[i]);
    free(l.paths);
    if (st != BRAID_OK) {
        braid_train_data_close(d);
        return st;
    }
    size_t nval = (size_t)((double)d->n * val_frac);
    d->ntrain   = d->n - nval;
    if (d->ntrain < (size_t)T + 1 || (val_frac > 0 && nval < (size_t)T + 1)) {
        st = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                            "data %s: %zu bytes in "
                            "%d file(s) give %zu for training and %zu for "
                            "validation; sequences of %d tokens need at "
                            "least %d in each (more data, a shorter "
                            "--seq, or --val-frac 0)",
                            path, d->n, d->nfiles, d->ntrain, nval, T, T + 1);
        braid_train_data_close(d);
    }
    return st;
}

void braid_train_data_close(braid_train_data_t *d)
{
    if (d->mapped)
        munmap(d->bytes, d->n);
    else
        free(d->bytes);
    *d = (braid_train_data_t){0};
}

/* ----------------------------------------------------------------------------
 * batches */

static void window(int *inputs, int *targets, const unsigned char *src, int T)
{
    for (int t = 0; t < T; t++) {
        inputs[t]  = src[t];
        targets[t] = src[t + 1];
    }
}

void braid_train_data_batch(const braid_train_data_t *d, int *inputs,
                            int *targets, uint64_t seed, long step, long first,
                            int count, int T)
{
    uint64_t span = d->ntrain - (size_t)T; /* window starts 0 .. span-1 */
    for (int i = 0; i < count; i++) {
        uint64_t key =
            braid_eng_mix64(seed) ^
            braid_eng_mix64(((uint64_t)step << 32) ^ (uint64_t)(first + i));
        size_t off = (size_t)(braid_eng_mix64(key) % span);
        window(inputs + (size_t)i * T, targets + (size_t)i * T, d->bytes + off,
               T);
    }
}

void braid_train_data_val(const braid_train_data_t *d, int *inputs,
                          int *targets, long first, int count, long total,
                          int T)
{
    size_t nval = d->n - d->ntrain;
    size_t span = nval - (size_t)T - 1; /* last start: ntrain + span */
    for (int i = 0; i < count; i++) {
        long   j = first + i;
        size_t off =
            total > 1
                ? (size_t)((double)span * (double)j / (double)(total - 1))
                : 0;
        window(inputs + (size_t)i * T, targets + (size_t)i * T,
               d->bytes + d->ntrain + off, T);
    }
}
