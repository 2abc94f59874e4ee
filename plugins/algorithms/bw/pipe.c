/* "pipe": the copy path for large all-reduce, reduce_scatter and allgather
 * over put-with-signal alone (any transport; on shm it serves when
 * cross-memory attach is not allowed, and pull cannot run).
 *
 * Every ordered pair of ranks (r -> j) has two streams, each a ring of
 * BRAID_BW_PIPE_DEPTH chunk slots in j's registered area:
 *   RS  r's pieces of slice j (chunk c of slice j of r's send buffer);
 *   AG  r's finished chunks of slice r (all-reduce), or of r's own block
 *       (allgather).
 * A call on rank `me`, everything as soon as it can go:
 *   - put chunk c of every slice j into stream RS(me -> j), in order;
 *   - once stream RS(s -> me) holds chunk c for every s, fold chunk c in
 *     rank order (the own piece from the send buffer) into the receive
 *     buffer, and hand every slot back;
 *   - put every folded chunk into AG(me -> k) for every k;
 *   - copy every chunk arriving on AG(s -> me) to its place, hand the slot
 *     back.
 * The allgather runs the AG streams alone, reduce_scatter the RS streams.
 *
 * Shared AG ring.  Where the transport maps every peer's area here
 * (BRAID_CAP_LOAD: shm), a rank's AG messages go once into a ring in its
 * own area -- the whole AG part of it, n·D slots, which a writer never
 * receives into then -- and every peer copies them out from there: one
 * copy into a slot per chunk instead of one per peer, so the allgather
 * copies (n+1)/n·S a rank instead of (2n-1)/n·S.  The writer reuses a slot
 * once every reader's credit says it read it (the slowest reader paces
 * the ring).  With the same mappings, a stream RS(r -> j) lives in r's
 * own area too (in the slots that would be j's inbox from r), and j folds
 * straight from there: so the writer chooses how every slot line is
 * written, cached or streamed to memory (wants_stream), and no put goes
 * through the transport but the credits.
 *
 * Flow control.  A stream's messages are numbered from the communicator's
 * creation on (positions), and position p lives in slot p mod D with flag
 * p + 1.  The reader hands slots back by putting the count of messages it
 * consumed into the writer's area (a credit flag); the writer puts position
 * p only once that count is at least p - D + 1, so it never overwrites a
 * slot not yet read -- in this call or the previous one: positions run on
 * across calls, and every rank makes the same calls with the same sizes,
 * so both ends count the same messages.  No barrier per call: a rank
 * returns once its puts are out and its chunks are in.  Memory stays
 * 2(n-1)·D chunk slots per rank whatever the message size.
 *
 * Traffic per rank (all-reduce of S): the pieces out (n-1)/n·S, the fold,
 * the finished chunks out to n-1 peers, and their copy-out: the slots
 * stay in cache when the reader keeps up, so memory sees about 2·S per
 * rank; the CPU copies 3(n-1)/n·S (with the shared AG ring (2n-1)/n·S:
 * the finished chunks go out once). */
#include <stdlib.h>
#include <string.h>

#include "bw.h"

#define RS       0
#define AG       1
#define DEPTH    BRAID_BW_PIPE_DEPTH
#define FOLD_BLK 16384 /* a multiple of every dtype: the fold's L1 block */
/* A data flag: position + 1 in the low POS_BITS, the call's signature bits
 * above them, so the first message of a call from a peer that called
 * something else (positions still agree there) fails the call instead of
 * being folded in. */
#define POS_BITS 40
#define POS_MASK ((UINT64_C(1) << POS_BITS) - 1)

typedef struct pipe_comm {
    braid_rmem_t   mem;
    int            n;
    size_t         stride;  /* slot: flag line + chunk */
    uint64_t      *sent[2]; /* [n] positions put on stream (me -> j) */
    uint64_t      *got[2];  /* [n] positions consumed from (s -> me) */
    uint64_t      *told[2]; /* [n] credit last put to s */
    braid_treq_t  *creq[2]; /* [n] credit puts */
    braid_treq_t  *dreq[2]; /* [n * DEPTH] data puts, by slot */
    char          *acc;     /* fold block staging (in place) */
    unsigned char *mate;
    int            nmates;
    /* Shared AG ring (BRAID_CAP_LOAD); peer[] NULL otherwise. */
    const char **peer;   /* [n] every rank's area as mapped here */
    uint64_t     sdepth; /* slots of the ring */
    uint64_t     room;   /* positions below this are free to write */
} pipe_comm_t;

