/* What every communicator (world or split) needs once its bootstrap channel
 * is up: plugins, the user's choices, topology, transports, candidates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/calib.h"
#include "comm/comm.h"
#include "select/validate.h"
#include "util/env.h"
#include "util/log.h"

#define LOG_COMP "comm"
/* One scheduler hand-off between two ranks of a core (sched_yield, then
 * the next rank's poll), the order of magnitude measured
 * (docs/performance.md). */
#define BRAID_HANDOFF_US 1.0
/* Bound of each wait in the teardown of a failed communicator's
 * transports.  Nothing there is worth waiting for -- a flush towards a
 * stopped peer never ends, and what it would deliver belongs to a failed
 * call -- so it only has to let a live peer's close go through. */
#define BRAID_FAILED_TEARDOWN_S 0.05

static braid_status_t oob_allgather(void *ctx, const void *sendbuf,
                                    void *recvbuf, size_t len)
{
    return braid_bootstrap_allgather(ctx, sendbuf, recvbuf, len);
}

static braid_status_t oob_barrier(void *ctx)
{
    return braid_bootstrap_barrier(ctx);
}

void braid_comm_oob_init(braid_oob_t *oob, braid_bootstrap_t *bs)
{
    *oob = (braid_oob_t){sizeof(braid_oob_t),
                         braid_bootstrap_rank(bs),
                         braid_bootstrap_size(bs),
                         bs,
                         oob_allgather,
                         oob_barrier};
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* What each rank read from its environment.  Ranks that disagree would choose
 * different candidates and deadlock, so a difference is an error at init. */
typedef struct config_print {
    int32_t  status; /* this rank's parse result */
    int32_t  topo;
    int32_t  check;       /* BRAID_CHECK */
    uint32_t sleep_polls; /* BRAID_SLEEP_POLLS */
    uint64_t algo_hash;
    uint64_t tune_hash;
    uint64_t online_hash; /* BRAID_ONLINE* */
} config_print_t;

static braid_status_t read_choices(braid_comm_t *comm, config_print_t *print)
{
    const uint64_t seed = 14695981039346656037ull;
    long long      check;
    braid_status_t cst = braid_env_int("BRAID_CHECK", 0, 0, 1, &check);
    if (cst != BRAID_OK)
        return cst;
    comm->check  = (int)check;
    print->check = (int32_t)check;
    long long sleep_polls;
    cst = braid_env_int("BRAID_SLEEP_POLLS", 0, 0, 1000000000, &sleep_polls);
    if (cst != BRAID_OK)
        return cst;
    comm->sleep_polls  = (unsigned)sleep_polls;
    print->sleep_polls = (uint32_t)sleep_polls;
    if ((cst = braid_online_read_env(&comm->online)) != BRAID_OK)
        return cst;
    const braid_online_t *on = &comm->online;
    print->online_hash       = fnv1a(seed, &on->on, sizeof(on->on));
    print->online_hash =
        fnv1a(print->online_hash, &on->within, sizeof(on->within));
    print->online_hash =
        fnv1a(print->online_hash, &on->max_bytes, sizeof(on->max_bytes));
    print->online_hash =
        fnv1a(print->online_hash, &on->drift, sizeof(on->drift));
    print->online_hash =
        fnv1a(print->online_hash, &on->stand_in, sizeof(on->stand_in));
    const char    *algo = getenv("BRAID_ALGO");
    braid_status_t st   = braid_algo_spec_parse(&comm->override, algo);
    print->algo_hash = fnv1a(seed, algo ? algo : "", algo ? strlen(algo) : 0);
    /* Names checked against the plugins found (validate.c). */
    if (st == BRAID_OK)
        st = braid_validate_plugins(getenv("BRAID_PLUGINS"), comm->plugins);
    if (st == BRAID_OK)
        st = braid_validate_algo(&comm->override, algo, comm->plugins);
    if (st != BRAID_OK)
        return st;
    const char *tune = getenv("BRAID_TUNE_FILE");
    print->tune_hash = seed;
    if (tune != NULL && *tune != '\0') {
        if ((st = braid_tune_load(&comm->tune, tune)) != BRAID_OK)
            return st;
        print->tune_hash =
            fnv1a(seed, comm->tune.rows,
                  sizeof(braid_tune_row_t) * (size_t)comm->tune.n);
    }
    return BRAID_OK;
}

/* Every rank fails together, each with the first fault it can name. */
static braid_status_t agree_on_choices(braid_comm_t   *comm,
                                       braid_status_t  local,
                                       config_print_t *mine)
{
    char saved[512];
    snprintf(saved, sizeof(saved), "%s", braid_last_error());
    mine->status        = local;
    mine->topo          = (int32_t)comm->topo.kind;
    config_print_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL)
        return braid_error(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t st =
        braid_bootstrap_allgather(comm->bs, mine, all, sizeof(*mine));
    if (st != BRAID_OK)
        goto out;
    if (local != BRAID_OK) {
        st = braid_error(local, "%s", saved);
        goto out;
    }
    for (int r = 0; r < comm->size; r++) {
        const char *what = all[r].status != BRAID_OK             ? NULL
                           : all[r].algo_hash != mine->algo_hash ? "BRAID_ALGO"
                           : all[r].tune_hash != mine->tune_hash
                               ? "BRAID_TUNE_FILE (contents)"
                           : all[r].topo != mine->topo   ? "BRAID_TOPO"
                           : all[r].check != mine->check ? "BRAID_CHECK"
                           : all[r].online_hash != mine->online_hash
                               ? "BRAID_ONLINE, BRAID_ONLINE_WITHIN, "
                                 "BRAID_ONLINE_MAX or BRAID_ONLINE_DRIFT"
                           : all[r].sleep_polls != mine->sleep_polls
                               ? "BRAID_SLEEP_POLLS"
                               : "";
        if (what == NULL) {
            st = braid_error((braid_status_t)all[r].status,
                             "rank %d failed to "
                             "read its configuration (%s); see its error",
                             r, braid_status_str(all[r].status));
            goto out;
        }
        if (*what) {
            st = braid_error(BRAID_ERR_MISMATCH,
                             "rank %d's %s differs from "
                             "rank %d's: every rank must be given the same "
                             "choices or they would pick different algorithms",
                             r, what, comm->rank);
            goto out;
        }
    }
out:
    free(all);
    return st;
}

braid_status_t braid_comm_setup(braid_comm_t *comm)
{
    braid_status_t st;
    config_print_t print;
    memset(&print, 0, sizeof(print));

    comm->rank = braid_bootstrap_rank(comm->bs);
    comm->size = braid_bootstrap_size(comm->bs);
    braid_comm_oob_init(&comm->oob, comm->bs);
    if ((st = braid_loader_acquire(&comm->plugins)) != BRAID_OK)
        return st;
    if ((st = braid_topo_detect(comm)) != BRAID_OK)
        return st;
    st = read_choices(comm, &print);
    if ((st = agree_on_choices(comm, st, &print)) != BRAID_OK)
        return st;
    if ((st = braid_board_open(comm)) != BRAID_OK)
        return st;
    if ((st = braid_comm_open_transports(comm)) != BRAID_OK)
        return st;
    /* From here on a failed call is judged by every rank together. */
    braid_comm_inquiry_attach(comm);

    braid_selector_init(&comm->sel);
    braid_validate_why_none(&comm->sel, comm->plugins, comm->tls, comm->ntls);
    comm->sel.override = &comm->override;
    comm->sel.tune     = &comm->tune;
    comm->sel.nranks   = comm->size;
    comm->sel.nnodes   = comm->topo.nnodes;
    comm->sel.ppn      = comm->topo.ppn;
    comm->sel.topo     = comm->topo.kind;
    comm->sel.rank     = comm->rank;

    /* More ranks than cores on a host: a rank that spins steals the core its
     * peer needs to make progress, so yield at once; otherwise spin a little
     * first (see braid_call_wait). */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    /* Ranks on one machine share its cores even on different (emulated)
     * hosts. */
    comm->oversubscribed = comm->machine_ppn > ncpu;
    /* ... and the cost model charges each stage the hand-offs it then
     * needs, so that one stage beats two by more than a cache line's
     * latency (where oneshot and twoshot cross then: docs/performance.md).
     * Only on one host: the estimate must be the same on every rank, and
     * hosts can differ in cores. */
    comm->sel.stage_us =
        comm->oversubscribed && comm->topo.nnodes == 1
            ? BRAID_HANDOFF_US * (double)comm->topo.ppn / (double)ncpu
            : 0.0;
    /* The links, stage and reduction figures measured on this machine (or
     * read from the calibration cache) replace the declared ones. */
    if ((st = braid_calib_apply(comm)) != BRAID_OK)
        return st;

    if (comm->rank == 0 && braid_log_level() >= BRAID_LOG_INFO) {
        char list[1024] = "";
        for (int i = 0; i < comm->sel.ncands; i++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list),
                     "%s%s:%s", i ? " " : "",
                     braid_coll_name(comm->sel.cands[i].algo->coll),
                     comm->sel.cands[i].name);
        char cpus[256] = "";
        for (int r = 0; r < comm->size && strlen(cpus) < sizeof(cpus) - 16;
             r++)
            snprintf(cpus + strlen(cpus), sizeof(cpus) - strlen(cpus), "%s%d",
                     r ? " " : "", comm->cpu_of_rank[r]);
        braid_log(BRAID_LOG_INFO, LOG_COMP,
                  "%d ranks on %d nodes (ppn %d), "
                  "pinned to CPUs [%s] (-1: not pinned), %d transports, "
                  "candidates: %s",
                  comm->size, comm->topo.nnodes, comm->topo.ppn, cpus,
                  comm->ntls, list[0] ? list : "none");
    }
    /* Every call reads the table; host memory's is built now (printed at
     * BRAID_DEBUG=info), the others on their first call. */
    return braid_selector_build(
        &comm->sel, braid_mem_need(BRAID_MEM_HOST, BRAID_MEM_HOST));
}

void braid_comm_teardown(braid_comm_t *comm)
{
    /* After a failure the peers may be gone or stopped: no wait of the
     * transports' teardown (a flush, a close) may then last longer than
     * BRAID_FAILED_TEARDOWN_S, whatever BRAID_TIMEOUT says. */
    if (comm->failed != BRAID_OK)
        braid_timeout_cap(BRAID_FAILED_TEARDOWN_S);
    braid_comm_close_transports(comm);
    braid_timeout_cap(0);
    braid_calib_free(comm);
    braid_board_close(comm);
    braid_tune_free(&comm->tune);
    braid_online_free(&comm->online);
    free(comm->node_of_rank);
    comm->node_of_rank = NULL;
    free(comm->cpu_of_rank);
    comm->cpu_of_rank = NULL;
    free(comm->cpu_mate);
    comm->cpu_mate = NULL;
    if (comm->plugins != NULL) {
        braid_loader_release();
        comm->plugins = NULL;
    }
    if (comm->bs != NULL) {
        braid_bootstrap_destroy(comm->bs);
        comm->bs = NULL;
    }
}
