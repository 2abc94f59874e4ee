/* Link calibration: the cost model's inputs measured on this machine.
 *
 * Each transport path (two-sided send/receive, put-with-signal) is measured
 * when a communicator is created -- a neighbour exchange over every rank at
 * once, small messages for the latency and large ones for the bandwidth
 * (once in the caches, once beyond the last-level cache), and a pair of ranks
 * alone for the latency without contention -- together with the reduction
 * kernels' throughput.  The figures are agreed through the bootstrap channel,
 * so every rank feeds the cost model the same numbers, and rank 0 keeps them
 * in a cache file keyed by the hosts (name and boot id), ranks, ranks per
 * host, topology, CPUs and pinning, and the transports' versions: a later
 * communicator of the same shape reads them instead of measuring.
 * BRAID_CALIBRATE=0 keeps the transports' declared figures, =1 (the default)
 * reads the cache or measures, =force measures and rewrites the cache;
 * BRAID_CALIB_DIR names the cache's folder. docs/tuning.md explains the
 * procedure and what each figure means. */
#ifndef BRAID_CORE_CALIB_H
#define BRAID_CORE_CALIB_H

#include <stddef.h>

#include <braid/plugin.h>

#define BRAID_CALIB_MAX_TLS 8
#define BRAID_CALIB_NAME    32
#define BRAID_CALIB_KEY     1024

/* One path of one transport.  All microseconds, GB/s or bytes; 0 when not
 * measured.  The bandwidth is measured twice, every rank exchanging at
 * once: with messages whose buffers stay in the caches (beta_gbps, at
 * bytes), and with messages whose buffers on all ranks of a host together
 * exceed its last-level cache several times (big_beta_gbps, at
 * big_bytes); the cost model interpolates between them by a call's size
 * (select/bw_curve.c). */
typedef struct braid_calib_path {
    double pair_us;   /* small message between two ranks, the others idle */
    double all_us;    /* small message, every rank exchanging at once */
    double beta_gbps; /* large messages in the caches */
    double bytes;     /* their size */
    double big_beta_gbps; /* larger messages beyond the caches */
    double big_bytes;     /* their size */
} braid_calib_path_t;

typedef struct braid_calib_tl {
    char               name[BRAID_CALIB_NAME];    /* "shm" */
    char               version[BRAID_CALIB_NAME]; /* its plugin's version */
    int                has_sr, has_put;           /* which paths it has */
    braid_calib_path_t sr, put;
    /* Single-copy reads (BRAID_CAP_GET), where the communicator has them;
     * `all` is a read's latency under contention (nobody waits on it). */
    int                has_get;
    braid_calib_path_t get;
    /* The same reads of a buffer from braid_mem_alloc, which a transport
     * may read another way (shm maps it and copies with loads where it
     * reads other memory through the kernel): measured where get is. */
    int                has_mget;
    braid_calib_path_t mget;
} braid_calib_tl_t;

/* What a calibration found (or a cache file holds). */
typedef struct braid_calib {
    double           reduce_gbps; /* per rank, every rank reducing; 0: none */
    double           when;        /* seconds since the epoch it was measured */
    double           took_s;      /* how long measuring took */
    int              ntl;
    braid_calib_tl_t tl[BRAID_CALIB_MAX_TLS];
} braid_calib_t;

typedef enum {
    BRAID_CALIB_OFF = 0, /* declared figures */
    BRAID_CALIB_ON,      /* cache, else measure */
    BRAID_CALIB_FORCE,   /* measure and rewrite the cache */
} braid_calib_mode_t;

/* ------------------------------------------------------- calib_cache.c */

/* BRAID_CALIBRATE: unset, "", "1" -> ON; "0" -> OFF; "force" -> FORCE.
 * Anything else: BRAID_ERR_PARSE pointing at the position. */
braid_status_t braid_calib_mode_parse(braid_calib_mode_t *mode,
                                      const char         *value);
/* The cache's folder: BRAID_CALIB_DIR, else $XDG_CACHE_HOME/braid, else
 * $HOME/.cache/braid; "" when there is none. */
void braid_calib_cache_dir(char *buf, size_t len);
/* dir/calib-<hash of key>.txt */
void braid_calib_cache_path(char *buf, size_t len, const char *dir,
                            const char *key);
/* The cache file's text for key and c. */
braid_status_t braid_calib_format(char *buf, size_t len, const char *key,
                                  const braid_calib_t *c);
/* Parses a cache file's text.  BRAID_OK with *match = whether its key is
 * key (c is filled either way); BRAID_ERR_PARSE naming source, the line
 * and what is wrong. */
braid_status_t braid_calib_parse(braid_calib_t *c, int *match,
                                 const char *text, const char *key,
                                 const char *source);
/* Reads path: BRAID_OK and *match, BRAID_ERR_IO when it cannot be read
 * (absent: errno ENOENT, no message worth showing), BRAID_ERR_PARSE. */
braid_status_t braid_calib_load(braid_calib_t *c, int *match, const char *path,
                                const char *key);
/* Writes path atomically (a temporary file renamed over it), creating
 * its folder. */
braid_status_t braid_calib_store(const char *path, const char *key,
                                 const braid_calib_t *c);
/* The entry for transport name at version, or NULL. */
const braid_calib_tl_t *braid_calib_find(const braid_calib_t *c,
                                         const char          *name,
                                         const char          *version);

/* ------------------------------------------------------------ calib.c */

struct braid_comm;

/* Per communicator: what was applied and where it came from. */
typedef struct braid_calib_state {
    braid_calib_mode_t mode;
    braid_calib_t      values;    /* as applied (agreed on every rank) */
    double             stage_us;  /* what the selector was given */
    char               why[1024]; /* "measured in 0.21 s ...", "declared" */
    char               path[768]; /* the cache file, "" if none */
    unsigned           pinned;    /* tls whose figures the user set */
    unsigned           measured;  /* tls measured now (the rest: cache) */
} braid_calib_state_t;

/* After the transports are open: reads the cache or measures, agrees, and
 * sets every transport's link, the selector's stage_us and reduce_gbps.
 * Collective.  Fills comm->calib. */
braid_status_t braid_calib_apply(struct braid_comm *comm);
void           braid_calib_free(struct braid_comm *comm);
/* The out-of-cache bandwidth the ranks agree on from their n figures
 * (0: that rank has none; the array is reordered): the rank a quarter of the
 * way up from the slowest (calib.c explains why), 0 when none has one. */
double braid_calib_agree_out_gbps(double *gbps, int n);
/* One line: where the figures came from. */
void braid_calib_describe(const struct braid_comm *comm, char *buf,
                          size_t len);

/* ---------------------------------------------------- calib_measure.c */

/* The size of the out-of-cache exchange for a host of ppn ranks whose
 * last-level cache holds llc bytes (0: unknown): a pure rule, see the
 * file.  The LLC of this machine: sysfs, else sysconf, else 0. */
size_t braid_calib_big_bytes(size_t llc, int ppn);
size_t braid_calib_llc_bytes(void);
/* This rank's measurements of the transports tls[0..ntl) into
 * out[0..ntl) (sizes and repetitions in the file; the out-of-cache
 * exchange moves big bytes, the same on every rank).  Collective. */
braid_status_t braid_calib_measure_tls(struct braid_comm *comm,
                                       braid_tl_t *const *tls, int ntl,
                                       size_t                   big,
                                       braid_calib_tl_t *const *out);
/* The reduction kernels' throughput on this rank (f32 sum, GB/s of the
 * operand), with every rank reducing at once. */
braid_status_t braid_calib_measure_reduce(struct braid_comm *comm,
                                          double            *gbps);

#endif
