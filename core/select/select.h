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

typedef struct braid_selector {
    int                      ncands;
    braid_candidate_t       *cands; /* sorted by name */
    const braid_algo_spec_t *override;
    const braid_tune_t      *tune;
    int                      nranks, nnodes, ppn;
    double                   stage_us; /* braid_cost_in_t.stage_us */
    /* Groups of ranks that send at once through each host's link, sharing
     * its bandwidth (the rails of a hierarchical call): estimates see the
     * link's bandwidth divided by it.  0 or 1: the link is the group's. */
    int                      link_share;
    /* Says what a composite's estimate is made of ("host reduce_scatter
     * direct@shm 0.6 us + ...", hier/) and returns 1; 0 for candidates it
     * does not describe.  NULL: none. */
    int (*describe)(const braid_candidate_t *c, braid_coll_t coll,
                    size_t bytes, char *buf, size_t len);
    braid_topo_kind_t        topo;
    int                      rank;  /* rank 0 explains at BRAID_DEBUG=info */
    /* One-entry cache per collective: decode repeats one size. */
    size_t                   last_bytes[BRAID_COLL_COUNT];
    uint32_t                 last_mem[BRAID_COLL_COUNT];
    int                      last_idx[BRAID_COLL_COUNT];
    uint64_t                 explained[BRAID_COLL_COUNT]; /* bit per log2 class */
    /* Collectives without any candidate: why (validate.c), for the error
     * of a call; "" otherwise. */
    char                     none_why[BRAID_COLL_COUNT][512];
} braid_selector_t;

void braid_selector_init(braid_selector_t *sel);
/* The candidate for this call (mem: braid_mem_need of its buffers); only
 * candidates that take that memory are considered.  BRAID_ERR_NOT_SUPPORTED
 * with a message naming what is missing when the override forces something
 * absent or nothing can run it.  Equal estimates go to the candidate whose
 * name sorts first (strcmp), and rank 0 says so at BRAID_DEBUG=info. */
braid_status_t braid_select(braid_candidate_t **cand, braid_selector_t *sel,
                            braid_coll_t coll, size_t bytes, uint32_t mem);
/* The same decision with its reason (and the tie, if any), for
 * braid_comm_choice and braid-info. */
braid_status_t braid_select_explain(braid_selector_t *sel, braid_coll_t coll,
                                    size_t bytes, uint32_t mem, char *cand,
                                    size_t cand_len, char *why,
                                    size_t why_len);
/* The candidate the cost model alone picks for the call (index into
 * sel->cands, *est its estimate), or -1 when none can run it. */
int braid_select_cheapest(const braid_selector_t *sel, braid_coll_t coll,
                          size_t bytes, uint32_t mem, double *est);
/* Microseconds; negative when it cannot run the call (wrong collective or
 * memory, or its own estimate says so). */
double braid_candidate_estimate(const braid_selector_t *sel,
                                const braid_candidate_t *cand,
                                braid_coll_t coll, size_t bytes, uint32_t mem);

#endif
