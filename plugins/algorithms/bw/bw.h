/* Internals of the bw plugin: bandwidth-bound all-reduce, reduce_scatter and
 * allgather for large messages, with no size cap.  Shared by its files and
 * by the unit tests (tests/unit/bw).
 *
 * Both engines cut the reduced data into n slices, slice j owned by rank j,
 * and every slice into chunks small enough that what a rank reduces stays
 * in its cache (chunk.c):
 *
 *   pull  (BRAID_CAP_GET + PUT_SIGNAL: shm with cross-memory attach)
 *         single copy: the owner reads its slice of every peer's send
 *         buffer straight from the peer's memory, chunk by chunk into a
 *         cache-sized buffer, reduces in rank order into its receive
 *         buffer, and says how far it got; every rank reads the finished
 *         chunks of the other slices straight from their owners' receive
 *         buffers.  About (3n-1)·S bytes of memory traffic (pull.c).
 *   pipe  (PUT_SIGNAL only: the copy path, on any put transport)
 *         every rank writes chunk c of slice j into a bounded slot ring in
 *         rank j's registered area; the owner folds the chunk in rank order
 *         once every piece is in and writes the result into a slot ring of
 *         every peer, which copies it out.  Slots are reused under credit
 *         flow control, so memory stays bounded whatever the size (pipe.c).
 *
 * Every chunk is reduced by one rank, contributions in rank order, and the
 * others copy its bits: results are bitwise identical on every rank. */
#ifndef BRAID_BW_BW_H
#define BRAID_BW_BW_H

#include <stddef.h>
#include <stdint.h>

#include <braid/plugin.h>

#define BRAID_BW_COMPONENT "bw"
#define BRAID_BW_LINE      64

/* Chunk sizes (bytes), from the sweep in docs/performance.md ("bw
 * plugin: chunk sizes"; bench/chunk_sweep.sh rebuilds the plugin with
 * other values): a pull chunk and its staging buffers stay in a core's
 * L2; a pipe chunk times the slots in flight stays in L3. */
#ifndef BRAID_BW_PULL_CHUNK
#define BRAID_BW_PULL_CHUNK ((size_t)256 << 10)
#endif
#ifndef BRAID_BW_PIPE_CHUNK
#define BRAID_BW_PIPE_CHUNK ((size_t)64 << 10)
#endif
#ifndef BRAID_BW_PIPE_DEPTH
#define BRAID_BW_PIPE_DEPTH 4 /* slots per (writer, reader) pair */
#endif
/* Declared for the cost model where no calibration measured the put path
 * beyond the caches (cost.c; docs/performance.md, "bw plugin: where the
 * choice moves"): a last-level cache the copy path's slots and buffers
 * share, and the rate of a copy whose source and destination stream from
 * memory with the host's other ranks copying at once.  The same constants
 * on every host, so that every rank ranks alike. */
#define BRAID_BW_CACHE_BYTES    ((size_t)32 << 20)
#define BRAID_BW_DRAM_COPY_GBPS 3.0
/* Smallest chunk: below it a chunk costs more in flags than it moves. */
#define BRAID_BW_MIN_CHUNK ((size_t)4 << 10)
/* Chunks per slice are counted in 24 bits of a flag (pull.c). */
#define BRAID_BW_MAX_CHUNKS ((UINT64_C(1) << 24) - 1)
/* Largest get at once in the allgather phase (several finished chunks of
 * one owner in one read): long enough to amortise the syscall, short
 * enough to keep a progress call bounded. */
#ifndef BRAID_BW_PULL_MAX_GET
#define BRAID_BW_PULL_MAX_GET ((size_t)1 << 20)
#endif
/* Bytes a progress call moves before it returns (so the core can look at
 * timeouts, dead peers and, on a shared core, yield). */
#ifndef BRAID_BW_BUDGET
#define BRAID_BW_BUDGET ((size_t)4 << 20)
#endif

/* ------------------------------------------------------------ chunk.c */

/* How a collective's data is cut.  Element counts; slice j is owned (and
 * reduced) by rank j.
 *   allreduce:      count elements, slice j = the j-th of n near-equal
 *                   parts (the first count % n one element longer);
 *   reduce_scatter: slice j = elements [j·count, (j+1)·count) of the send
 *                   buffer, reduced into rank j's receive buffer;
 *   allgather:      slice j = rank j's count elements, copied to
 *                   [j·count, (j+1)·count) of every receive buffer. */
typedef struct braid_bw_plan {
    braid_coll_t coll;
    int          n;
    size_t       count; /* as in the call */
    size_t       chunk; /* elements per chunk (>= 1) */
} braid_bw_plan_t;