typedef struct pipe {
    pipe_comm_t            *pc;
    const braid_services_t *svc;
    uint64_t                sig; /* 24 signature bits, above POS_BITS */
    int                     me;
    int                     stream; /* slots written with streaming stores */
    int                     odd; /* a peer's message has another signature */
    braid_bw_plan_t         plan;
    size_t                  dts;
    const char             *src;
    char                   *dst;
    int                     reduce, gather; /* streams this call uses */
    size_t                  mine;           /* chunks of slice me */
    size_t                  folded;  /* of them, reduced (allgather: all) */
    size_t                 *rs_sent; /* [n] pieces of slice j put */
    size_t                 *ag_sent; /* [n] own chunks put to k */
    size_t                 *ag_got;  /* [n] chunks of slice s copied */
    int                     left;    /* streams with messages still to come or
                                        go, this call (and an allgather's own
                                        block, until it is copied) */
    char        *own;                /* allgather: the own block's place */
    size_t       own_done;           /* of its chunks, copied there */
    const void **srcs;               /* [n] fold sources */
} pipe_t;

/* ------------------------------------------------------------- layout */

static size_t inbox_off(const pipe_comm_t *pc, int kind, int s, uint64_t pos)
{
    return (((size_t)kind * (size_t)pc->n + (size_t)s) * DEPTH +
            (size_t)(pos % DEPTH)) *
           pc->stride;
}

/* Position pos of the shared AG ring, in its writer's area. */
static size_t shared_off(const pipe_comm_t *pc, uint64_t pos)
{
    return ((size_t)AG * (size_t)pc->n * DEPTH + (size_t)(pos % pc->sdepth)) *
           pc->stride;
}

static size_t credit_off(const pipe_comm_t *pc, int kind, int s)
{
    return 2 * (size_t)pc->n * DEPTH * pc->stride +
           ((size_t)kind * (size_t)pc->n + (size_t)s) * BRAID_BW_LINE;
}

/* ------------------------------------------------------------- state */

static void pipe_comm_free(void *state, braid_tl_t *tl)
{
    pipe_comm_t *pc = state;
    if (pc == NULL)
        return;
    if (pc->mem.local != NULL && tl != NULL)
        tl->ops->mem_free(tl->tcomm, &pc->mem);
    free(pc->sent[0]); /* one block holds the counters and requests */
    free(pc->acc);
    free(pc->mate);
    free(pc->peer);
    free(pc);
}

/* Sets up the rings in the writers' own areas where the transport maps
 * its peers' areas: the same on every rank (BRAID_CAP_LOAD is). */
static braid_status_t shared_ring(pipe_comm_t *pc, const braid_task_t *task)
{
    const braid_tl_t *tl = task->tl;
    if (!BRAID_HAS(tl, braid_tl_t, caps) || !(tl->caps & BRAID_CAP_LOAD) ||
        !BRAID_HAS(tl->ops, braid_transport_t, mem_peer) ||
        tl->ops->mem_peer == NULL)
        return BRAID_OK;
    pc->peer = calloc((size_t)pc->n, sizeof(*pc->peer));
    if (pc->peer == NULL)
        return task->svc->error(BRAID_ERR_NO_MEMORY,
                                "bw: pipe: out of memory for the ring state");
    for (int j = 0; j < pc->n; j++) {
        pc->peer[j] = tl->ops->mem_peer(tl->tcomm, &pc->mem, j);
        if (pc->peer[j] == NULL)
            return task->svc->error(BRAID_ERR_TRANSPORT,
                                    "bw: pipe: %s declares loads "
                                    "(BRAID_CAP_LOAD) but maps no area of "
                                    "rank %d",
                                    tl->ops->name, j);
    }
    pc->sdepth = (uint64_t)pc->n * DEPTH;
    /* Fault the rings (RS and AG) in now, everywhere: their slots are
     * touched one by one as the positions advance, by the writer and by
     * every reader in its own mapping, and a call should not meet those
     * faults later on (a small allgather reaches the last slot only after
     * many calls).  Zeros over zeros: nobody else writes this rank's
     * rings. */
    size_t base = 0, bytes = 2 * (size_t)pc->n * DEPTH * pc->stride;
    memset((char *)pc->mem.local + base, 0, bytes);
    unsigned sum = 0;
    for (int j = 0; j < pc->n; j++)
        for (size_t off = 0; off < bytes; off += 4096)
            sum += *(const volatile unsigned char *)(pc->peer[j] + base + off);
    (void)sum;
    return BRAID_OK;
}

