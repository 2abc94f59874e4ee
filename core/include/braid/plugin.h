/* braid plugin ABI, version 4.
 *
 * A plugin is a shared object named libbraid-<name>.so exporting one symbol,
 * `braid_plugin_v4` (a const braid_plugin_t).  The core reads abi_version
 * and struct_size before anything else.  It also loads plugins built for
 * ABI 3 (symbol braid_plugin_v3) through an adapter, and refuses, saying
 * why, anything older, newer, or with a struct smaller than ABI 4's.
 *
 * Growth.  Every struct below carries its size in struct_size (the first
 * field; braid_plugin_t: the second, after abi_version), and fields are only
 * ever appended.  So the core and a plugin built against different minor
 * revisions of this header still agree:
 *   - a struct the plugin fills (plugin, transport, algorithm) may be larger
 *     than the core knows (the core ignores the tail) but never smaller than
 *     ABI 4's first revision (the loader refuses it);
 *   - a struct the core fills (services, task, topology, ...) may be smaller
 *     than the plugin knows: read a field appended later only when
 *     BRAID_HAS(ptr, type, field) says the core wrote it.
 * Revisions so far: 1, the first; 2 appended the shared algorithm machinery
 * to braid_services_t (per-call state, scratch, registered areas, request
 * sets), task->res, and topo->mates; 3 appended loads from peers' areas
 * (BRAID_CAP_LOAD, transport->mem_peer) and cost_in->caps; 4 defined the
 * algorithm flag BRAID_ALGO_RANK_ORDER (no struct changed); 5 appended a
 * message's overhead to braid_link_t (msg_us, put_msg_us); 6 defined the
 * algorithm flag BRAID_ALGO_CORE_REDUCE (no struct changed).
 * The exceptions are braid_treq_t and braid_rmem_t: callers embed them by
 * value (arrays of requests), so their layout is fixed for good; a transport
 * keeps anything more behind their handle/impl pointer.
 *
 * A plugin sees only this header, braid.h, and the services the core hands it
 * (braid_services_t); it never links against core internals.
 * docs/writing-a-plugin.md is the guide; every rule is also stated here. */
#ifndef BRAID_PLUGIN_H
#define BRAID_PLUGIN_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_PLUGIN_ABI_VERSION  4u
#define BRAID_PLUGIN_SYMBOL       "braid_plugin_v4"
#define BRAID_PLUGIN_ABI_REVISION 6u /* of ABI 4: see "Revisions" above */

/* Whether *ptr (a struct of this header that the core filled) has field. */
#define BRAID_HAS(ptr, type, field)                                           \
    ((ptr)->struct_size >=                                                    \
     offsetof(type, field) + sizeof(((const type *)0)->field))

/* ------------------------------------------------------------ memory types */

/* Where a buffer lives.  Every buffer of a call has one; an algorithm (and
 * a transport) declares the types it takes as a mask of BRAID_MEM_BIT()s,
 * and the core never offers a candidate a call whose buffers it cannot
 * take.  0 in a mask means host memory only. */
typedef enum {
    BRAID_MEM_HOST = 0, /* ordinary process memory */
    BRAID_MEM_CUDA = 1, /* CUDA device memory */
    BRAID_MEM_KINDS
} braid_mem_t;

#define BRAID_MEM_BIT(m) (1u << (m))

/* ---------------------------------------------------------------- topology */

typedef enum {
    BRAID_TOPO_SINGLE_HOST = 0, /* every rank on one host */
    BRAID_TOPO_SWITCH,          /* hosts behind one switch: any pair one hop */
    BRAID_TOPO_RING,            /* hosts cabled as a ring: i <-> i+1 direct */
} braid_topo_kind_t;

typedef struct braid_topo {
    uint32_t          struct_size;
    int               size; /* ranks of the communicator */
    braid_topo_kind_t kind;
    int               nnodes;       /* distinct hosts */
    int               ppn;          /* max ranks per host */
    const int        *node_of_rank; /* [size] host index, hosts numbered in
                                       order of their lowest rank */
    /* [size] the one CPU a rank is pinned to (braidrun's default, mpirun
     * --bind-to core), -1 when it may run on several.  Ranks on one node
     * with the same CPU >= 0 take turns on it: svc->cpu_mates lists them. */
    const int *cpu_of_rank;
    /* Appended in revision 2.  The CPU mates of this process's rank, as
     * svc->cpu_mates lists them, computed once per communicator: mates[r]
     * = 1 for every other rank pinned to its CPU on its host ([size]), and
     * nmates of them; -1 (all 0) when the rank is not pinned to one CPU. */
    const unsigned char *mates;
    int                  nmates;
} braid_topo_t;

/* ----------------------------------------------- requests and areas */

/* Request storage owned by the caller (usually inside algorithm state).
 * Fixed layout (see the top).  A request may already be complete when
 * isend/irecv/put_signal returns: then active is 0, and test() of an
 * inactive request returns BRAID_OK at once. */
