/* Finds, checks and probes plugins.  Search order: BRAID_PLUGIN_PATH, then
 * <directory of libbraid.so>/braid (the install, relocatable) or, for a
 * program with the core linked in, the plugin directory relative to its
 * bindir, then the
 * configured install directory, then -- only when this libbraid is the one in
 * the build tree -- the build tree's plugin folders.  Only absolute paths are
 * handed to dlopen, so the current directory is never searched. */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/abi3.h"
#include "loader/adapt.h"
#include "loader/loader.h"
#include "util/log.h"

#define LOG_COMP "loader"
#define MAX_DIRS 32

static pthread_mutex_t      loader_lock = PTHREAD_MUTEX_INITIALIZER;
static int                  loader_refs;
static braid_plugin_table_t loader_table;

typedef struct dir_list {
    int  n;
    char dirs[MAX_DIRS][PATH_MAX];
} dir_list_t;

static void dir_list_add(dir_list_t *list, const char *dir)
{
    char real[PATH_MAX];
    if (realpath(dir, real) == NULL) {
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
                  "skipping plugin directory '%s': "
                  "does not exist",
                  dir);
        return;
    }
    for (int i = 0; i < list->n; i++)
        if (strcmp(list->dirs[i], real) == 0)
            return;
    if (list->n == MAX_DIRS) {
        BRAID_LOG(BRAID_LOG_WARN, LOG_COMP,
                  "more than %d plugin directories; "
                  "ignoring '%s'",
                  MAX_DIRS, dir);
        return;
    }
    snprintf(list->dirs[list->n++], PATH_MAX, "%s", real);
}

static void dir_list_add_paths(dir_list_t *list, const char *paths)
{
    char buf[8192];
    snprintf(buf, sizeof(buf), "%s", paths);
    char *save = NULL;
    for (char *d = strtok_r(buf, ":", &save); d;
         d       = strtok_r(NULL, ":", &save))
        dir_list_add(list, d);
}

static void search_dirs(dir_list_t *list)
{
    list->n         = 0;
    const char *env = getenv("BRAID_PLUGIN_PATH");
    if (env != NULL && *env != '\0')
        dir_list_add_paths(list, env);

    Dl_info info;
    char    self[PATH_MAX] = "";
    /* A program that links the core statically (braid-info) is named as it
     * was started, maybe through PATH: /proc/self/exe is where it is. */
    if (dladdr((void *)&braid_loader_acquire, &info) && info.dli_fname &&
        (realpath(info.dli_fname, self) != NULL ||
         realpath("/proc/self/exe", self) != NULL)) {
        char  dir[PATH_MAX + 8];
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            snprintf(dir, sizeof(dir), "%.*s/braid", (int)(slash - self),
                     self);
            dir_list_add(list, dir);
            /* self is a program that links the core statically (braid-info)
             * in an install's bindir, maybe staged or moved: its plugins
             * are at the same place relative to it. */
            snprintf(dir, sizeof(dir), "%.*s/%s", (int)(slash - self), self,
                     BRAID_PLUGIN_DIR_FROM_BIN);
            dir_list_add(list, dir);
        }
    }
    dir_list_add(list, BRAID_PLUGIN_DIR);
    size_t root_len = strlen(BRAID_BUILD_ROOT);
    if (strncmp(self, BRAID_BUILD_ROOT, root_len) == 0 &&
        self[root_len] == '/')
        dir_list_add_paths(list, BRAID_BUILD_PLUGIN_DIRS);
}