static braid_status_t comm_get(pipe_comm_t **out, braid_task_t *task)
{
    pipe_comm_t *pc = *task->comm_state;
    if (pc != NULL) {
        *out = pc;
        return BRAID_OK;
    }
    const braid_tl_t *tl     = task->tl;
    int               n      = task->size;
    size_t            stride = BRAID_BW_LINE + BRAID_BW_PIPE_CHUNK;
    size_t            len =
        2 * (size_t)n * DEPTH * stride + 2 * (size_t)n * BRAID_BW_LINE;
    size_t counters = 6 * (size_t)n * sizeof(uint64_t) +
                      2 * (size_t)n * (1 + DEPTH) * sizeof(braid_treq_t);
    braid_status_t st = BRAID_OK;

    pc = calloc(1, sizeof(*pc));
    if (pc != NULL) {
        pc->sent[0] = calloc(1, counters);
        pc->acc     = braid_bw_alloc(FOLD_BLK);
        pc->mate    = calloc((size_t)n, 1);
    }
    if (pc == NULL || pc->sent[0] == NULL || pc->acc == NULL ||
        pc->mate == NULL)
        st = task->svc->error(BRAID_ERR_NO_MEMORY, "bw: pipe: out of memory "
                                                   "for the stream state");
    braid_rmem_t mem;
    memset(&mem, 0, sizeof(mem));
    /* Collective: a rank that failed above still takes part. */
    braid_status_t ast = tl->ops->mem_alloc(tl->tcomm, len, &mem);
    if (st == BRAID_OK && ast == BRAID_OK &&
        (mem.local == NULL || mem.len < len))
        ast = task->svc->error(BRAID_ERR_TRANSPORT,
                               "bw: %s mem_alloc of %zu "
                               "bytes returned a smaller area",
                               tl->ops->name, len);
    if (st != BRAID_OK || ast != BRAID_OK) {
        if (ast == BRAID_OK && st != BRAID_OK)
            task->svc->log(BRAID_LOG_ERROR, BRAID_BW_COMPONENT,
                           "rank %d: "
                           "pipe: cannot keep its %zu-byte stream area",
                           task->rank, len);
        if (mem.local != NULL)
            tl->ops->mem_free(tl->tcomm, &mem);
        pipe_comm_free(pc, NULL);
        return st != BRAID_OK ? st : ast;
    }
    pc->mem     = mem;
    pc->n       = n;
    pc->stride  = stride;
    pc->sent[1] = pc->sent[0] + n;
    pc->got[0]  = pc->sent[1] + n;
    pc->got[1]  = pc->got[0] + n;
    pc->told[0] = pc->got[1] + n;
    pc->told[1] = pc->told[0] + n;
    pc->creq[0] = (braid_treq_t *)(pc->told[1] + n);
    pc->creq[1] = pc->creq[0] + n;
    pc->dreq[0] = pc->creq[1] + n;
    pc->dreq[1] = pc->dreq[0] + (size_t)n * DEPTH;
    pc->nmates  = braid_bw_mates(pc->mate, task);
    if ((st = shared_ring(pc, task)) != BRAID_OK) {
        tl->ops->mem_free(tl->tcomm, &pc->mem);
        pipe_comm_free(pc, NULL);
        return st;
    }
    *task->comm_state = pc;
    *out              = pc;
    return BRAID_OK;
}

