/* The machinery the core lends algorithms through the services (revision 2
 * of braid_services_t): what it keeps for one (communicator, candidate),
 * and the service functions, one file each:
 *
 *   state.c    per-call state, kept from call to call
 *   scratch.c  scratch memory, grown as needed
 *   area.c     the registered area, grown collectively
 *   reqs.c     request sets: test and cancel
 *
 * Every function takes the task, and finds the candidate's resources in
 * task->res.  Without them (res NULL: a unit test driving an algorithm by
 * hand) state and scratch are plain allocations and there is no area. */
#ifndef BRAID_CORE_ALGO_RES_H
#define BRAID_CORE_ALGO_RES_H

#include <braid/plugin.h>

/* Reduction kernels vectorise, and a state block holds request arrays
 * that the transport writes: blocks start on a cache line. */
#define BRAID_RES_ALIGN 64

struct braid_res {
    /* state.c */
    void  *state;
    size_t state_cap;  /* bytes allocated */
    size_t state_size; /* what the last call asked for */
    int    state_busy; /* held by the call in flight */
    /* scratch.c */
    void  *scratch;
    size_t scratch_cap;
    int    scratch_busy;
    /* area.c: local NULL until the first area_get */
    braid_rmem_t area;
};

/* Zeroed resources of one (communicator, candidate); NULL when out of
 * memory.  destroy frees what they hold (the area on tl, which must still
 * be open); NULL is fine. */
braid_res_t *braid_res_create(void);
void         braid_res_destroy(braid_res_t *res, braid_tl_t *tl);

/* A zeroed block of size bytes aligned to BRAID_RES_ALIGN, or NULL. */
void *braid_res_zalloc(size_t size);

/* The services (plugin.h has the contract of each). */
braid_status_t braid_state_get(braid_task_t *task, size_t size, int *recycled);
void           braid_state_put(braid_task_t *task);
braid_status_t braid_scratch_get(braid_task_t *task, size_t bytes, void **buf);
void           braid_scratch_put(braid_task_t *task, void *buf);
braid_status_t braid_area_get(braid_task_t *task, size_t bytes,
                              braid_rmem_t **mem, int *grown);
braid_status_t braid_reqs_test(braid_task_t *task, braid_treq_t *reqs, int n,
                               int *ndone);
void braid_reqs_cancel(braid_task_t *task, braid_treq_t *reqs, int n);

/* The parts of destroy, one per file. */
void braid_state_release(braid_res_t *res);
void braid_scratch_release(braid_res_t *res);
void braid_area_release(braid_res_t *res, braid_tl_t *tl);

#endif