void braid_loader_search_path(char *buf, size_t len)
{
    dir_list_t list;
    search_dirs(&list);
    size_t off = 0;
    buf[0]     = '\0';
    for (int i = 0; i < list.n && off < len; i++) {
        int n =
            snprintf(buf + off, len - off, "%s%s", i ? ":" : "", list.dirs[i]);
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

/* "libbraid-ucx.so" -> "ucx"; 0 if the file is not a plugin. */
static int plugin_name_of(char *name, size_t len, const char *file)
{
    static const char prefix[] = "libbraid-", suffix[] = ".so";
    size_t            flen = strlen(file), plen = sizeof(prefix) - 1,
           slen = sizeof(suffix) - 1;
    if (flen <= plen + slen || strncmp(file, prefix, plen) != 0 ||
        strcmp(file + flen - slen, suffix) != 0)
        return 0;
    size_t nlen = flen - plen - slen;
    if (nlen >= len)
        return 0;
    memcpy(name, file + plen, nlen);
    name[nlen] = '\0';
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static braid_plugin_entry_t *table_append(braid_plugin_table_t *t)
{
    braid_plugin_entry_t *e =
        realloc(t->entries, sizeof(*e) * (size_t)(t->n + 1));
    if (e == NULL)
        return NULL;
    t->entries = e;
    memset(&e[t->n], 0, sizeof(*e));
    return &e[t->n++];
}

static int name_seen(const braid_plugin_table_t *t, const char *name)
{
    for (int i = 0; i < t->n - 1; i++)
        if (strcmp(t->entries[i].name, name) == 0 &&
            t->entries[i].state != BRAID_PLUGIN_SHADOWED)
            return 1;
    return 0;
}

static void reject(braid_plugin_entry_t *e, braid_plugin_state_t state,
                   const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void reject(braid_plugin_entry_t *e, braid_plugin_state_t state,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof(e->why), fmt, ap);
    va_end(ap);
    e->state = state;
    if (e->adapted)
        braid_adapt_v3_free(e->desc);
    e->adapted = 0;
    e->desc    = NULL;
    if (e->dl != NULL) {
        dlclose(e->dl);
        e->dl = NULL;
    }
    /* A plugin that is dropped in but cannot be used deserves a warning; one
     * the user excluded or that is a duplicate only matters when debugging. */
    braid_log_level_t level =
        state == BRAID_PLUGIN_REJECTED ? BRAID_LOG_WARN : BRAID_LOG_INFO;
    BRAID_LOG_HOST(
        level, LOG_COMP, "plugin '%s' (%s) %s: %s", e->name, e->path,
        state == BRAID_PLUGIN_REJECTED ? "rejected" : "skipped", e->why);
}

/* The plugin's symbol for another ABI, if it has one: its number, or 0. */
static unsigned other_abi(void *dl)
{
    static const unsigned candidates[] = {1, 2, 5, 6, 7, 8, 9, 10, 11, 12};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        char sym[32];
        snprintf(sym, sizeof(sym), "braid_plugin_v%u", candidates[i]);
        if (dlsym(dl, sym) != NULL)
            return candidates[i];
    }
    return 0;
}

static const char *abi_hint(unsigned abi)
{
    return abi > BRAID_PLUGIN_ABI_VERSION
               ? "newer than this core: upgrade braid or rebuild the plugin "
                 "against this braid's <braid/plugin.h>"
               : "too old to adapt: rebuild the plugin against this braid's "
                 "<braid/plugin.h>";
}

const char *braid_loader_check_arrays(int has_probe, int n_transports,
                                      const void *transports, int n_algos,
                                      const void *algos)
{
    if (!has_probe || n_transports < 0 || n_algos < 0 ||
        (n_transports > 0 && transports == NULL) ||
        (n_algos > 0 && algos == NULL))
        return "malformed descriptor (probe, transport or algorithm arrays "
               "missing)";
    return NULL;
}

/* buf = "<kind> '<name>' descriptor of N bytes, smaller than ABI 4's". */
static const char *too_small(char *buf, size_t len, const char *kind,
                             const char *name, uint32_t size, size_t min)
{
    snprintf(buf, len,
             "%s '%s' descriptor of %u bytes, smaller than ABI 4's "
             "%zu: corrupt or mismatched header",
             kind, name ? name : "(null)", size, min);
    return buf;
}

/* What an ABI-4 descriptor must hold before the core calls into it; NULL
 * when it is sound. */
static const char *check_v4(const braid_plugin_t *d, char *buf, size_t len)
{
    const char *bad =
        braid_loader_check_arrays(d->probe != NULL, d->n_transports,
                                  d->transports, d->n_algos, d->algos);
    if (bad != NULL)
        return bad;
    for (int t = 0; t < d->n_transports; t++) {
        const braid_transport_t *tl   = d->transports[t];
        const char              *name = tl && tl->name ? tl->name : "(null)";
        if (tl == NULL || tl->struct_size < BRAID_TRANSPORT_V4_MIN_SIZE)
            return too_small(buf, len, "transport", name,
                             tl ? tl->struct_size : 0,
                             BRAID_TRANSPORT_V4_MIN_SIZE);
        /* Algorithms withdraw their requests through cancel before they
         * free the buffers after an error; a transport without it would
         * let late data land in freed memory. */
        if (tl->name == NULL || tl->cancel == NULL ||
            tl->comm_create == NULL || tl->comm_destroy == NULL ||
            tl->link == NULL) {
            snprintf(buf, len,
                     "transport '%s' lacks its name, cancel, "
                     "comm_create, comm_destroy or link, which plugin ABI %u "
                     "requires",
                     name, BRAID_PLUGIN_ABI_VERSION);
            return buf;
        }
    }
    for (int a = 0; a < d->n_algos; a++) {
        const braid_algo_t *al   = d->algos[a];
        const char         *name = al && al->name ? al->name : "(null)";
        if (al == NULL || al->struct_size < BRAID_ALGO_V4_MIN_SIZE)
            return too_small(buf, len, "algorithm", name,
                             al ? al->struct_size : 0, BRAID_ALGO_V4_MIN_SIZE);
        if (al->name == NULL || (unsigned)al->coll >= BRAID_COLL_COUNT ||
            al->estimate == NULL || al->start == NULL ||
            al->progress == NULL || al->finish == NULL ||
            ((al->flags & BRAID_ALGO_BACKEND) && al->comm_create == NULL)) {
            snprintf(buf, len,
                     "algorithm '%s' lacks its name, collective, "
                     "estimate, start, progress or finish (or, as a backend, "
                     "comm_create)",
                     name);
            return buf;
        }
    }
    return NULL;
}

/* Checks the descriptor's ABI before reading any other field; adapts an
 * ABI-3 descriptor. */
static void check_descriptor(braid_plugin_entry_t *e)
{
    char                  buf[224];
    const braid_plugin_t *d = dlsym(e->dl, BRAID_PLUGIN_SYMBOL);
    if (d == NULL) {
        const braid_plugin_v3_t *d3 = dlsym(e->dl, BRAID_PLUGIN_ABI3_SYMBOL);
        unsigned                 other = d3 ? 3 : other_abi(e->dl);
        if (other == 0) {
            reject(e, BRAID_PLUGIN_REJECTED,
                   "no symbol '%s' (or '%s'): not a "
                   "braid plugin",
                   BRAID_PLUGIN_SYMBOL, BRAID_PLUGIN_ABI3_SYMBOL);
            return;
        }
        if (other != 3) {
            reject(e, BRAID_PLUGIN_REJECTED,
                   "built for plugin ABI %u "
                   "(braid_plugin_v%u); this core speaks ABI %u and adapts "
                   "ABI 3: %s",
                   other, other, BRAID_PLUGIN_ABI_VERSION, abi_hint(other));
            return;
        }
        if (d3->abi_version != 3) {
            reject(e, BRAID_PLUGIN_REJECTED,
                   "ABI version %u in symbol '%s', "
                   "which only ABI 3 uses: corrupt descriptor",
                   d3->abi_version, BRAID_PLUGIN_ABI3_SYMBOL);
            return;
        }
        if (braid_adapt_v3(&e->desc, d3, buf, sizeof(buf)) != BRAID_OK) {
            reject(e, BRAID_PLUGIN_REJECTED, "%s", buf);
            return;
        }
        e->abi     = 3;
        e->adapted = 1;
        BRAID_LOG(BRAID_LOG_INFO, LOG_COMP,
                  "plugin '%s' was built for ABI 3: "
                  "loaded through the ABI-3 adapter",
                  e->name);
    } else {
        if (d->abi_version != BRAID_PLUGIN_ABI_VERSION) {
            reject(e, BRAID_PLUGIN_REJECTED,
                   "ABI version %u, this core "
                   "speaks ABI %u (and adapts ABI 3): %s",
                   d->abi_version, BRAID_PLUGIN_ABI_VERSION,
                   abi_hint(d->abi_version));
            return;
        }
        if (d->struct_size < BRAID_PLUGIN_V4_MIN_SIZE) {
            reject(e, BRAID_PLUGIN_REJECTED,
                   "ABI %u descriptor of %u bytes, "
                   "smaller than ABI %u's %zu: corrupt or mismatched header",
                   d->abi_version, d->struct_size, BRAID_PLUGIN_ABI_VERSION,
                   (size_t)BRAID_PLUGIN_V4_MIN_SIZE);
            return;
        }
        const char *bad = check_v4(d, buf, sizeof(buf));
        if (bad != NULL) {
            reject(e, BRAID_PLUGIN_REJECTED, "%s", bad);
            return;
        }
        e->desc = d;
        e->abi  = BRAID_PLUGIN_ABI_VERSION;
    }
    if (e->desc->name == NULL || strcmp(e->desc->name, e->name) != 0) {
        reject(e, BRAID_PLUGIN_REJECTED,
               "descriptor names itself '%s' but the "
               "file is libbraid-%s.so",
               e->desc->name ? e->desc->name : "(null)", e->name);
        return;
    }
}

typedef struct probe_ctx {
    const braid_plugin_t    *plugin;
    const braid_transport_t *tl; /* NULL: the plugin's own probe */
} probe_ctx_t;

static braid_status_t call_probe(void *ctx, char *why, size_t why_len)
{
    const probe_ctx_t *p = ctx;
    if (p->tl != NULL)
        return p->tl->probe(p->tl, braid_core_services(), why, why_len);
    return p->plugin->probe(p->plugin, braid_core_services(), why, why_len);
}

/* A plugin may bring algorithms that work everywhere and a transport that
 * needs hardware: each transport is probed on its own. */
static void probe_transports(braid_plugin_entry_t *e)
{
    for (int t = 0; t < e->desc->n_transports; t++) {
        const braid_transport_t *tl = e->desc->transports[t];
        if (t >= BRAID_LOADER_MAX_TLS) {
            BRAID_LOG(BRAID_LOG_WARN, LOG_COMP,
                      "plugin '%s': transports past "
                      "the %d-th are ignored",
                      e->name, BRAID_LOADER_MAX_TLS);
            break;
        }
        char           why[sizeof(e->tl_why[0])] = "";
        braid_status_t st                        = BRAID_OK;
        probe_ctx_t    ctx                       = {e->desc, tl};
        int            crash = tl->probe ? braid_loader_probe_guarded(
                                               call_probe, &ctx, why, sizeof(why), &st)
                                         : 0;
        if (crash != 0) {
            /* Only this transport goes: the plugin's algorithms may still
             * run on others (a verbs library that crashes while listing
             * devices should not take shm's low-hop algorithms with it). */
            e->tl_ok[t] = 0;
            e->crashed  = 1;
            snprintf(e->tl_why[t], sizeof(e->tl_why[t]),
                     "crashed in probe "
                     "(%s)",
                     braid_loader_signal_name(crash));
            BRAID_LOG_HOST(BRAID_LOG_WARN, LOG_COMP,
                           "transport '%s' of plugin "
                           "'%s' crashed in probe (%s): skipped",
                           tl->name, e->name, braid_loader_signal_name(crash));
            continue;
        }
        e->tl_ok[t] = st == BRAID_OK;
        snprintf(e->tl_why[t], sizeof(e->tl_why[t]), "%s",
                 st == BRAID_OK ? ""
                 : why[0]       ? why
                                : braid_status_str(st));
        if (st != BRAID_OK)
            BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
                      "transport '%s' of plugin '%s' "
                      "unavailable: %s",
                      tl->name, e->name, e->tl_why[t]);
    }
}

/* Unlike reject(), keeps the library open: dlclose would run the crashed
 * plugin's destructors, which could crash in turn. */
static void probe_crashed(braid_plugin_entry_t *e, int sig)
{
    snprintf(e->why, sizeof(e->why), "crashed in probe (%s)",
             braid_loader_signal_name(sig));
    e->state = BRAID_PLUGIN_REJECTED;
    if (e->adapted)
        braid_adapt_v3_free(e->desc);
    e->adapted = 0;
    e->desc    = NULL;
    e->crashed = 1;
    BRAID_LOG_HOST(BRAID_LOG_WARN, LOG_COMP,
                   "plugin '%s' crashed in probe (%s): "
                   "skipped (%s)",
                   e->name, braid_loader_signal_name(sig), e->path);
}

static void load_one(braid_plugin_table_t *t, const braid_plugin_filter_t *f,
                     const char *dir, const char *file, const char *name)
{
    braid_plugin_entry_t *e = table_append(t);
    if (e == NULL)
        return;
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->path, sizeof(e->path), "%s/%s", dir, file);

    if (name_seen(t, name)) {
        reject(e, BRAID_PLUGIN_SHADOWED,
               "a plugin of the same name was found "
               "earlier in the search path");
        return;
    }
    if (!braid_plugin_filter_keeps(f, name)) {
        reject(e, BRAID_PLUGIN_EXCLUDED, "excluded by BRAID_PLUGINS");
        return;
    }
    e->dl = dlopen(e->path, RTLD_NOW | RTLD_LOCAL);
    if (e->dl == NULL) {
        const char *err = dlerror();
        reject(e, BRAID_PLUGIN_REJECTED, "dlopen failed: %s",
               err ? err : "unknown error");
        return;
    }
    check_descriptor(e);
    if (e->desc == NULL)
        return;

    char           why[sizeof(e->why)] = "";
    braid_status_t st                  = BRAID_OK;
    probe_ctx_t    ctx                 = {e->desc, NULL};
    int            crash =
        braid_loader_probe_guarded(call_probe, &ctx, why, sizeof(why), &st);
    if (crash != 0) {
        probe_crashed(e, crash);
        return;
    }
    if (st != BRAID_OK) {
        e->state = BRAID_PLUGIN_UNAVAILABLE;
        snprintf(e->why, sizeof(e->why), "%s",
                 why[0] ? why : braid_status_str(st));
        BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP, "plugin '%s' unavailable: %s",
                  e->name, e->why);
        return; /* stays loaded: braid-info lists what it would bring */
    }
    e->state = BRAID_PLUGIN_AVAILABLE;
    probe_transports(e);
    BRAID_LOG(BRAID_LOG_DEBUG, LOG_COMP,
              "plugin '%s' %s (ABI %u) loaded from "
              "%s (%d transports, %d algorithms)",
              e->name, e->desc->version ? e->desc->version : "?", e->abi,
              e->path, e->desc->n_transports, e->desc->n_algos);
}

