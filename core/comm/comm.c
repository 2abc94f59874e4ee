/* Public communicator API: init, split, finalize, queries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/api.h"
#include "util/env.h"
#include "util/log.h"

static braid_status_t comm_create(braid_comm_t **out, braid_bootstrap_t *bs)
{
    braid_comm_t *comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        braid_bootstrap_destroy(bs);
        return braid_error(BRAID_ERR_NO_MEMORY, "communicator: out of memory");
    }
    comm->bs = bs;
    /* Read once: the wait loop compares against it on every poll. */
    comm->timeout_s   = braid_timeout_s();
    braid_status_t st = braid_comm_setup(comm);
    if (st != BRAID_OK) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s", braid_last_error());
        braid_comm_teardown(comm);
        free(comm);
        return braid_error(st, "%s", msg);
    }
    *out = comm;
    return BRAID_OK;
}

BRAID_API braid_status_t braid_init(braid_comm_t **comm)
{
    braid_launch_t     launch;
    braid_bootstrap_t *bs;
    braid_status_t     st;
    double             timeout;

    braid_error_clear();
    if (comm == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_init: comm is NULL");
    *comm = NULL;
    if ((st = braid_env_timeout(&timeout)) != BRAID_OK)
        return st;
    if ((st = braid_launch_from_env(&launch)) != BRAID_OK)
        return braid_launch_failed(st, NULL);
    braid_log_set_rank(launch.rank);
    if ((st = braid_bootstrap_init(&launch, &bs)) != BRAID_OK ||
        (st = comm_create(comm, bs)) != BRAID_OK)
        return braid_launch_failed(st, &launch);
    (*comm)->world = 1;
    braid_launcher_init();
    return BRAID_OK;
}

BRAID_API braid_status_t braid_init_kv(braid_comm_t **comm, int rank, int size,
                                       const braid_kv_t *kv)
{
    braid_bootstrap_t *bs;
    braid_status_t     st;
    double             timeout;

    braid_error_clear();
    if (comm == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_init_kv: comm is "
                                                  "NULL");
    *comm = NULL;
    if ((st = braid_env_timeout(&timeout)) != BRAID_OK)
        return st;
    braid_log_set_rank(rank);
    if ((st = braid_bootstrap_init_kv(rank, size, kv, &bs)) != BRAID_OK)
        return st;
    if ((st = comm_create(comm, bs)) != BRAID_OK)
        return st;
    (*comm)->world = 1;
    braid_launcher_init();
    return BRAID_OK;
}

static braid_status_t split_entered(braid_comm_t *comm, int color, int key,
                                    braid_comm_t **newcomm)
{
    if (comm->failed != BRAID_OK)
        return braid_error(BRAID_ERR_STATE, "communicator failed earlier: %s",
                           comm->failed_msg);
    /* Pending non-blocking calls come first: split must not overtake them. */
    for (braid_call_t *c = comm->head; c != NULL; c = comm->head) {
        braid_status_t st = braid_call_wait(comm, c);
        if (st != BRAID_OK && comm->failed != BRAID_OK)
            return braid_error(BRAID_ERR_STATE, "communicator failed: %s",
                               comm->failed_msg);
    }
    braid_bootstrap_t *child = NULL;
    braid_status_t st = braid_bootstrap_split(comm->bs, color, key, &child);
    if (st != BRAID_OK || child == NULL)
        return st;
    return comm_create(newcomm, child);
}

BRAID_API braid_status_t braid_comm_split(braid_comm_t *comm, int color,
                                          int key, braid_comm_t **newcomm)
{
    braid_error_clear();
    if (comm == NULL || newcomm == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "braid_comm_split: %s is NULL",
                           comm == NULL ? "comm" : "newcomm");
    *newcomm = NULL;
    if (color < 0 && color != BRAID_UNDEFINED)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "braid_comm_split: color %d "
                           "is negative (use BRAID_UNDEFINED to opt out)",
                           color);
    braid_status_t st = braid_comm_enter(comm, BRAID_API_SPLIT);
    if (st != BRAID_OK)
        return st;
    st = split_entered(comm, color, key, newcomm);
    braid_comm_leave(comm);
    return st;
}

BRAID_API braid_status_t braid_finalize(braid_comm_t *comm)
{
    braid_error_clear();
    if (comm == NULL)
        return braid_error(BRAID_ERR_INVALID_ARG,
                           "braid_finalize: comm is NULL");
    braid_status_t est = braid_comm_enter(comm, BRAID_API_FINALIZE);
    if (est != BRAID_OK)
        return est;
    if (comm->pending_requests > 0) {
        braid_comm_leave(comm);
        return braid_error(BRAID_ERR_STATE,
                           "braid_finalize: %d non-blocking "
                           "requests were never completed with braid_wait or "
                           "braid_test",
                           comm->pending_requests);
    }
    /* Let every rank finish its last collective before transports close, so
     * that no peer sees a closed connection as a failure.  A failed
     * communicator skips it: its peers may be gone. */
    braid_status_t st = BRAID_OK;
    if (comm->failed == BRAID_OK && comm->size > 1)
        st = braid_bootstrap_barrier(comm->bs);
    int world = comm->world;
    braid_comm_teardown(comm);
    free(comm);
    if (world)
        braid_launcher_finalize();
    return st;
}

BRAID_API int braid_comm_rank(const braid_comm_t *comm)
{
    return comm ? comm->rank : -1;
}

BRAID_API int braid_comm_size(const braid_comm_t *comm)
{
    return comm ? comm->size : -1;
}

BRAID_API braid_status_t braid_comm_choice(braid_comm_t *comm,
                                           braid_coll_t coll, size_t bytes,
                                           char *cand, size_t cand_len,
                                           char *why, size_t why_len)
{
    braid_error_clear();
    if (comm == NULL || (unsigned)coll >= BRAID_COLL_COUNT)
        return braid_error(BRAID_ERR_INVALID_ARG, "braid_comm_choice: %s",
                           comm == NULL ? "comm is NULL"
                                        : "invalid collective");
    if (comm->size == 1 || (bytes == 0 && coll != BRAID_COLL_BARRIER)) {
        /* Nothing to communicate: the core completes it locally. */
        if (cand && cand_len)
            snprintf(cand, cand_len, "local");
        if (why && why_len)
            snprintf(why, why_len,
                     comm->size == 1 ? "single rank" : "empty message");
        return BRAID_OK;
    }
    /* Host buffers: the public call has no pointer to look at. */
    if (braid_online_explain(comm, coll, bytes, cand, cand_len, why, why_len))
        return BRAID_OK;
    return braid_select_explain(&comm->sel, coll, bytes,
                                braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST),
                                cand, cand_len, why, why_len);
}