/* ------------------------------------------------------------- start */

/* Whether this call writes its slots with streaming stores (with the
 * shared rings of BRAID_CAP_LOAD; through a transport's put the transport
 * copies).  A line left in the writer's cache is pulled across by its
 * reader, which costs more than a trip through memory where the two cores
 * share no last-level cache (as when a VM's vCPUs sit on two dies, which
 * the guest cannot see, and move between them: docs/performance.md, "The
 * shared ring's slots in memory" and "The reductions' slots through
 * memory").  Streamed, the lines go to memory and
 * the reader takes them from there, at the same cost wherever the cores
 * are; but where they do share a cache, the cached slot would have been
 * handed over there without touching memory.  So: an allgather always
 * (its chunk comes from memory and is read once by each peer); a
 * reduction once the host's buffers together outgrow the last-level cache
 * (then its traffic goes to memory anyway, and the streamed slots add
 * least to it). */
static int wants_stream(const braid_task_t *task)
{
    return braid_bw_pipe_streams(task->coll, task->size,
                                 task->topo != NULL ? task->topo->ppn : 0,
                                 (double)task->count * (double)task->dtsize);
}

static braid_status_t pipe_start(braid_task_t *task, braid_wait_t *wait)
{
    int            n = task->size, me = task->rank;
    braid_status_t st;

    (void)wait;
    size_t size = sizeof(pipe_t) + 3 * (size_t)n * sizeof(size_t) +
                  (size_t)n * sizeof(void *);
    if ((st = braid_bw_priv_alloc(task, size)) != BRAID_OK)
        return st;
    pipe_t *s  = task->priv;
    s->rs_sent = (size_t *)(s + 1);
    s->ag_sent = s->rs_sent + n;
    s->ag_got  = s->ag_sent + n;
    s->srcs    = (const void **)(s->ag_got + n);
    s->svc     = task->svc;
    s->dts     = task->dtsize;
    s->src     = task->sendbuf;
    s->dst     = task->recvbuf;
    s->me      = me;
    s->sig     = (uint64_t)(braid_task_sig32(task) & 0xffffffu) << POS_BITS;
    s->reduce  = task->coll != BRAID_COLL_ALLGATHER;
    s->gather  = task->coll != BRAID_COLL_REDUCE_SCATTER;
    s->stream  = wants_stream(task);
    braid_bw_plan(&s->plan, task->coll, n, task->count, task->dtsize,
                  BRAID_BW_PIPE_CHUNK);
    if (n == 1 || task->count == 0)
        return BRAID_OK;
    if ((st = comm_get(&s->pc, task)) != BRAID_OK)
        return st;
    if (s->pc->n != n)
        return task->svc->error(BRAID_ERR_INTERNAL,
                                "bw: pipe: state made "
                                "for %d ranks used by a %d-rank call",
                                s->pc->n, n);
    if (s->plan.chunk * s->dts > BRAID_BW_PIPE_CHUNK)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "bw: pipe: %zu "
                                "elements per rank need chunks larger than "
                                "its slots",
                                task->count);
    s->mine = braid_bw_nchunks(&s->plan, me);
    if (!s->reduce) {
        s->folded = s->mine; /* allgather: the own block is ready */
        s->own    = s->dst + braid_bw_slice_off(&s->plan, me) * s->dts;
        if (s->own != s->src && s->mine > 0)
            s->left++; /* own_out */
        else
            s->own_done = s->mine;
    }
    /* Streams with something to move: out to j and in from j. */
    for (int j = 0; j < n; j++) {
        if (j == me)
            continue;
        s->left += s->reduce && braid_bw_nchunks(&s->plan, j) > 0; /* out */
        s->left += s->reduce && s->mine > 0;                       /* in */
        s->left += s->gather && s->mine > 0;                       /* out */
        s->left += s->gather && braid_bw_nchunks(&s->plan, j) > 0; /* in */
    }
    return BRAID_OK;
}

