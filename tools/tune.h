/* braid-tune: every candidate of every collective timed on the live
 * communicator over a size sweep; the winners become a tuning table
 * (BRAID_TUNE_FILE).  braid_tune.c drives, tune_run.c times, tune_out.c
 * writes.  docs/tuning.md describes the program and the file. */
#ifndef BRAID_TOOLS_TUNE_H
#define BRAID_TOOLS_TUNE_H

#include <stdio.h>

#include "comm/calib.h"
#include "comm/comm.h"

#define TUNE_MAX_SERIES 48
#define TUNE_MAX_SIZES  48
#define TUNE_MAX_ROUNDS 32
#define TUNE_NAME       80
/* Up to this size (nccl-tests size) a round of every series takes
 * milliseconds: -n calls each, and --small-rounds rounds where more are
 * asked for.  Above it a call lasts long enough that fewer calls and the
 * -r rounds alone keep a sweep in minutes. */
#define TUNE_SMALL ((size_t)256 << 10)

typedef enum {
    SERIES_CAND,  /* one candidate, forced (BRAID_ALGO) */
    SERIES_AUTO,  /* the cost model's choice (no BRAID_ALGO, no tuning file) */
    SERIES_TUNED, /* the choice with --tune-file */
    SERIES_MODEL, /* the cost model alone: auto with BRAID_ONLINE=off */
} series_kind_t;

/* A way of running calls: a communicator split off the world with its own
 * BRAID_ALGO / BRAID_TUNE_FILE. */
typedef struct series {
    char          name[TUNE_NAME]; /* "ring@shm", "auto", "tuned" */
    series_kind_t kind;
    braid_comm_t *comm;
    unsigned      colls;  /* bit per collective it runs (SERIES_CAND) */
    int           warmed; /* has run calls already */
} series_t;

typedef enum {
    POINT_OK = 0,
    POINT_CANNOT, /* its estimate says it cannot run this call */
    POINT_PRUNED, /* --prune: far slower than the best at the size before */
} point_state_t;

/* One series at one size. */
typedef struct point {
    point_state_t state;
    double        us;             /* median over rounds */
    double        est;            /* estimate of what ran, us; < 0: none */
    char          ran[TUNE_NAME]; /* the candidate that ran */
    double        round_us[TUNE_MAX_ROUNDS];
    int           calls; /* timed calls in its round with the most */
} point_t;

typedef struct opts {
    const char *out;   /* -o: the tuning table */
    int         merge; /* --merge: keep other shapes' rows of -o */
    unsigned    colls; /* -C */
    size_t      minbytes, maxbytes;
    int         factor;
    int         iters, warmup, rounds;
    int         small_rounds;  /* --small-rounds: rounds up to small_max */
    size_t      small_max;     /* --small-max (default TUNE_SMALL) */
    const char *cands;         /* --cands: only these, comma-separated */
    const char *tune_file;     /* --tune-file: also time "tuned" */
    const char *csv;           /* --csv FILE */
    double      prune;         /* --prune F (0: off) */
    int         race;          /* --race N: calls a round of a racer */
    int         check;         /* verify the first call of every point */
    int         quiet;         /* -q */
    int         shared;        /* --memory braid: buffers of braid_mem_alloc */
    char        command[1024]; /* how we were run, for the file's header */
} opts_t;

/* What one collective's sweep found. */
typedef struct sweep {
    braid_coll_t coll;
    int          nsizes;
    size_t       size[TUNE_MAX_SIZES];  /* nccl-tests size: larger buffer */
    size_t       bytes[TUNE_MAX_SIZES]; /* per rank (the dispatcher's) */
    size_t       count[TUNE_MAX_SIZES]; /* the call's count argument */
    point_t      pt[TUNE_MAX_SIZES][TUNE_MAX_SERIES];
} sweep_t;

typedef struct tune {
    opts_t         o;
    braid_comm_t  *world;
    int            rank, size;
    int            nseries;
    series_t       series[TUNE_MAX_SERIES];
    unsigned char *sbuf, *rbuf;  /* maxbytes each */
    double        *times, *tmax; /* per timed call of a round, every series */
    double        *one;          /* one series' calls of a round */
    size_t         llc; /* the host's last-level cache, bytes (0: unknown) */
} tune_t;

/* tune_run.c: times every series of one collective over the sizes. */
int tune_sweep(tune_t *t, sweep_t *sw);
/* Rounds at a size: -r, or --small-rounds up to --small-max if more. */
int tune_rounds(const tune_t *t, size_t size);
/* The best series that is a candidate (SERIES_CAND) at size i, or -1. */
int tune_best(const tune_t *t, const sweep_t *sw, int i);
/* The tuning table's pick at size i: the best candidate, except for a
 * reduction whose best does not fold in rank order (on more than two
 * ranks: braid_online_swappable).  Online tuning never
 * puts such a pick on trial (a rival would change the result's bits from
 * one call to the next), so the dispatcher obeys it however it does later,
 * and a file that measured it in a good moment of a noisy host holds it
 * against a candidate that is faster the rest of the time.  It is the pick
 * only where it beat the fastest rank-order candidate in every round, by
 * more than BRAID_ONLINE_MARGIN;
 * elsewhere that one is, which the dispatcher still tries against the
 * row's close rivals.  -1: no candidate ran. */
int tune_pick(const tune_t *t, const sweep_t *sw, int i);

/* tune_out.c (rank 0) */
void tune_print(const tune_t *t, const sweep_t *sw);
int  tune_csv(const tune_t *t, const sweep_t *sw, int nsweeps);
int  tune_write_table(const tune_t *t, const sweep_t *sw, int nsweeps);

#endif