typedef struct braid_treq {
    void *handle; /* transport's; NULL when completed or never posted */
    int   active; /* 1 while posted and not yet seen complete by test */
} braid_treq_t;

/* Registered memory area allocated collectively on every rank.  Fixed
 * layout (see the top). */
typedef struct braid_rmem {
    void  *local; /* this rank's area (len bytes, zero-filled) */
    size_t len;
    void  *impl; /* transport's keys */
} braid_rmem_t;

/* ---------------------------------------------------------------- services */

typedef enum {
    BRAID_LOG_ERROR = 0,
    BRAID_LOG_WARN,
    BRAID_LOG_INFO,
    BRAID_LOG_DEBUG,
    BRAID_LOG_TRACE
} braid_log_level_t;

struct braid_task;
/* What the core keeps for one (communicator, candidate) behind the shared
 * algorithm machinery of the services (the per-call state, the scratch
 * buffer, the registered area).  Opaque; reached through task->res. */
typedef struct braid_res braid_res_t;

/* One allocation of braid_mem_alloc holding a buffer (svc->mem_shared_find):
 * the memfd that backs it in this process, the file's inode (which tells a
 * duplicate of the fd taken by a peer from another file that got the same
 * number since), and where the buffer starts in it. */
typedef struct braid_mem_shared {
    int      fd;
    uint64_t ino;
    uint64_t off; /* of the buffer, from the start of the file */
    uint64_t len; /* of the file, bytes (whole pages) */
} braid_mem_shared_t;