/* ------------------------------------------------------------ progress */

/* Puts one chunk on stream (me -> j) if j handed back the slot it needs;
 * returns 1 when it did. */
static int put_chunk(braid_task_t *task, pipe_t *s, int kind, int j,
                     const void *from, size_t bytes, braid_status_t *st)
{
    pipe_comm_t  *pc  = s->pc;
    uint64_t      pos = pc->sent[kind][j];
    braid_treq_t *req = &pc->dreq[kind][(size_t)j * DEPTH + pos % DEPTH];

    *st = BRAID_OK;
    if (pos >= braid_bw_flag_at(&pc->mem, credit_off(pc, kind, j)) + DEPTH)
        return 0; /* j has not read the slot's last message yet */
    if (req->active) {
        *st = task->tl->ops->test(task->tl->tcomm, req);
        if (*st == BRAID_INPROGRESS)
            *st = BRAID_OK; /* the slot's last put still runs: later */
        if (*st != BRAID_OK || req->active)
            return 0;
    }
    if (kind == RS && pc->peer != NULL) { /* its ring in this rank's area */
        char *at = (char *)pc->mem.local + inbox_off(pc, RS, j, pos);
        s->svc->copy(at + BRAID_BW_LINE, from, bytes, s->stream);
        __atomic_store_n((uint64_t *)(void *)at,
                         ((pos + 1) & POS_MASK) | s->sig, __ATOMIC_RELEASE);
        pc->sent[kind][j] = pos + 1;
        return 1;
    }
    size_t slot = inbox_off(pc, kind, task->rank, pos);
    *st         = task->tl->ops->put_signal(task->tl->tcomm, &pc->mem, j,
                                            slot + BRAID_BW_LINE, from, bytes, slot,
                                            ((pos + 1) & POS_MASK) | s->sig, req);
    if (*st != BRAID_OK)
        return 0;
    pc->sent[kind][j] = pos + 1;
    return 1;
}

/* Writes the next message of the shared AG ring into this rank's area if
 * every reader has read the slot it needs; returns 1 when it did. */
static int put_shared(pipe_comm_t *pc, const pipe_t *s, int me,
                      const void *from, size_t bytes)
{
    uint64_t pos = pc->sent[AG][me];
    if (pos >= pc->room) {
        uint64_t least = UINT64_MAX;
        for (int k = 0; k < pc->n; k++)
            if (k != me) {
                uint64_t got =
                    braid_bw_flag_at(&pc->mem, credit_off(pc, AG, k));
                least = got < least ? got : least;
            }
        pc->room = least + pc->sdepth;
        if (pos >= pc->room)
            return 0; /* a reader has not read the slot's last message */
    }
    char *slot = (char *)pc->mem.local + shared_off(pc, pos);
    s->svc->copy(slot + BRAID_BW_LINE, from, bytes, s->stream);
    __atomic_store_n((uint64_t *)(void *)slot, ((pos + 1) & POS_MASK) | s->sig,
                     __ATOMIC_RELEASE);
    pc->sent[AG][me] = pos + 1;
    return 1;
}

/* The data of the next message on stream (src -> me), or NULL: not there
 * yet, or (s->odd set) sent by a peer in another call. */
static const char *head(pipe_t *s, int kind, int src)
{
    const pipe_comm_t *pc  = s->pc;
    uint64_t           pos = pc->got[kind][src];
    const char        *at =
        pc->peer == NULL
                   ? (const char *)pc->mem.local + inbox_off(pc, kind, src, pos)
               : kind == AG ? pc->peer[src] + shared_off(pc, pos)
                            : pc->peer[src] + inbox_off(pc, RS, s->me, pos);
    uint64_t f =
        __atomic_load_n((const uint64_t *)(const void *)at, __ATOMIC_ACQUIRE);
    uint64_t want = ((pos + 1) & POS_MASK) | s->sig;
    if (f != want) {
        if ((f & POS_MASK) == (want & POS_MASK))
            s->odd = src + 1;
        return NULL;
    }
    return at + BRAID_BW_LINE;
}