static void load_dir(braid_plugin_table_t *t, const braid_plugin_filter_t *f,
                     const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    char          *files[256];
    int            n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 256) {
        char name[64];
        if (plugin_name_of(name, sizeof(name), de->d_name))
            files[n++] = strdup(de->d_name);
    }
    closedir(d);
    /* Sorted so that every rank sees the same order. */
    qsort(files, (size_t)n, sizeof(files[0]), cmp_str);
    for (int i = 0; i < n; i++) {
        char name[64];
        if (files[i] != NULL && plugin_name_of(name, sizeof(name), files[i]))
            load_one(t, f, dir, files[i], name);
        free(files[i]);
    }
}

static braid_status_t load_all(braid_plugin_table_t *t)
{
    braid_plugin_filter_t filter;
    braid_status_t        st =
        braid_plugin_filter_parse(&filter, getenv("BRAID_PLUGINS"));
    if (st != BRAID_OK)
        return st;
    dir_list_t dirs;
    search_dirs(&dirs);
    for (int i = 0; i < dirs.n; i++)
        load_dir(t, &filter, dirs.dirs[i]);

    /* One line per process: what is usable, and why the rest is not. */
    char line[1536] = "";
    for (int i = 0; i < t->n; i++) {
        const braid_plugin_entry_t *e = &t->entries[i];
        size_t                      o = strlen(line);
        if (e->state == BRAID_PLUGIN_AVAILABLE) {
            snprintf(line + o, sizeof(line) - o, "%s%s", o ? ", " : "",
                     e->name);
            for (int k = 0;
                 k < e->desc->n_transports && k < BRAID_LOADER_MAX_TLS; k++) {
                o = strlen(line);
                if (!e->tl_ok[k])
                    snprintf(line + o, sizeof(line) - o, " (%s: %s)",
                             e->desc->transports[k]->name, e->tl_why[k]);
            }
        } else if (e->state != BRAID_PLUGIN_REJECTED) { /* rejected: warned */
            snprintf(line + o, sizeof(line) - o, "%s%s %s (%s)", o ? ", " : "",
                     e->name,
                     e->state == BRAID_PLUGIN_UNAVAILABLE ? "unavailable"
                                                          : "skipped",
                     e->why);
        }
    }
    BRAID_LOG(BRAID_LOG_INFO, LOG_COMP, "plugins: %s",
              line[0] ? line : "none");
    return BRAID_OK;
}