/* Fills plan; chunk_bytes is the wanted chunk (rounded down to whole
 * elements, at least one, and raised where a slice would need more than
 * BRAID_BW_MAX_CHUNKS chunks). */
void braid_bw_plan(braid_bw_plan_t *plan, braid_coll_t coll, int n,
                   size_t count, size_t dtsize, size_t chunk_bytes);
/* First element of slice j in the (send) buffer it is cut from, and its
 * length in elements. */
size_t braid_bw_slice_off(const braid_bw_plan_t *plan, int j);
size_t braid_bw_slice_len(const braid_bw_plan_t *plan, int j);
/* Chunks of slice j (0 for an empty slice). */
size_t braid_bw_nchunks(const braid_bw_plan_t *plan, int j);
/* Chunk c of slice j: offset from the slice's start, and length. */
size_t braid_bw_chunk_off(const braid_bw_plan_t *plan, size_t c);
size_t braid_bw_chunk_len(const braid_bw_plan_t *plan, int j, size_t c);
/* Most chunks any slice has. */
size_t braid_bw_max_chunks(const braid_bw_plan_t *plan);

/* ------------------------------------------------------------- cost.c */

double braid_bw_cost_pull(const braid_cost_in_t *in);
double braid_bw_cost_pipe(const braid_cost_in_t *in);
/* Whether pipe writes its slots with streaming stores (where they live in
 * the writers' areas, BRAID_CAP_LOAD) for a call of coll over n ranks,
 * ppn of them on this host (< 1: all n), m bytes a rank as the dispatcher
 * counts them: an allgather always, a reduction once the host's send and
 * receive buffers together outgrow BRAID_BW_CACHE_BYTES (pipe.c says why).
 * The same rule for the run (pipe.c) and the estimate (cost.c). */
int braid_bw_pipe_streams(braid_coll_t coll, int n, int ppn, double m);

/* ------------------------------------------------------------ common.c */

/* mate[r] = 1 for every rank sharing this rank's CPU; returns how many, -1
 * when this rank is not pinned (svc->cpu_mates). */
int braid_bw_mates(unsigned char *mate, const braid_task_t *task);
/* 1 when no rank in want[] (want[r] != 0) shares this rank's CPU: a wait for
 * them alone is BRAID_WAIT_REMOTE.  0 when unpinned (nmates < 0). */
int braid_bw_only_remote(const unsigned char *mate, int nmates,
                         const unsigned char *want, int n);
/* Zeroed task->priv of size bytes; braid_bw_priv_free frees it. */
braid_status_t braid_bw_priv_alloc(braid_task_t *task, size_t size);
void           braid_bw_priv_free(braid_task_t *task);
/* What a call with one rank (or nothing to move) leaves: the own
 * contribution copied to its place, avg over one rank. */
void braid_bw_local_result(braid_task_t *task);
/* The flag word at byte off of this rank's registered area (acquire: the
 * data put before it is visible once it is). */
static inline uint64_t braid_bw_flag_at(const braid_rmem_t *mem, size_t off)
{
    return __atomic_load_n(
        (const uint64_t *)(const void *)((const char *)mem->local + off),
        __ATOMIC_ACQUIRE);
}
/* 64-byte aligned allocation, zeroed. */
void *braid_bw_alloc(size_t bytes);

/* The algorithms. */
extern const braid_algo_t braid_bw_pull_allreduce;
extern const braid_algo_t braid_bw_pull_reduce_scatter;
extern const braid_algo_t braid_bw_pull_allgather;
extern const braid_algo_t braid_bw_pipe_allreduce;
extern const braid_algo_t braid_bw_pipe_reduce_scatter;
extern const braid_algo_t braid_bw_pipe_allgather;

/* The descriptor of one collective of a bw algorithm `algo` (pipe, pull),
 * whose functions are <algo>_start, <algo>_progress, ... in its file. */
#define BRAID_BW_ALGO(var, algo, caps, coll_)                                 \
    const braid_algo_t var = {                                                \
        .struct_size     = sizeof(braid_algo_t),                              \
        .flags           = BRAID_ALGO_RANK_ORDER, /* pipe's fold, pull's */   \
        .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),                     \
        .name            = #algo,                                             \
        .coll            = coll_,                                             \
        .needs_caps      = caps,                                              \
        .estimate        = algo##_estimate,                                   \
        .start           = algo##_start,                                      \
        .progress        = algo##_progress,                                   \
        .finish          = algo##_finish,                                     \
        .comm_state_free = algo##_comm_free,                                  \
    }

#endif