static braid_status_t odd_call(braid_task_t *task, const pipe_t *s)
{
    return task->svc->error(
        BRAID_ERR_MISMATCH,
        "bw: pipe: rank %d: rank %d is in call #%llu "
        "with another signature: the ranks called different collectives, "
        "counts, dtypes or ops",
        task->rank, s->odd - 1, (unsigned long long)task->seq);
}

/* Puts the count of messages read from (src -> me) into src's area, the
 * credit that lets src reuse their slots; when the last credit put is still
 * running, a later one carries this count too (credits_out). */
static braid_status_t credit(braid_task_t *task, pipe_comm_t *pc, int kind,
                             int src)
{
    braid_treq_t *req = &pc->creq[kind][src];
    if (req->active) {
        braid_status_t st = task->tl->ops->test(task->tl->tcomm, req);
        if (st == BRAID_INPROGRESS)
            return BRAID_OK;
        if (st != BRAID_OK)
            return st;
    }
    size_t         off = credit_off(pc, kind, task->rank);
    braid_status_t st =
        task->tl->ops->put_signal(task->tl->tcomm, &pc->mem, src, off, NULL, 0,
                                  off, pc->got[kind][src], req);
    if (st == BRAID_OK)
        pc->told[kind][src] = pc->got[kind][src];
    return st;
}

/* Hands the head slot of (src -> me) back. */
static braid_status_t consume(braid_task_t *task, pipe_comm_t *pc, int kind,
                              int src)
{
    pc->got[kind][src]++;
    return credit(task, pc, kind, src);
}

/* Puts the credits held back; *all = 1 once every one is out. */
static braid_status_t credits_out(braid_task_t *task, pipe_comm_t *pc,
                                  int *all)
{
    *all = 1;
    for (int kind = 0; kind < 2; kind++)
        for (int r = 0; r < pc->n; r++) {
            if (pc->told[kind][r] == pc->got[kind][r])
                continue;
            braid_status_t st = credit(task, pc, kind, r);
            if (st != BRAID_OK)
                return st;
            if (pc->told[kind][r] != pc->got[kind][r])
                *all = 0;
        }
    return BRAID_OK;
}

/* Rank-order fold of n sources into out, block by block (the accumulator
 * in L1); in place (out is a source after the first two) each block is
 * built aside first. */
static void fold(braid_task_t *task, pipe_t *s, char *out, size_t count)
{
    int    n     = task->size;
    size_t blk   = FOLD_BLK / s->dts;
    int    aside = 0;
    for (int i = 2; i < n; i++)
        aside |= s->srcs[i] == out;
    for (size_t first = 0; first < count; first += blk) {
        size_t cnt = count - first < blk ? count - first : blk;
        size_t off = first * s->dts;
        char  *acc = aside ? s->pc->acc : out + off;
        task->svc->reduce2(acc, (const char *)s->srcs[0] + off,
                           (const char *)s->srcs[1] + off, cnt, task->dtype,
                           task->op);
        for (int i = 2; i < n; i++)
            task->svc->reduce(acc, (const char *)s->srcs[i] + off, cnt,
                              task->dtype, task->op);
        if (aside)
            memcpy(out + off, acc, cnt * s->dts);
    }
}

/* Folds the next chunk of the own slice once every piece is in. */
static braid_status_t fold_next(braid_task_t *task, pipe_t *s, size_t *moved,
                                int *did)
{
    const braid_bw_plan_t *p = &s->plan;
    int                    n = task->size, me = task->rank;
    size_t                 c = s->folded, len = braid_bw_chunk_len(p, me, c);
    size_t o = braid_bw_slice_off(p, me) + braid_bw_chunk_off(p, c);

    *did = 0;
    for (int r = 0; r < n; r++) {
        if (r == me) {
            s->srcs[r] = s->src + o * s->dts;
        } else if ((s->srcs[r] = head(s, RS, r)) == NULL) {
            return s->odd ? odd_call(task, s) : BRAID_OK;
        }
    }
    char *out = p->coll == BRAID_COLL_ALLREDUCE
                    ? s->dst + o * s->dts
                    : s->dst + braid_bw_chunk_off(p, c) * s->dts;
    fold(task, s, out, len);
    task->svc->finish_avg(out, len, task->dtype, task->op, n);
    for (int r = 0; r < n; r++) {
        if (r == me)
            continue;
        braid_status_t st = consume(task, s->pc, RS, r);
        if (st != BRAID_OK)
            return st;
    }
    s->folded++;
    if (s->folded == s->mine)
        s->left -= n - 1; /* every RS stream in */
    *moved += (size_t)n * len * s->dts;
    *did = 1;
    return BRAID_OK;
}

