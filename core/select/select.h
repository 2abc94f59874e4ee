/* The dispatcher: for each call, which candidate ("algorithm@transport") runs.
 *
 * Precedence: BRAID_ALGO override > tuning file > cost model.  Every input is
 * identical on all ranks (the candidate set is the intersection agreed at
 * communicator creation; estimates are pure functions), so every rank picks
 * the same candidate without communicating. */
#ifndef BRAID_CORE_SELECT_H
#define BRAID_CORE_SELECT_H

#include <braid/plugin.h>

#include "select/spec.h"

#define BRAID_CAND_LEN 72

typedef struct braid_candidate {
    char                name[BRAID_CAND_LEN]; /* "ring@ucx", or "nccl" */
    const braid_algo_t *algo;
    braid_tl_t         *tl;        /* NULL for a backend */
    const char         *tl_name;   /* the transport's, or the backend's name */
    uint32_t            mem_types; /* BRAID_MEM_BIT()s of buffers it takes */
    void               *comm_state; /* the algorithm's, per communicator */
    braid_res_t        *res;        /* the core's for it (core/algo) */
} braid_candidate_t;

/* The memory-type bits a call needs: its send and receive buffers'. */
static inline uint32_t braid_mem_need(braid_mem_t send, braid_mem_t recv)
{
    return BRAID_MEM_BIT(send) | BRAID_MEM_BIT(recv);
}
/* In a call's need and a candidate's mem_types (core-internal, above every
 * memory type): a stream-ordered call, which only BRAID_ALGO_STREAM
 * candidates take. */
#define BRAID_NEED_STREAM (1u << 31)

/* What decided a pick. */
typedef enum {
    BRAID_WHY_OVERRIDE, /* BRAID_ALGO */
    BRAID_WHY_TUNE,     /* the tuning file */
    BRAID_WHY_COST      /* the cost model */
} braid_why_t;

/* One decision: the candidate (-1: none can run it), what decided, and the
 * BRAID_ALGO or tuning-file entry it obeyed (NULL: the cost model among
 * all; for the tuning file, the `cand` of its braid_tune_row_t, from which
 * online tuning finds the row's measurements). */
typedef struct braid_pick {
    int                     idx;
    braid_why_t             why;
    const braid_cand_ref_t *ref;
} braid_pick_t;

/* The curves of one transport's paths, for its candidates' estimates.
 * mget: its get path reading braid_mem_alloc's memory, with that path's
 * latency and in-cache bandwidth (0: not measured), which an estimate
 * uses in place of the get path's for buffers from there. */
typedef struct braid_sel_bw {
    const braid_tl_t *tl;
    braid_bw_curve_t  sr, put, get, mget;
    double            mget_alpha_us, mget_beta_gbps;
} braid_sel_bw_t;

#define BRAID_SEL_MAX_BW 8

struct braid_selector;
/* The curves of transport tl on this selector, or NULL (not calibrated). */
const braid_sel_bw_t *braid_select_bw(const struct braid_selector *sel,
                                      const braid_tl_t              *tl);

/* A row of a selection table: byte counts from lo up to the next row's lo
 * go to pick. */
typedef struct braid_sel_row {
    size_t       lo;
    braid_pick_t pick;
} braid_sel_row_t;

/* The selection table of one memory need: per collective, rows in rising
 * lo; the first row's lo is the smallest call the core hands a candidate
 * (0 for barrier, 1 byte otherwise). */
typedef struct braid_sel_table {
    uint32_t         need;
    int              nrows[BRAID_COLL_COUNT];
    braid_sel_row_t *rows[BRAID_COLL_COUNT];
} braid_sel_table_t;

/* Tables a communicator keeps, one per memory need it meets: host, device,
 * stream-ordered device, mixed. */
#define BRAID_SEL_TABLES 4

typedef struct braid_selector {
    int                      ncands;
    braid_candidate_t       *cands; /* sorted by name */
    const braid_algo_spec_t *override;
    const braid_tune_t      *tune;
    int                      nranks, nnodes, ppn;
    double                   stage_us;    /* braid_cost_in_t.stage_us */
    double                   reduce_gbps; /* measured (comm/calib.c); 0:
                                             the declared figure */
    /* Groups of ranks that send at once through each host's link, sharing
     * its bandwidth (the rails of a hierarchical call): estimates see the
     * link's bandwidth divided by it.  0 or 1: the link is the group's. */
    int link_share;
    /* Says what a composite's estimate is made of ("host reduce_scatter
     * direct@shm 0.6 us + ...", hier/) and returns 1; 0 for candidates it
     * does not describe.  NULL: none. */
    int (*describe)(const braid_candidate_t *c, braid_coll_t coll,
                    size_t bytes, char *buf, size_t len);
    braid_topo_kind_t topo;
    /* Size-dependent bandwidth of the calibrated transports (comm/calib.c):
     * an estimate for a call sees its transport's beta at the call's
     * working set.  Transports not in it keep their link's figures. */
    int            nbw;
    braid_sel_bw_t bw[BRAID_SEL_MAX_BW];
    int            rank; /* rank 0 prints the tables at info */
    /* Built once per memory need (table.c), read by every call. */
    int               ntables;
    braid_sel_table_t tables[BRAID_SEL_TABLES];
    /* One-entry cache per collective in front of the table: decode repeats
     * one size. */
    size_t   last_bytes[BRAID_COLL_COUNT];
    uint32_t last_mem[BRAID_COLL_COUNT];
    int      last_idx[BRAID_COLL_COUNT];
    /* Collectives without any candidate: why (validate.c), for the error
     * of a call; "" otherwise. */
    char none_why[BRAID_COLL_COUNT][512];
    /* Capabilities a transport declares but lacks on this communicator
     * ("shm: single-copy reads unavailable: ..."), for the error of a call
     * that forces a candidate needing one; "" when none. */
    char caps_note[256];
} braid_selector_t;