/* Handed by the core to every plugin entry point. */
typedef struct braid_services {
    uint32_t struct_size;
    /* Logging, filtered by BRAID_DEBUG.  component: "ucx", "example", ... */
    void (*log)(braid_log_level_t level, const char *component,
                const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    /* Records the message returned by braid_last_error(); returns status. */
    braid_status_t (*error)(braid_status_t status, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    /* inout[i] = inout[i] op in[i] for i < count.  AVG reduces as SUM; the
     * algorithm calls finish_avg once on the final result. */
    void (*reduce)(void *inout, const void *in, size_t count,
                   braid_dtype_t dtype, braid_op_t op);
    /* dst[i] = a[i] op b[i]  (dst may alias a or b). */
    void (*reduce2)(void *dst, const void *a, const void *b, size_t count,
                    braid_dtype_t dtype, braid_op_t op);
    /* buf[i] /= n for BRAID_AVG; no-op for other ops. */
    void (*finish_avg)(void *buf, size_t count, braid_dtype_t dtype,
                       braid_op_t op, int n);
    /* BRAID_TIMEOUT in seconds.  The core enforces it on every call; a
     * plugin uses it only to bound what it does on its own (a collective
     * setup step, a cancel, a teardown), never on a pending request. */
    double (*timeout_s)(void);
    /* Monotonic clock in seconds. */
    double (*now)(void);
    /* The ranks that take turns with `rank` on its CPU: mate[r] = 1 for
     * every other rank pinned to the same CPU of the same host, else 0
     * (mate has topo->size entries).  Returns how many, or -1 -- all 0 --
     * when rank is not pinned to one CPU: who shares it is then unknown,
     * so no wait of it may be reported as BRAID_WAIT_REMOTE. */
    int (*cpu_mates)(const braid_topo_t *topo, int rank, unsigned char *mate);
    /* Polls in a row reporting BRAID_WAIT_PEER after which the core sleeps
     * in the transport's wait() on a host with more ranks than cores
     * (BRAID_SLEEP_POLLS; the same on every rank of a communicator; 0:
     * never).  A transport whose wait() sleeps wakes sleeping peers while
     * this is > 0 and may skip that work when it is 0. */
    unsigned (*sleep_polls)(void);

    /* Revision 2: the machinery algorithms share.  A plugin that uses it
     * checks BRAID_HAS_MACHINERY(svc) in its probe (and, when it lacks,
     * says BRAID_NO_MACHINERY_WHY); a core that has it also fills
     * task->res and topo->mates.  Everything
     * works on the (communicator, candidate) of the task, whose calls never
     * overlap (a start comes only after the previous call's finish).  The
     * chunk arithmetic is inline, below (braid_chunk_off). */

    /* Per-call state: sets task->priv to a block of size bytes (aligned to
     * 64).  The core keeps the block of this (communicator, candidate)
     * from call to call, so a stream of calls does not allocate.  With
     * recycled NULL the block is zeroed; otherwise *recycled is 1 when it
     * is the previous call's block, of the same size, left as that call's
     * finish() left it (the caller resets what it needs), else 0 and the
     * block is zeroed. */
    braid_status_t (*state_get)(struct braid_task *task, size_t size,
                                int *recycled);
    /* Gives task->priv back (NULL is fine) and sets it NULL: the last step
     * of finish(). */
    void (*state_put)(struct braid_task *task);
    /* Scratch memory: *buf = bytes bytes aligned to 64, contents undefined:
     * this (communicator, candidate)'s buffer, grown as needed, until
     * scratch_put.  NULL for 0 bytes. */
    braid_status_t (*scratch_get)(struct braid_task *task, size_t bytes,
                                  void **buf);
    void (*scratch_put)(struct braid_task *task, void *buf);
    /* The registered area of this (communicator, candidate) on task->tl
     * (BRAID_CAP_PUT_SIGNAL): *mem holds at least bytes bytes.  When it is
     * smaller, a new zero-filled area of exactly bytes replaces it, which
     * is collective: every rank asks for the same bytes in the same call
     * (derive them from the call's arguments and the area's history, never
     * from timing), and only when nothing of a peer is in flight into the
     * old area (docs/writing-a-plugin.md: a call that completes only once
     * every write addressed to it arrived makes start() such a point).
     * The old area is freed after the new one exists (freeing may wait on
     * peers that are still inside the collective allocation).  *grown
     * (may be NULL) says whether it was replaced.  The core frees the area
     * when the communicator is destroyed. */
    braid_status_t (*area_get)(struct braid_task *task, size_t bytes,
                               braid_rmem_t **mem, int *grown);
    /* Request sets on task->tl.  reqs_test tests every active request of
     * reqs[0..n): BRAID_OK when none is left active, BRAID_INPROGRESS, or
     * the first error (the transport's message stands); *ndone (may be
     * NULL) counts the inactive ones.  reqs_cancel withdraws every request
     * still active (finish after an error): when it returns the transport
     * no longer touches their buffers. */
    braid_status_t (*reqs_test)(struct braid_task *task, braid_treq_t *reqs,
                                int n, int *ndone);
    void (*reqs_cancel)(struct braid_task *task, braid_treq_t *reqs, int n);

    /* Revision 3 (check BRAID_HAS(svc, braid_services_t, copy) first).
     * mem_shared_find: 1, and *out filled, when [ptr, ptr + len) lies
     * inside one live allocation of braid_mem_alloc, a memfd mapped shared,
     * which a peer allowed to read this process's memory can map from
     * out->fd (pidfd_getfd); else 0.  The allocation may be freed after the
     * call returns: a transport that maps it holds on to the file, not to
     * this answer. */
    int (*mem_shared_find)(const void *ptr, size_t len,
                           braid_mem_shared_t *out);
    /* dst = src, n bytes.  stream 1: with streaming (non-temporal) stores
     * where the CPU has them, for data nobody reads again soon (the
     * destination's lines are neither read first nor left in the cache);
     * fenced before it returns. */
    void (*copy)(void *dst, const void *src, size_t n, int stream);
} braid_services_t;

/* The services include revision 2's machinery (above); the reason a
 * plugin that needs it gives when they do not. */
#define BRAID_HAS_MACHINERY(svc) BRAID_HAS(svc, braid_services_t, reqs_cancel)
#define BRAID_NO_MACHINERY_WHY                                                \
    "this libbraid lacks the shared algorithm services (plugin ABI 4 "        \
    "revision 2)"

/* count elements cut into n chunks as evenly as possible: the first
 * count % n chunks have one element more.  Chunk c (0 <= c < n) starts at
 * element braid_chunk_off and holds braid_chunk_len elements.  Inline:
 * arithmetic on the hot path of every chunked algorithm. */
static inline size_t braid_chunk_off(size_t count, int n, int c)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n;
    return (size_t)c * base + ((size_t)c < rem ? (size_t)c : rem);
}

static inline size_t braid_chunk_len(size_t count, int n, int c)
{
    return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

/* --------------------------------------------------------------- bootstrap */

/* Out-of-band channel of one communicator (TCP, through the core's
 * bootstrap).  Collective: every rank of the communicator calls it in the same
 * order.  Valid for the whole life of the communicator. */
typedef struct braid_oob {
    uint32_t struct_size;
    int      rank;
    int      size;
    void    *ctx;
    /* recvbuf receives size*len bytes, rank r's contribution at r*len. */
    braid_status_t (*allgather)(void *ctx, const void *sendbuf, void *recvbuf,
                                size_t len);
    braid_status_t (*barrier)(void *ctx);
} braid_oob_t;

/* Link parameters of a transport on one communicator.  The two-sided and
 * one-sided paths of one transport can differ a lot (shm's send/recv copies
 * twice through bounded cells, its put copies once), so each is declared on
 * its own: algorithms built on isend/irecv read alpha/beta, algorithms built
 * on put_signal read put_alpha/put_beta.  A transport without
 * BRAID_CAP_PUT_SIGNAL leaves the put pair 0.  The core zero-fills it and
 * sets struct_size; link() sets the fields it knows, one by one (never by
 * copying a whole struct over it). */
typedef struct braid_link {
    uint32_t struct_size;
    double   alpha_us;      /* two-sided: per-message latency, microseconds */
    double   beta_gbps;     /* two-sided: bandwidth, GB/s (1e9 bytes/s) */
    double   put_alpha_us;  /* put_signal: until the flag is visible */
    double   put_beta_gbps; /* put_signal: bandwidth, GB/s */
    /* ---- appended in revision 5 (BRAID_HAS(link, braid_link_t, field)):
     * what one more message in a stage costs (us), on each path: a stage
     * in which a rank sends k messages at once costs (k-1)·msg_us more
     * than one of one message -- the two ends' software per message
     * (LogP's overhead), which the ranks sharing a core do in turn.  Set by
     * the calibration (0: not measured, not counted). */
    double msg_us;
    double put_msg_us;
} braid_link_t;

/* --------------------------------------------------------------- transport */

#define BRAID_CAP_SENDRECV   (1u << 0) /* tagged two-sided isend/irecv */
#define BRAID_CAP_PUT_SIGNAL (1u << 1) /* one-sided put + completion flag */
/* One-sided read of a peer's buffer (single copy): mem_expose, get,
 * get_link.  A transport may declare it and still lack it on a given
 * communicator (shm: the kernel may forbid cross-memory attach); get_link
 * says which, and the core then offers no candidate needing it there. */
#define BRAID_CAP_GET (1u << 2)
/* Every peer's registered area (mem_alloc) is mapped in this process, so an
 * algorithm may read a peer's area with plain loads: mem_peer.  A rank
 * then writes a message once into its own area and every peer copies it
 * from there, where a put would write one copy per peer.  The answer is
 * the same on every rank of a communicator (a transport declares it only
 * where every area is always mapped everywhere). */
#define BRAID_CAP_LOAD (1u << 3)

#define BRAID_TAG_BITS 40
#define BRAID_TAG(seq, step)                                                  \
    ((((uint64_t)(seq)&0xffffffull) << 16) | ((uint64_t)(step)&0xffffull))
/* A tag's match bits and check bits.  A transport matches a receive with a
 * message on (peer, tag & BRAID_TAG_MATCH_MASK) -- 8 bits of seq and the
 * step -- and, when the rest of the two tags differ, completes the receive
 * with BRAID_ERR_MISMATCH: the sender is in the same call number and step,
 * but its call is another one.  Algorithms put 16 bits of their call's
 * signature there with BRAID_TAG_CHECKED (task->sig32); the other bits of
 * BRAID_TAG hold the rest of seq, the same on both sides of a matched pair.
 * 8 bits of seq are enough to match: messages from one peer are matched in
 * the order it sent them, and in a correct program every receive of a call
 * has its message in that call, sent before any of a later call.  (A
 * transport written for the first revision of ABI 4 matches all 40 bits:
 * a message of another call then never matches, and the call ends at the
 * timeout, whose failure inquiry names the mismatch.) */
#define BRAID_TAG_MATCH_MASK 0xffffffull
#define BRAID_TAG_CHECKED(seq, step, sig32)                                   \
    (BRAID_TAG(seq, step) ^ (((uint64_t)(sig32)&0xffffull) << 24))

/* A buffer of one rank exposed for its peers' get (BRAID_CAP_GET): what a
 * peer needs to read it.  The owner fills it with mem_expose and sends it
 * to the peers by value (through put_signal, or any per-call exchange), so
 * its layout is fixed for good, as braid_treq_t's.  shm reads by address
 * (process_vm_readv); a transport with registered memory (a UCX packed
 * rkey, a verbs rkey) keeps its key bytes in key[]. */
#define BRAID_RKEY_BYTES 112
typedef struct braid_rkey {
    uint64_t      addr; /* the buffer's address in its owner's process */
    uint64_t      len;  /* bytes exposed from addr */
    unsigned char key[BRAID_RKEY_BYTES]; /* the transport's; 0 if unused */
} braid_rkey_t;

typedef struct braid_transport {
    uint32_t struct_size; /* sizeof(braid_transport_t) */
    uint32_t caps;        /* BRAID_CAP_* */
    uint32_t mem_types;   /* BRAID_MEM_BIT()s its operations take; 0:
                             host only */
    const char *name;     /* "ucx", "shm", "roce": the part after '@' */

    /* Whether this transport can work on this machine (called once by the
     * loader after the plugin's probe).  NULL means always.  Like the plugin
     * probe: BRAID_ERR_UNAVAILABLE with a reason ("no RDMA device") is normal
     * and only removes this transport, not the plugin's algorithms.  self is
     * this descriptor (one function may serve several). */
    braid_status_t (*probe)(const struct braid_transport *self,
                            const braid_services_t *svc, char *why,
                            size_t why_len);

    /* Per-communicator endpoint set: connects to every peer through oob.
     * Collective.  Returns BRAID_ERR_UNAVAILABLE (with a reason) when this
     * transport cannot serve this communicator.  oob and topo stay valid
     * until comm_destroy. */
    braid_status_t (*comm_create)(const struct braid_transport *self,
                                  const braid_services_t       *svc,
                                  const braid_oob_t            *oob,
                                  const braid_topo_t *topo, void **tcomm);
    /* Not collective; must return promptly even when peers are dead. */
    void (*comm_destroy)(void *tcomm);
    /* Link parameters for this communicator (measured or declared). */
    void (*link)(void *tcomm, braid_link_t *link);

    /* Two-sided.  A message (peer, tag) matches a receive with the same
     * peer and match bits (BRAID_TAG_MATCH_MASK), in the order the peer
     * sent its messages; when the other bits of the tags differ, the
     * receive completes with BRAID_ERR_MISMATCH (its message is consumed;
     * what the buffer holds then is undefined).
     * Buffers stay owned by the caller until test says done.
     * Tags use the low BRAID_TAG_BITS bits (the transport may use the rest);
     * BRAID_TAG_CHECKED() builds one from the call's seq, a step number and
     * the call's signature bits.
     * Zero-length messages are allowed (buf may then be NULL): they match
     * and complete like any other.  A request may complete inside the
     * call (req->active 0 on return). */
    braid_status_t (*isend)(void *tcomm, int peer, uint64_t tag,
                            const void *buf, size_t len, braid_treq_t *req);
    braid_status_t (*irecv)(void *tcomm, int peer, uint64_t tag, void *buf,
                            size_t len, braid_treq_t *req);
    /* BRAID_OK once complete (req->active becomes 0; at once for an
     * inactive request), BRAID_INPROGRESS, or an error (peer lost,
     * truncation).  Drives progress itself.  Never blocks, never sleeps,
     * and never times a request out: the core bounds every call. */
    braid_status_t (*test)(void *tcomm, braid_treq_t *req);
    /* Drives progress without a request (needed while polling flags). */
    braid_status_t (*progress)(void *tcomm);
    /* Withdraws a request that is still active (a call that failed, or a
     * communicator torn down mid-call): when it returns, the transport will
     * never again read or write the request's buffer, so the caller may free
     * it.  req->active becomes 0.  Must not block longer than the timeout;
     * a no-op for a request that is not active.  Required. */
    void (*cancel)(void *tcomm, braid_treq_t *req);

    /* One-sided (BRAID_CAP_PUT_SIGNAL; NULL otherwise).  mem_alloc is
     * collective and allocates len bytes on every rank. */
    braid_status_t (*mem_alloc)(void *tcomm, size_t len, braid_rmem_t *mem);
    void (*mem_free)(void *tcomm, braid_rmem_t *mem);
    /* Writes len bytes from src to peer's area at dst_off, then stores the
     * 8-byte value flag_val at flag_off of peer's area, ordered after the
     * data.  The target sees the flag with an acquire load on its local area
     * (while calling progress).  src may be reused once req completes.  len
     * may be 0 (the flag alone). */
    braid_status_t (*put_signal)(void *tcomm, braid_rmem_t *mem, int peer,
                                 size_t dst_off, const void *src, size_t len,
                                 size_t flag_off, uint64_t flag_val,
                                 braid_treq_t *req);

    /* Optional (NULL: the core never sleeps on this transport).  Blocks
     * until a peer gives this rank something to do on this communicator
     * through send/receive (a message arrives, a full queue gets room) or
     * max_s seconds pass; returns at once when there is something already,
     * or when it cannot sleep here.  The core alone decides when to call it
     * (after svc->sleep_polls() polls in a row that reported
     * BRAID_WAIT_PEER, on a host with more ranks than cores). */
    void (*wait)(void *tcomm, double max_s);

    /* ---- appended to ABI 4: single-copy reads (BRAID_CAP_GET; NULL
     * otherwise).  The core reads these only when struct_size covers them.
     *
     * get_link: whether this communicator has the get path, the same
     * answer on every rank (decide it collectively in comm_create), and
     * its link parameters: the latency of one get and the bandwidth one
     * rank reads at while every rank of the host reads at once.  Otherwise
     * BRAID_ERR_UNAVAILABLE and a reason in why ("process_vm_readv: EPERM
     * (ptrace_scope 2)"); algorithms needing BRAID_CAP_GET are then not
     * offered on this communicator.  Not collective. */
    braid_status_t (*get_link)(void *tcomm, double *alpha_us,
                               double *beta_gbps, char *why, size_t why_len);
    /* Exposes len bytes at buf (this rank's memory, valid until
     * mem_unexpose) for peers' get: fills *key, which the caller sends to
     * them, and *handle, which it passes to mem_unexpose.  Not collective;
     * cheap enough to call per collective call (a transport that must
     * register memory keeps a cache).  The owner must not return the
     * buffer to its caller while a peer may still read it: algorithms
     * learn that from the peers (a flag each sends when done). */
    braid_status_t (*mem_expose)(void *tcomm, const void *buf, size_t len,
                                 braid_rkey_t *key, void **handle);
    void (*mem_unexpose)(void *tcomm, void *handle);
    /* Reads len bytes at offset off of the buffer peer exposed as *key
     * into dst (this rank's memory).  dst is complete once req is (maybe
     * on return: req->active 0).  An offset or length outside the key's
     * range, or a key the peer no longer exposes, is an error naming the
     * peer; so is a dead peer.  len may be 0. */
    braid_status_t (*get)(void *tcomm, int peer, const braid_rkey_t *key,
                          size_t off, void *dst, size_t len,
                          braid_treq_t *req);

    /* ---- appended in revision 3 of ABI 4: loads (BRAID_CAP_LOAD; NULL
     * otherwise).  Peer's area of mem (mem->len bytes) as this process
     * maps it, valid until mem_free; peer may be this rank (mem->local).
     * Reads follow the put_signal contract: load a flag with acquire
     * before the data it guards; a store by the owner followed by a
     * release store of a flag in its own area publishes like a put.
     * NULL for a peer out of range.  Not collective. */
    const void *(*mem_peer)(void *tcomm, const braid_rmem_t *mem, int peer);
} braid_transport_t;

/* Handle of one transport on one communicator, handed to algorithms. */
typedef struct braid_tl {
    uint32_t                 struct_size;
    const braid_transport_t *ops;
    void                    *tcomm;
    braid_link_t             link;
    /* ---- appended to ABI 4 (BRAID_HAS(tl, braid_tl_t, field)) */
    /* What the transport offers on this communicator: ops->caps, less
     * BRAID_CAP_GET where get_link said the communicator has no get path. */
    uint32_t caps;
    /* The get path's latency and bandwidth (get_link); 0 without one. */
    double get_alpha_us;
    double get_beta_gbps;
} braid_tl_t;

/* --------------------------------------------------------------- algorithm */

struct braid_algo;

/* A path's bandwidth against the working set of a call: in_gbps measured
 * with in_ws bytes per rank held by the exchange (inside the caches),
 * out_gbps with out_ws (beyond them).  All 0: not measured. */
typedef struct braid_bw_curve {
    double in_gbps, in_ws;
    double out_gbps, out_ws;
} braid_bw_curve_t;

/* The bandwidth of c (GB/s) for a call whose buffers hold ws bytes on one
 * rank.  A call moves its data at in_gbps while its working set is as
 * small as the first exchange's, and at out_gbps once it is as large as
 * the second one's; in between the share of its bytes that miss the cache
 * grows with the logarithm of its size, so the time per byte (not the
 * bandwidth) is interpolated linearly on log size.  Outside the two points
 * the nearer figure holds: nothing beyond them was measured. */
static inline double braid_bw_at(const braid_bw_curve_t *c, double ws)
{
    if (c->in_gbps <= 0.0)
        return c->out_gbps;
    if (c->out_gbps <= 0.0 || c->out_ws <= c->in_ws || ws <= c->in_ws)
        return c->in_gbps;
    if (ws >= c->out_ws)
        return c->out_gbps;
    double f = log(ws / c->in_ws) / log(c->out_ws / c->in_ws);
    return 1.0 / ((1.0 - f) / c->in_gbps + f / c->out_gbps);
}

/* A local copy moves two streams of memory (one read, one write) where a
 * fold moves three (two reads, one write): a cost model charges a copy of
 * x bytes this fraction of a reduction of x bytes. */
#define BRAID_COST_COPY_OVER_REDUCE (2.0 / 3.0)

/* Inputs to an algorithm's time estimate. */
typedef struct braid_cost_in {
    uint32_t     struct_size;
    braid_coll_t coll;
    size_t       bytes; /* per-rank buffer: allreduce/broadcast count,
                           allgather sendcount, reduce_scatter
                           recvcount, times dtype size */
    int               nranks;
    int               nnodes;
    int               ppn;
    braid_topo_kind_t topo;
    braid_link_t      link; /* of the transport being considered (all 0
                               for a BRAID_ALGO_BACKEND) */
    double reduce_gbps;     /* local reduction throughput: bytes of the
                               operand folded in per second (a fold reads
                               two streams and writes one; see
                               BRAID_COST_COPY_OVER_REDUCE) */
    /* Added to every stage's latency (every message of a two-sided
     * algorithm, every put round of a one-sided one): 0 while every rank has
     * a core; on a host with more ranks than cores, a stage completes only
     * once each rank of a core has been scheduled, so it costs about
     * ranks-per-core scheduler hand-offs.  The same on every rank. */
    double      stage_us;
    braid_mem_t mem; /* where the call's buffers live */
    /* A backend's per-communicator state (what its comm_create made), so
     * that its estimate can use what it learned there (links agreed on by
     * every rank); NULL for other algorithms. */
    const void *comm_state;
    /* ---- appended to ABI 4 (BRAID_HAS(in, braid_cost_in_t, field)) */
    /* The transport's get path (BRAID_CAP_GET): latency of one get and the
     * bandwidth one rank reads at while every rank of the host reads at
     * once; both 0 when this communicator has no get path. */
    double get_alpha_us;
    double get_beta_gbps;
    /* The put path's curve as the communicator's calibration measured it
     * (all 0: not measured).  link.put_beta_gbps is this curve read at the
     * call's own buffers (a send and a receive buffer); an algorithm that
     * stages whole messages in areas of its own reads it at its own working
     * set instead, which those areas push out of the caches sooner. */
    braid_bw_curve_t put_curve;
    double           call_ws; /* the call's own working set, bytes a rank */
    /* ---- appended in revision 3: what the transport offers on this
     * communicator (braid_tl_t.caps; 0 for a BRAID_ALGO_BACKEND), so an
     * estimate follows the path its algorithm will take (BRAID_CAP_LOAD). */
    uint32_t caps;
} braid_cost_in_t;

/* The put link's bandwidth (GB/s) for a working set of ws bytes a rank
 * instead of the call's own: link.put_beta_gbps scaled by what the
 * measured curve says ws costs against call_ws (so that whatever the core
 * applied to the link's figure is kept).  The link's figure as it is
 * where no curve was measured or the core predates put_curve. */
static inline double braid_cost_put_gbps_at(const braid_cost_in_t *in,
                                            double                 ws)
{
    double link = in->link.put_beta_gbps;
    if (!BRAID_HAS(in, braid_cost_in_t, call_ws) ||
        in->put_curve.in_gbps <= 0.0 || in->call_ws <= 0.0)
        return link;
    double at_call = braid_bw_at(&in->put_curve, in->call_ws);
    double at_ws   = braid_bw_at(&in->put_curve, ws);
    return at_call > 0.0 && at_ws > 0.0 ? link * at_ws / at_call : link;
}

/* What one more put in a stage costs (us): link.put_msg_us where the core
 * wrote a usable figure, else 0 (not counted). */
static inline double braid_cost_put_msg_us(const braid_cost_in_t *in)
{
    double o = BRAID_HAS(&in->link, braid_link_t, put_msg_us)
                   ? in->link.put_msg_us
                   : 0.0;
    return isfinite(o) && o > 0.0 ? o : 0.0;
}

/* What a call that is not done waits for, as progress() reports it.  The
 * core alone decides from it whether to poll again at once, yield the CPU,
 * or sleep, and it bounds every call with BRAID_TIMEOUT
 * (docs/architecture.md, "Waiting").  An algorithm only says what it knows;
 * BRAID_WAIT_LOCAL is always correct, the others make waiting cheaper. */
typedef enum {
    /* Waits (maybe) for a rank sharing this rank's CPU, or does not know.
     * The default: the core preset it before every start/progress. */
    BRAID_WAIT_LOCAL = 0,
    /* Waits only for ranks that do not share this rank's CPU (on other CPUs
     * or hosts): every rank of svc->cpu_mates has done its part.  Yielding
     * would hand the CPU to a rank that can do nothing. */
    BRAID_WAIT_REMOTE,
    /* Everything is posted; nothing changes until a request of task->tl
     * completes through a peer's send or receive (not a put_signal flag,
     * which transports need not signal).  The core may sleep in
     * tl->ops->wait. */
    BRAID_WAIT_PEER,
} braid_wait_t;

/* One collective call as the algorithm sees it. */
typedef struct braid_task {
    uint32_t      struct_size;
    braid_coll_t  coll;
    const void   *sendbuf; /* == recvbuf (or the rank's slot) in place */
    void         *recvbuf;
    size_t        count; /* as in the public call (see cost_in.bytes) */
    braid_dtype_t dtype;
    braid_op_t    op;
    int           root;
    size_t        dtsize;
    int           rank;
    int           size;
    uint64_t      seq; /* call number on this communicator: make
                          tags unique per call with it */
    const braid_topo_t     *topo;
    braid_tl_t             *tl; /* NULL for a BRAID_ALGO_BACKEND */
    const braid_services_t *svc;
    void                  **comm_state; /* persists across calls on this
                                           (communicator, candidate); freed by
                                           algo->comm_state_free */
    void *priv;                         /* the algorithm's per-call state; NULL
                                           when start() runs */
    const struct braid_algo *algo;      /* the descriptor this call runs */
    braid_mem_t              send_mem;  /* where sendbuf lives */
    braid_mem_t              recv_mem;  /* where recvbuf lives */
    /* A stream-ordered call (braid/cuda.h; only BRAID_ALGO_STREAM
     * algorithms get one): queue the work on `stream` (a cudaStream_t; NULL
     * is CUDA's legacy default stream) and complete the call once it is
     * queued.  0 for a plain call. */
    int   on_stream;
    void *stream;
    /* 32 bits of the call's signature -- collective, count, dtype, op,
     * root -- and its number: the same on every rank that makes the same
     * call, different (but for a 2^-32 chance) on a rank that calls
     * something else.  Algorithms carry some of it where they send
     * something anyway (a flag word, the check bits of a tag) and fail the
     * call with BRAID_ERR_MISMATCH when a peer's differ, so that ranks that
     * disagree on the call get an error, not wrong data.  Read it through
     * braid_task_sig32() (0 from a core that does not set it). */
    uint32_t sig32;
    /* Revision 2: the core's resources of this (communicator, candidate),
     * behind svc->state_get, scratch_get and area_get.  Opaque. */
    braid_res_t *res;
} braid_task_t;

static inline uint32_t braid_task_sig32(const braid_task_t *task)
{
    return BRAID_HAS(task, braid_task_t, sig32) ? task->sig32 : 0;
}

/* The algorithm brings its own transport (a whole-collective library such
 * as NCCL): it needs no braid transport, its candidate is written with its
 * name alone, and the core creates its per-communicator state through
 * comm_create. */
#define BRAID_ALGO_BACKEND (1u << 0)
/* The algorithm runs stream-ordered calls (task->on_stream): it queues
 * their work on the caller's CUDA stream.  Only such algorithms get them. */
#define BRAID_ALGO_STREAM (1u << 1)
/* (Revision 4.)  The algorithm reduces every element of its result as the
 * left fold of the ranks' contributions in rank order, ((x0 op x1) op x2)
 * ..., through the services' reduce2/reduce and finish_avg: its results are
 * then bitwise those of every other such algorithm, so the core may run any
 * of them in its place (online tuning times them against each other on the
 * first calls of a size) without a bit of any result changing.  Without
 * it, a reducing algorithm is never swapped for another. */
#define BRAID_ALGO_RANK_ORDER (1u << 2)
/* (Revision 6.)  The algorithm combines the ranks' contributions only
 * through the services' reduce2/reduce, each contribution into each element
 * of its result once and with nothing else (no identity element folded in),
 * and finishes BRAID_AVG with finish_avg, in whatever order of ranks.  On a
 * communicator of two ranks every element is then x0 op x1 or x1 op x0, and
 * the core's operations commute bit for bit (a NaN out of sum, prod or avg
 * is the canonical one; min and max return the same input either way), so
 * its results are bitwise those of the rank-order algorithms there: the
 * core treats it as BRAID_ALGO_RANK_ORDER on two ranks, and only there. */
#define BRAID_ALGO_CORE_REDUCE (1u << 3)

typedef struct braid_algo {
    uint32_t     struct_size; /* sizeof(braid_algo_t) */
    uint32_t     flags;       /* BRAID_ALGO_* */
    const char  *name; /* "ring", "recdbl", "oneshot": the part before '@' */
    braid_coll_t coll;
    uint32_t     needs_caps; /* transport must have these BRAID_CAP_* bits */
    uint32_t     mem_types;  /* BRAID_MEM_BIT()s of buffers it takes; 0:
                                host only */
    const char *transport;   /* NULL: any transport with the caps; else only
                                this one */
    /* Estimated time in microseconds; negative when it cannot run these
     * inputs.  Pure: every rank must compute the same value. */
    double (*estimate)(const struct braid_algo *self,
                       const braid_cost_in_t   *in);
    /* Runs when the call reaches the head of its communicator's queue: at
     * once for a blocking call or a non-blocking one issued onto an empty
     * queue, else inside the braid_test/braid_wait/later call that finds
     * every earlier call done.  Prepares task->priv and may post the first
     * step; *wait as for progress.  BRAID_ERR_NOT_SUPPORTED if it cannot
     * run the call.  Whatever it returns, finish() follows. */
    braid_status_t (*start)(braid_task_t *task, braid_wait_t *wait);
    /* BRAID_OK when the call is complete, BRAID_INPROGRESS (with *wait:
     * what it waits for), or an error.  Never blocks. */
    braid_status_t (*progress)(braid_task_t *task, braid_wait_t *wait);
    /* Called exactly once per start(), after completion, after an error,
     * and after a start() that failed (task->priv then holds whatever
     * start left there, maybe NULL).  Cancels every request still active,
     * then frees task->priv. */
    void (*finish)(braid_task_t *task);
    /* Frees *task->comm_state when the communicator is destroyed (may be
     * NULL when the algorithm keeps none).  tl is NULL for a backend. */
    void (*comm_state_free)(void *state, braid_tl_t *tl);
    /* BRAID_ALGO_BACKEND only: creates the per-communicator state (through
     * oob, collectively), which the core then hands every call in
     * *task->comm_state and finally to comm_state_free.  BRAID_ERR_
     * UNAVAILABLE with a reason when it cannot serve this communicator. */
    braid_status_t (*comm_create)(const struct braid_algo *self,
                                  const braid_services_t  *svc,
                                  const braid_oob_t       *oob,
                                  const braid_topo_t *topo, void **state);
} braid_algo_t;

/* ------------------------------------------------------------------ plugin */

typedef struct braid_plugin {
    uint32_t    abi_version; /* BRAID_PLUGIN_ABI_VERSION: must stay first */
    uint32_t    struct_size; /* sizeof(braid_plugin_t) */
    const char *name;        /* "ucx": matches BRAID_PLUGINS entries */
    const char *version;
    /* BRAID_OK when usable here; BRAID_ERR_UNAVAILABLE with a reason in why
     * ("no RDMA device", ...) otherwise.  Unavailable is normal. */
    braid_status_t (*probe)(const struct braid_plugin *self,
                            const braid_services_t *svc, char *why,
                            size_t why_len);
    int                             n_transports;
    const braid_transport_t *const *transports;
    int                             n_algos;
    const braid_algo_t *const      *algos;
    /* Called once before dlclose; may be NULL. */
    void (*unload)(const struct braid_plugin *self);
} braid_plugin_t;

#ifdef __cplusplus
}
#endif
#endif