static void unload_all(braid_plugin_table_t *t)
{
    for (int i = 0; i < t->n; i++) {
        braid_plugin_entry_t *e = &t->entries[i];
        if (e->crashed)
            continue; /* stays mapped until exit: see probe_crashed() */
        if (e->desc != NULL && e->desc->unload != NULL)
            e->desc->unload(e->desc);
        if (e->adapted)
            braid_adapt_v3_free(e->desc);
        if (e->dl != NULL)
            dlclose(e->dl);
    }
    free(t->entries);
    memset(t, 0, sizeof(*t));
}

braid_status_t braid_loader_acquire(const braid_plugin_table_t **table)
{
    braid_status_t st = BRAID_OK;
    pthread_mutex_lock(&loader_lock);
    if (loader_refs == 0) {
        st = load_all(&loader_table);
        if (st != BRAID_OK)
            unload_all(&loader_table);
    }
    if (st == BRAID_OK) {
        loader_refs++;
        *table = &loader_table;
    }
    pthread_mutex_unlock(&loader_lock);
    return st;
}

void braid_loader_release(void)
{
    pthread_mutex_lock(&loader_lock);
    if (loader_refs > 0 && --loader_refs == 0)
        unload_all(&loader_table);
    pthread_mutex_unlock(&loader_lock);
}
