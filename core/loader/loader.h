/* Plugin loader: finds libbraid-<name>.so files, applies BRAID_PLUGINS, checks
 * the ABI before touching anything else (adapting ABI-3 plugins), and asks
 * each plugin to probe.
 *
 * Plugins are loaded once per process and shared by every communicator; the
 * table is reference-counted by braid_init/braid_finalize. */
#ifndef BRAID_CORE_LOADER_H
#define BRAID_CORE_LOADER_H

#include <braid/plugin.h>

typedef enum {
    BRAID_PLUGIN_AVAILABLE = 0,
    BRAID_PLUGIN_UNAVAILABLE, /* probe said no: normal */
    BRAID_PLUGIN_EXCLUDED,    /* BRAID_PLUGINS left it out */
    BRAID_PLUGIN_REJECTED,    /* failed to load, wrong ABI, bad descriptor */
    BRAID_PLUGIN_SHADOWED,    /* same name found earlier in the search path */
} braid_plugin_state_t;

#define BRAID_LOADER_MAX_TLS 8

typedef struct braid_plugin_entry {
    char                 name[64];
    char                 path[4096];
    braid_plugin_state_t state;
    char                 why[256]; /* reason when not available */
    void                *dl;
    /* Non-NULL once the descriptor passed the checks: the plugin's own, or
     * for an ABI-3 plugin the adapter's ABI-4 view of it. */
    const braid_plugin_t *desc;
    unsigned              abi;     /* the ABI it was built for */
    int                   adapted; /* desc is adapt_v3.c's */
    /* Per transport of desc: 1 when its probe passed, else the reason. */
    int  tl_ok[BRAID_LOADER_MAX_TLS];
    char tl_why[BRAID_LOADER_MAX_TLS][128];
    /* A probe (the plugin's or a transport's) crashed in it: its unload
     * hook and dlclose are never called (see guard.c). */
    int crashed;
} braid_plugin_entry_t;

typedef struct braid_plugin_table {
    int                   n;
    braid_plugin_entry_t *entries;
} braid_plugin_table_t;

/* Loads (first call) or references (later calls) the process's plugins. */
braid_status_t braid_loader_acquire(const braid_plugin_table_t **table);
void           braid_loader_release(void);

/* The directories searched, in order, ':'-separated (for braid-info). */
void braid_loader_search_path(char *buf, size_t len);

/* BRAID_PLUGINS: "a,b" keeps only those, "^a,b" excludes those.  Parsed
 * separately so that it can be unit-tested and fuzzed. */
typedef struct braid_plugin_filter {
    int  exclude; /* 1 for "^..." */
    int  n;
    char names[32][64];
} braid_plugin_filter_t;

braid_status_t braid_plugin_filter_parse(braid_plugin_filter_t *filter,
                                         const char            *spec);
int            braid_plugin_filter_keeps(const braid_plugin_filter_t *filter,
                                         const char                  *name);

/* guard.c: calls probe(ctx, why, why_len), storing its status in *st, and
 * returns 0; or, when the probe crashed (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT), returns that signal's number and leaves *st alone.  The plugin
 * that crashed must not be called again (see guard.c). */
typedef braid_status_t (*braid_probe_call_t)(void *ctx, char *why,
                                             size_t why_len);
int braid_loader_probe_guarded(braid_probe_call_t probe, void *ctx, char *why,
                               size_t why_len, braid_status_t *st);
/* "SIGSEGV" for SIGSEGV, ... */
const char *braid_loader_signal_name(int sig);

/* loader.c: what every descriptor's arrays need (any ABI); NULL when
 * sound, else the reason. */
const char *braid_loader_check_arrays(int has_probe, int n_transports,
                                      const void *transports, int n_algos,
                                      const void *algos);

/* services.c: the services handed to plugins, and the two of them an
 * adapter hands on unchanged. */
braid_status_t braid_services_error(braid_status_t status, const char *fmt,
                                    ...) __attribute__((format(printf, 2, 3)));
void braid_services_log(braid_log_level_t level, const char *component,
                        const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const braid_services_t *braid_core_services(void);
/* The same table, for the call path to take without a call. */
extern const braid_services_t braid_services;
/* svc->cpu_mates: mate[r] = 1 for every other rank pinned to rank's CPU on
 * its host; their number, or -1 (all 0) when rank is not pinned. */
int braid_cpu_mates(const braid_topo_t *topo, int rank, unsigned char *mate);

/* The smallest struct of each kind ABI 4 accepts: its first revision's
 * size (later revisions only append). */
#define BRAID_PLUGIN_V4_MIN_SIZE                                              \
    (offsetof(braid_plugin_t, unload) + sizeof(void (*)(void)))
#define BRAID_TRANSPORT_V4_MIN_SIZE                                           \
    (offsetof(braid_transport_t, wait) + sizeof(void (*)(void)))
#define BRAID_ALGO_V4_MIN_SIZE                                                \
    (offsetof(braid_algo_t, comm_create) + sizeof(void (*)(void)))

#endif