/* Finished chunk c of the own slice: the send buffer's (allgather) or the
 * folded one in the receive buffer. */
static const char *finished(const pipe_t *s, int me, size_t c)
{
    const braid_bw_plan_t *p = &s->plan;
    size_t                 o = braid_bw_chunk_off(p, c);
    return p->coll == BRAID_COLL_ALLGATHER
               ? s->src + o * s->dts
               : s->dst + (braid_bw_slice_off(p, me) + o) * s->dts;
}

/* An allgather's own chunks [own_done, upto) into the receive buffer,
 * each right after it went out (its source is then still in this core's
 * cache, so the input is read from memory once); streaming stores, since
 * this rank does not read the receive buffer again. */
static void own_out(pipe_t *s, int me, size_t upto, size_t *moved)
{
    const braid_bw_plan_t *p = &s->plan;
    if (s->own_done == s->mine)
        return;
    for (; s->own_done < upto; s->own_done++) {
        size_t o   = braid_bw_chunk_off(p, s->own_done) * s->dts;
        size_t len = braid_bw_chunk_len(p, me, s->own_done) * s->dts;
        s->svc->copy(s->own + o, s->src + o, len, 1);
        *moved += len;
    }
    if (s->own_done == s->mine)
        s->left--;
}

static braid_status_t pipe_progress(braid_task_t *task, braid_wait_t *wait)
{
    pipe_t                *s = task->priv;
    const braid_bw_plan_t *p = &s->plan;
    int                    n = task->size, me = task->rank;
    size_t                 moved = 0;
    braid_status_t         st;

    if (s->pc == NULL) {
        braid_bw_local_result(task);
        return BRAID_OK;
    }
    if (task->tl->ops->progress != NULL &&
        (st = task->tl->ops->progress(task->tl->tcomm)) != BRAID_OK)
        return st;
    int any = 1;
    while (s->left > 0 && any && moved < BRAID_BW_BUDGET) {
        any = 0;
        /* Pieces out, chunk-major across the owners. */
        for (int i = 1; s->reduce && i < n; i++) {
            int    j   = (me + i) % n;
            size_t all = braid_bw_nchunks(p, j);
            while (s->rs_sent[j] < all) {
                size_t c   = s->rs_sent[j];
                size_t len = braid_bw_chunk_len(p, j, c);
                size_t o = braid_bw_slice_off(p, j) + braid_bw_chunk_off(p, c);
                if (!put_chunk(task, s, RS, j, s->src + o * s->dts,
                               len * s->dts, &st)) {
                    if (st != BRAID_OK)
                        return st;
                    break;
                }
                moved += len * s->dts;
                any = 1;
                if (++s->rs_sent[j] == all)
                    s->left--;
                break; /* one per owner, then the next owner */
            }
        }
        /* The own slice: fold what is complete. */
        if (s->reduce && s->folded < s->mine) {
            int did;
            if ((st = fold_next(task, s, &moved, &did)) != BRAID_OK)
                return st;
            any |= did;
        }
        /* Finished chunks out: once into the shared ring, or to every
         * peer. */
        while (s->gather && s->pc->peer != NULL &&
               s->ag_sent[me] < s->folded) {
            size_t len = braid_bw_chunk_len(p, me, s->ag_sent[me]);
            if (!put_shared(s->pc, s, me, finished(s, me, s->ag_sent[me]),
                            len * s->dts))
                break;
            moved += len * s->dts;
            any = 1;
            if (++s->ag_sent[me] == s->mine)
                s->left -= n - 1; /* every reader's stream out */
        }
        if (!s->reduce && s->pc->peer != NULL)
            own_out(s, me, s->ag_sent[me], &moved);
        for (int i = 1; s->gather && s->pc->peer == NULL && i < n; i++) {
            int k = (me + i) % n;
            while (s->ag_sent[k] < s->folded) {
                size_t len = braid_bw_chunk_len(p, me, s->ag_sent[k]);
                if (!put_chunk(task, s, AG, k, finished(s, me, s->ag_sent[k]),
                               len * s->dts, &st)) {
                    if (st != BRAID_OK)
                        return st;
                    break;
                }
                moved += len * s->dts;
                any = 1;
                if (++s->ag_sent[k] == s->mine)
                    s->left--;
            }
            if (!s->reduce)
                own_out(s, me, s->ag_sent[k], &moved);
        }
        /* Other slices in, to their places. */
        for (int i = 1; s->gather && i < n; i++) {
            int         j   = (me + i) % n;
            size_t      all = braid_bw_nchunks(p, j);
            const char *data;
            while (s->ag_got[j] < all && (data = head(s, AG, j)) != NULL) {
                size_t c   = s->ag_got[j];
                size_t len = braid_bw_chunk_len(p, j, c);
                size_t o = braid_bw_slice_off(p, j) + braid_bw_chunk_off(p, c);
                s->svc->copy(s->dst + o * s->dts, data, len * s->dts, 1);
                if ((st = consume(task, s->pc, AG, j)) != BRAID_OK)
                    return st;
                moved += len * s->dts;
                any = 1;
                if (++s->ag_got[j] == all)
                    s->left--;
            }
            if (s->odd)
                return odd_call(task, s);
        }
    }
    if (s->left > 0) {
        *wait = BRAID_WAIT_LOCAL;
        return BRAID_INPROGRESS;
    }
    /* Every credit out, and every put of this call done with the caller's
     * buffers, before the call ends. */
    int all;
    if ((st = credits_out(task, s->pc, &all)) != BRAID_OK)
        return st;
    for (int kind = 0; kind < 2 && all; kind++)
        for (size_t i = 0; i < (size_t)n * DEPTH && all; i++) {
            braid_treq_t *req = &s->pc->dreq[kind][i];
            if (!req->active)
                continue;
            st = task->tl->ops->test(task->tl->tcomm, req);
            if (st == BRAID_INPROGRESS)
                all = 0;
            else if (st != BRAID_OK)
                return st;
        }
    if (all)
        return BRAID_OK;
    *wait = BRAID_WAIT_LOCAL;
    return BRAID_INPROGRESS;
}