/* On a zeroed selector, or again after its candidates or choices changed:
 * drops the tables built so far. */
void braid_selector_init(braid_selector_t *sel);
void braid_selector_fini(braid_selector_t *sel);
/* Builds the table of memory need mem now (the host one at communicator
 * creation: braid_comm_choice then only reads); rank 0 prints it at
 * BRAID_DEBUG=info. */
braid_status_t braid_selector_build(braid_selector_t *sel, uint32_t mem);
/* The candidate for this call (mem: braid_mem_need of its buffers), read
 * from the table of mem (built on first use); only candidates that take
 * that memory are in it.  BRAID_ERR_NOT_SUPPORTED with a message naming
 * what is missing when the override forces something absent or nothing
 * can run it.  Equal estimates go to the candidate whose name sorts first
 * (strcmp); the table says so. */
braid_status_t braid_select(braid_candidate_t **cand, braid_selector_t *sel,
                            braid_coll_t coll, size_t bytes, uint32_t mem);
/* The one-entry cache in front of the table: 1 with *cand when the last
 * decision cached for coll was for this size and memory, else 0.  Inline:
 * a decode loop repeats one size, and this is all its calls ask. */
static inline int braid_select_cached(braid_candidate_t     **cand,
                                      const braid_selector_t *sel,
                                      braid_coll_t coll, size_t bytes,
                                      uint32_t mem)
{
    if (sel->last_bytes[coll] != bytes || sel->last_mem[coll] != mem)
        return 0;
    *cand = &sel->cands[sel->last_idx[coll]];
    return 1;
}
/* The same decision with its reason (and the tie, if any), for
 * braid_comm_choice and braid-info. */
braid_status_t braid_select_explain(braid_selector_t *sel, braid_coll_t coll,
                                    size_t bytes, uint32_t mem, char *cand,
                                    size_t cand_len, char *why,
                                    size_t why_len);
/* The table's rows for coll and mem, built if needed (NULL and 0 rows
 * when out of memory). */
const braid_sel_row_t *braid_select_rows(int *nrows, braid_selector_t *sel,
                                         braid_coll_t coll, uint32_t mem);
/* Row i of those as one line: "16K-1M  ring@shm  (cost model; tie with
 * ring@ucx: first in name order)" -- the range in BRAID_ALGO's syntax,
 * half-open.  braid-info and BRAID_DEBUG=info print these. */
void braid_select_row_format(char *buf, size_t len, braid_selector_t *sel,
                             braid_coll_t coll, uint32_t mem, int i);

/* Internal to select/: the decision for one size, computed (no message,
 * no cache); *skipped: a tuning-file row that named a candidate unable to
 * run it, else NULL. */
braid_pick_t braid_select_decide(const braid_selector_t *sel,
                                 braid_coll_t coll, size_t bytes, uint32_t mem,
                                 const braid_tune_row_t **skipped);
/* The table's pick for one call (the table of mem built if needed; the
 * decision computed when the size lies below the table or no table could
 * be kept). */
braid_pick_t braid_select_find(braid_selector_t *sel, braid_coll_t coll,
                               size_t bytes, uint32_t mem);
/* "cost model", or "cost model; tie with x, y: first in name order": the
 * reason for pick at bytes. */
void braid_select_why(char *buf, size_t len, const braid_selector_t *sel,
                      braid_pick_t pick, braid_coll_t coll, size_t bytes,
                      uint32_t mem);

/* The candidate the cost model alone picks for the call (index into
 * sel->cands, *est its estimate), or -1 when none can run it. */
int braid_select_cheapest(const braid_selector_t *sel, braid_coll_t coll,
                          size_t bytes, uint32_t mem, double *est);
/* Microseconds; negative when it cannot run the call (wrong collective or
 * memory, or its own estimate says so). */
double braid_candidate_estimate(const braid_selector_t  *sel,
                                const braid_candidate_t *cand,
                                braid_coll_t coll, size_t bytes, uint32_t mem);
/* The same for a call whose buffers on every rank come from
 * braid_mem_alloc: the get path priced by what the calibration measured
 * reading such memory (mget), where it did.  A rank cannot know where its
 * peers' buffers come from without asking them, so the selection table
 * never uses it: online tuning's list of rivals does (a candidate that may
 * be the fastest with such buffers gets timed), and so does braid-tune's
 * report for a sweep over them. */
double braid_candidate_estimate_mapped(const braid_selector_t  *sel,
                                       const braid_candidate_t *cand,
                                       braid_coll_t coll, size_t bytes,
                                       uint32_t mem);

/* bw_curve.c: the bytes a call's buffers hold on one rank (the working
 * set at which braid_bw_at reads a path's curve; all 0: the link's figure
 * stands). */
double braid_call_working_set(braid_coll_t coll, size_t bytes, int nranks);

#endif