static void pipe_finish(braid_task_t *task)
{
    pipe_t *s = task->priv;
    if (s != NULL && s->pc != NULL) {
        for (int kind = 0; kind < 2; kind++) {
            for (size_t i = 0; i < (size_t)task->size * DEPTH; i++)
                task->tl->ops->cancel(task->tl->tcomm, &s->pc->dreq[kind][i]);
            for (int r = 0; r < task->size; r++)
                task->tl->ops->cancel(task->tl->tcomm, &s->pc->creq[kind][r]);
        }
    }
    braid_bw_priv_free(task);
}

static double pipe_estimate(const braid_algo_t    *self,
                            const braid_cost_in_t *in)
{
    (void)self;
    return braid_bw_cost_pipe(in);
}

BRAID_BW_ALGO(braid_bw_pipe_allreduce, pipe, BRAID_CAP_PUT_SIGNAL,
              BRAID_COLL_ALLREDUCE);
BRAID_BW_ALGO(braid_bw_pipe_reduce_scatter, pipe, BRAID_CAP_PUT_SIGNAL,
              BRAID_COLL_REDUCE_SCATTER);
BRAID_BW_ALGO(braid_bw_pipe_allgather, pipe, BRAID_CAP_PUT_SIGNAL,
              BRAID_COLL_ALLGATHER);
