/* "pull": single-copy all-reduce, reduce_scatter and allgather over a
 * transport that can read a peer's memory (BRAID_CAP_GET) and raise flags
 * in it (BRAID_CAP_PUT_SIGNAL).
 *
 * A call, on rank `me` of n (slices and chunks: chunk.c):
 *   1. hello   expose the send buffer (and the receive buffer, for an
 *              all-reduce) and put their keys into every peer's area;
 *   2. reduce  (all-reduce, reduce_scatter) for each chunk of slice me:
 *              read that chunk of every rank's send buffer, in rank order,
 *              into a cache-sized staging buffer and fold it into an
 *              accumulator (x0 op x1) op x2 ...; the last step writes the
 *              receive buffer; an all-reduce then tells every peer how
 *              many chunks of slice me are finished (a progress flag);
 *   3. gather  (all-reduce, allgather) read every other slice's finished
 *              chunks straight from their owner's buffer into the own
 *              receive buffer, several chunks per read; reads of fresh
 *              chunks go first (they are still in the shared cache);
 *   4. done    once this rank reads nothing more, it tells every peer; it
 *              returns once every peer said so, since until then a peer
 *              may still read its buffers.
 * A progress call does whatever is ready (never waits on one peer while
 * another's data is there) up to BRAID_BW_BUDGET bytes.
 *
 * Memory traffic (all-reduce of S bytes): each owner reads S/n of every
 * input and writes S/n; every rank reads and writes (n-1)/n·S in the
 * gather: (3n-1)·S in all, against about 4(n-1)·S for a ring through
 * shared cells.  The staging buffers (3 chunks) stay in the core's L2.
 *
 * Why the flags of consecutive calls never mix: every value carries the
 * call's seq, and a peer F writes anything of call c+1 into this rank's
 * area only after it completed call c, which needs this rank's done of
 * call c, which this rank sends after its last look at F's hello and
 * progress of call c.  In place, a rank overwrites its chunk c of slice j
 * (gather) only after owner j said chunk c is finished, i.e. after j read
 * that chunk of this rank's input. */
#include <stdlib.h>
#include <string.h>

#include "bw.h"

#define HELLO_STRIDE 320 /* flag, send key, receive key; whole lines */
#define FLAG_STRIDE  BRAID_BW_LINE
#define ID_BITS      40 /* of seq, in progress flags: chunks in the rest */

_Static_assert(8 + 2 * sizeof(braid_rkey_t) <= HELLO_STRIDE,
               "a hello must fit its slot");

/* Per (communicator, candidate). */
typedef struct pull_comm {
    braid_rmem_t   mem; /* area: hello[n] | progress[n] | done[n] */
    int            n;
    unsigned char *mate; /* [n] ranks sharing this rank's CPU */
    int            nmates;
    char          *stage; /* acc | t0 | t1, BRAID_BW_PULL_CHUNK each */
} pull_comm_t;

typedef struct pull {
    pull_comm_t            *pc;
    const braid_services_t *svc;
    braid_bw_plan_t         plan;
    uint64_t                id;       /* this call's flag value (seq + 1) */
    uint64_t                hello_id; /* id, and 24 signature bits above it */
    size_t                  dts;
    const char             *src;
    char                   *dst;
    braid_rkey_t            hello[2]; /* this rank's keys: send, receive */
    void                   *hsend, *hrecv;
    int                     exposed; /* 1: send, 2: and receive */
    braid_rkey_t           *keys;    /* [2n] peers' keys, copied from hellos */
    unsigned char          *have;    /* [n] hello seen */
    int                     nhave;
    /* reduce: chunk rs_next of slice me, input rs_k next in rank order */
    size_t       rs_next, rs_chunks;
    int          rs_k, fetching;
    const void  *x0;
    braid_treq_t rreq; /* the reduce's get in flight */
    braid_treq_t areq; /* the gather's get in flight */
    /* gather */
    size_t *pulled; /* [n] chunks of slice j in place here */
    size_t *avail;  /* [n] chunks owner j finished, as last seen */
    int     g_peer; /* the gather's get in flight: peer, count */
    size_t  g_chunks;
    int     gather_left; /* peers whose slice is not all here */
    /* allgather: the own block, copied in step with the gather */
    char  *own;
    size_t own_bytes, own_done;
    /* flags out: hello, progress, done; one request per peer each */
    braid_treq_t  *hreq, *preq, *dreq; /* [n] */
    size_t        *told; /* [n] progress value last put to peer */
    int            done_sent;
    unsigned char *dseen; /* [n] done seen */
    int            ndone;
} pull_t;

static uint64_t call_id(uint64_t seq)
{
    uint64_t id = (seq + 1) & ((UINT64_C(1) << ID_BITS) - 1);
    return id ? id : 1;
}

static size_t hello_off(int r) { return (size_t)r * HELLO_STRIDE; }
static size_t prog_off(int n, int r)
{
    return (size_t)n * HELLO_STRIDE + (size_t)r * FLAG_STRIDE;
}
static size_t done_off(int n, int r)
{
    return (size_t)n * (HELLO_STRIDE + FLAG_STRIDE) + (size_t)r * FLAG_STRIDE;
}

/* ------------------------------------------------------------ the state */

static void pull_comm_free(void *state, braid_tl_t *tl)
{
    pull_comm_t *pc = state;
    if (pc == NULL)
        return;
    if (pc->mem.local != NULL && tl != NULL)
        tl->ops->mem_free(tl->tcomm, &pc->mem);
    free(pc->mate);
    free(pc->stage);
    free(pc);
}

/* Created at the first call of this candidate: the area is collective, and
 * every rank makes that call. */
static braid_status_t comm_get(pull_comm_t **out, braid_task_t *task)
{
    pull_comm_t *pc = *task->comm_state;
    if (pc != NULL) {
        *out = pc;
        return BRAID_OK;
    }
    const braid_tl_t *tl  = task->tl;
    int               n   = task->size;
    size_t            len = (size_t)n * (HELLO_STRIDE + 2 * FLAG_STRIDE);
    pc                    = calloc(1, sizeof(*pc));
    if (pc != NULL) {
        pc->mate  = calloc((size_t)n, 1);
        pc->stage = braid_bw_alloc(3 * BRAID_BW_PULL_CHUNK);
    }
    braid_status_t st = BRAID_OK;
    if (pc == NULL || pc->mate == NULL || pc->stage == NULL)
        st = task->svc->error(BRAID_ERR_NO_MEMORY, "bw: pull: out of memory "
                                                   "for the staging buffers");
    /* Collective: a rank that failed above still takes part. */
    braid_rmem_t mem;
    memset(&mem, 0, sizeof(mem));
    braid_status_t ast = tl->ops->mem_alloc(tl->tcomm, len, &mem);
    if (st == BRAID_OK && ast == BRAID_OK &&
        (mem.local == NULL || mem.len < len))
        ast = task->svc->error(BRAID_ERR_TRANSPORT,
                               "bw: %s mem_alloc of %zu "
                               "bytes returned a smaller area",
                               tl->ops->name, len);
    if (st != BRAID_OK || ast != BRAID_OK) {
        if (mem.local != NULL)
            tl->ops->mem_free(tl->tcomm, &mem);
        pull_comm_free(pc, NULL);
        return st != BRAID_OK ? st : ast;
    }
    pc->mem           = mem;
    pc->n             = n;
    pc->nmates        = braid_bw_mates(pc->mate, task);
    *task->comm_state = pc;
    *out              = pc;
    return BRAID_OK;
}

/* ---------------------------------------------------------------- start */

static braid_status_t expose(braid_task_t *task, pull_t *s)
{
    const braid_transport_t *ops    = task->tl->ops;
    size_t                   sbytes = s->plan.coll == BRAID_COLL_REDUCE_SCATTER
                                          ? (size_t)task->size * task->count * s->dts
                                          : task->count * s->dts;
    braid_status_t st = ops->mem_expose(task->tl->tcomm, task->sendbuf, sbytes,
                                        &s->hello[0], &s->hsend);
    if (st != BRAID_OK)
        return st;
    s->exposed = 1;
    if (s->plan.coll != BRAID_COLL_ALLREDUCE)
        return BRAID_OK;
    if (task->recvbuf == task->sendbuf) {
        s->hello[1] = s->hello[0];
        return BRAID_OK;
    }
    st = ops->mem_expose(task->tl->tcomm, task->recvbuf, sbytes, &s->hello[1],
                         &s->hrecv);
    if (st == BRAID_OK)
        s->exposed = 2;
    return st;
}

static braid_status_t pull_start(braid_task_t *task, braid_wait_t *wait)
{
    int            n = task->size;
    braid_status_t st;

    (void)wait;
    size_t size = sizeof(pull_t) + 2 * (size_t)n * sizeof(braid_rkey_t) +
                  3 * (size_t)n * sizeof(braid_treq_t) +
                  3 * (size_t)n * sizeof(size_t) + 2 * (size_t)n;
    if ((st = braid_bw_priv_alloc(task, size)) != BRAID_OK)
        return st;
    pull_t *s = task->priv;
    s->keys   = (braid_rkey_t *)(s + 1);
    s->hreq   = (braid_treq_t *)(s->keys + 2 * n);
    s->preq   = s->hreq + n;
    s->dreq   = s->preq + n;
    s->pulled = (size_t *)(s->dreq + n);
    s->avail  = s->pulled + n;
    s->told   = s->avail + n;
    s->have   = (unsigned char *)(s->told + n);
    s->dseen  = s->have + n;
    s->svc    = task->svc;
    s->dts    = task->dtsize;
    s->src    = task->sendbuf;
    s->dst    = task->recvbuf;
    s->g_peer = -1;
    braid_bw_plan(&s->plan, task->coll, n, task->count, task->dtsize,
                  BRAID_BW_PULL_CHUNK);
    if (n == 1 || task->count == 0)
        return BRAID_OK; /* progress completes locally */
    if ((st = comm_get(&s->pc, task)) != BRAID_OK)
        return st;
    if (s->pc->n != n)
        return task->svc->error(BRAID_ERR_INTERNAL,
                                "bw: pull: state made "
                                "for %d ranks used by a %d-rank call",
                                s->pc->n, n);
    s->id       = call_id(task->seq);
    s->hello_id = s->id | (uint64_t)(braid_task_sig32(task) & 0xffffffu)
                              << ID_BITS;
    if (task->coll != BRAID_COLL_ALLGATHER)
        s->rs_chunks = braid_bw_nchunks(&s->plan, task->rank);
    if (task->coll != BRAID_COLL_REDUCE_SCATTER)
        for (int j = 0; j < n; j++)
            s->gather_left +=
                j != task->rank && braid_bw_nchunks(&s->plan, j) > 0;
    if (s->plan.chunk * s->dts > BRAID_BW_PULL_CHUNK)
        return task->svc->error(BRAID_ERR_NOT_SUPPORTED,
                                "bw: pull: %zu "
                                "elements per rank need chunks larger than "
                                "its staging buffers",
                                task->count);
    if ((st = expose(task, s)) != BRAID_OK)
        return st;
    /* The own block of an allgather is a local copy (own_copy). */
    if (task->coll == BRAID_COLL_ALLGATHER) {
        s->own       = s->dst + (size_t)task->rank * task->count * s->dts;
        s->own_bytes = s->own != s->src ? task->count * s->dts : 0;
    }
    for (int i = 1; i < n; i++) {
        int p = (task->rank + i) % n;
        st    = task->tl->ops->put_signal(task->tl->tcomm, &s->pc->mem, p,
                                          hello_off(task->rank) + 8, s->hello,
                                          sizeof(s->hello), hello_off(task->rank),
                                          s->hello_id, &s->hreq[p]);
        if (st != BRAID_OK)
            return st;
    }
    return BRAID_OK;
}

/* ------------------------------------------------------------- progress */

/* Copies the keys of every hello that arrived; 1 once all are here, -1
 * when one is of this call's number but another signature: that peer
 * called something else, and nothing is read before every hello agrees. */
static int hellos_in(braid_task_t *task, pull_t *s)
{
    int n = task->size;
    for (int r = 0; r < n && s->nhave < n - 1; r++) {
        if (r == task->rank || s->have[r])
            continue;
        uint64_t f = braid_bw_flag_at(&s->pc->mem, hello_off(r));
        if (f != s->hello_id) {
            if ((f & ((UINT64_C(1) << ID_BITS) - 1)) != s->id)
                continue; /* not here yet */
            (void)task->svc->error(
                BRAID_ERR_MISMATCH,
                "bw: pull: rank %d: rank %d is in call "
                "#%llu with another signature (bits %06x, this rank's %06x): "
                "the ranks called different collectives, counts, dtypes or "
                "ops",
                task->rank, r, (unsigned long long)task->seq,
                (unsigned)(f >> ID_BITS), (unsigned)(s->hello_id >> ID_BITS));
            return -1;
        }
        memcpy(&s->keys[2 * r],
               (const char *)s->pc->mem.local + hello_off(r) + 8,
               2 * sizeof(braid_rkey_t));
        s->have[r] = 1;
        s->nhave++;
    }
    return s->nhave == n - 1;
}

/* Completes a get; BRAID_INPROGRESS while it runs. */
static braid_status_t get_done(braid_task_t *task, braid_treq_t *req)
{
    if (!req->active)
        return BRAID_OK;
    return task->tl->ops->test(task->tl->tcomm, req);
}

/* One chunk of the own slice, input by input in rank order.  *moved: bytes
 * read.  BRAID_INPROGRESS when a get is still running (then resumed). */
static braid_status_t reduce_chunk(braid_task_t *task, pull_t *s,
                                   size_t *moved)
{
    const braid_bw_plan_t *p = &s->plan;
    int                    n = task->size, me = task->rank;
    size_t                 c   = s->rs_next;
    size_t                 len = braid_bw_chunk_len(p, me, c);
    size_t o     = braid_bw_slice_off(p, me) + braid_bw_chunk_off(p, c);
    size_t bytes = len * s->dts;
    char  *acc = s->pc->stage, *t0 = acc + BRAID_BW_PULL_CHUNK,
         *t1           = t0 + BRAID_BW_PULL_CHUNK;
    char          *out = p->coll == BRAID_COLL_ALLREDUCE
                             ? s->dst + o * s->dts
                             : s->dst + braid_bw_chunk_off(p, c) * s->dts;
    braid_status_t st;

    for (; s->rs_k < n; s->rs_k++) {
        int         k = s->rs_k;
        const void *x;
        if (k == me) {
            x = s->src + o * s->dts;
        } else {
            char *into = k == 0 ? t0 : t1;
            if (!s->fetching) {
                st = task->tl->ops->get(task->tl->tcomm, k, &s->keys[2 * k],
                                        o * s->dts, into, bytes, &s->rreq);
                if (st != BRAID_OK)
                    return st;
                s->fetching = 1;
                *moved += bytes;
            }
            if ((st = get_done(task, &s->rreq)) != BRAID_OK)
                return st;
            s->fetching = 0;
            x           = into;
        }
        if (k == 0)
            s->x0 = x;
        else if (k == 1)
            task->svc->reduce2(n == 2 ? out : acc, s->x0, x, len, task->dtype,
                               task->op);
        else
            task->svc->reduce2(k == n - 1 ? out : acc, acc, x, len,
                               task->dtype, task->op);
    }
    task->svc->finish_avg(out, len, task->dtype, task->op, n);
    s->rs_k = 0;
    s->rs_next++;
    return BRAID_OK;
}

/* Puts this rank's progress (chunks of its slice finished) to the peers
 * whose last put completed; the others get a later value.  Called with
 * force once the slice is done, until every peer has the final value. */
static braid_status_t tell_progress(braid_task_t *task, pull_t *s, int *all)
{
    int      n = task->size, me = task->rank;
    uint64_t v = (s->id << (64 - ID_BITS)) | s->rs_next;
    *all       = 1;
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n;
        if (s->told[p] == s->rs_next + 1)
            continue; /* told already (told holds value + 1) */
        if (s->preq[p].active) {
            braid_status_t st =
                task->tl->ops->test(task->tl->tcomm, &s->preq[p]);
            if (st == BRAID_INPROGRESS) {
                *all = 0;
                continue;
            }
            if (st != BRAID_OK)
                return st;
        }
        braid_status_t st = task->tl->ops->put_signal(
            task->tl->tcomm, &s->pc->mem, p, prog_off(n, me), NULL, 0,
            prog_off(n, me), v, &s->preq[p]);
        if (st != BRAID_OK)
            return st;
        s->told[p] = s->rs_next + 1;
    }
    return BRAID_OK;
}

/* The own block of an allgather up to byte `upto`, copied in step with
 * the gather's reads (which call it with the end of each read): every
 * peer copies the same part of its own input about then, so the part a
 * rank reads from a peer is still in the shared cache, and each input
 * comes from memory once.  Streaming stores: this rank does not read its
 * receive buffer again, and a store that skips the cache also skips the
 * read of the line it replaces. */
static void own_copy(pull_t *s, size_t upto, size_t *moved)
{
    if (upto > s->own_bytes)
        upto = s->own_bytes;
    if (upto <= s->own_done)
        return;
    s->svc->copy(s->own + s->own_done, s->src + s->own_done,
                 upto - s->own_done, 1);
    *moved += upto - s->own_done;
    s->own_done = upto;
}

/* Chunks of slice j that its owner finished, as far as this rank knows. */
static size_t finished(braid_task_t *task, pull_t *s, int j)
{
    if (s->plan.coll == BRAID_COLL_ALLGATHER)
        return braid_bw_nchunks(&s->plan, j); /* inputs: all ready */
    uint64_t v = braid_bw_flag_at(&s->pc->mem, prog_off(task->size, j));
    if (v >> (64 - ID_BITS) != s->id)
        return 0;
    return (size_t)(v & ((UINT64_C(1) << (64 - ID_BITS)) - 1));
}

/* Reads finished chunks of other slices; *moved counts the bytes. */
static braid_status_t gather(braid_task_t *task, pull_t *s, size_t *moved,
                             size_t budget)
{
    const braid_bw_plan_t *p = &s->plan;
    int                    n = task->size, me = task->rank;
    braid_status_t         st;

    if (s->g_peer >= 0) { /* the read of an earlier call */
        if ((st = get_done(task, &s->areq)) != BRAID_OK)
            return st;
        int j = s->g_peer;
        s->pulled[j] += s->g_chunks;
        if (s->pulled[j] == braid_bw_nchunks(p, j))
            s->gather_left--;
        s->g_peer = -1;
    }
    for (int i = 1; i < n && *moved < budget; i++) {
        int    j    = (me + i) % n;
        size_t have = s->pulled[j], all = braid_bw_nchunks(p, j);
        if (have == all)
            continue;
        if (s->avail[j] <= have)
            s->avail[j] = finished(task, s, j);
        if (s->avail[j] <= have)
            continue;
        /* Consecutive finished chunks in one read, up to a bound. */
        size_t k    = s->avail[j] - have,
               most = BRAID_BW_PULL_MAX_GET / (p->chunk * s->dts);
        if (most == 0)
            most = 1;
        if (k > most)
            k = most;
        size_t first = braid_bw_chunk_off(p, have);
        size_t elems = 0;
        for (size_t c = have; c < have + k; c++)
            elems += braid_bw_chunk_len(p, j, c);
        size_t at = braid_bw_slice_off(p, j) + first; /* in recvbuf */
        if (p->coll == BRAID_COLL_ALLGATHER)
            own_copy(s, (first + elems) * s->dts, moved);
        /* allgather reads the owner's send buffer (its slice starts at 0),
         * all-reduce its receive buffer at the slice's own place. */
        size_t from = p->coll == BRAID_COLL_ALLGATHER ? first : at;
        const braid_rkey_t *key =
            &s->keys[2 * j + (p->coll == BRAID_COLL_ALLREDUCE)];
        st =
            task->tl->ops->get(task->tl->tcomm, j, key, from * s->dts,
                               s->dst + at * s->dts, elems * s->dts, &s->areq);
        if (st != BRAID_OK)
            return st;
        *moved += elems * s->dts;
        s->g_peer   = j;
        s->g_chunks = k;
        if ((st = get_done(task, &s->areq)) != BRAID_OK)
            return st; /* INPROGRESS: accounted for on the next call */
        s->pulled[j] += k;
        if (s->pulled[j] == all)
            s->gather_left--;
        s->g_peer = -1;
    }
    return BRAID_OK;
}

/* What the call waits for when nothing was ready: REMOTE when none of the
 * ranks it needs shares this CPU. */
static braid_wait_t wait_kind(braid_task_t *task, pull_t *s)
{
    unsigned char want[256];
    int           n = task->size;
    if (n > (int)sizeof(want) || s->pc == NULL)
        return BRAID_WAIT_LOCAL;
    memset(want, 0, (size_t)n);
    for (int r = 0; r < n; r++) {
        if (r == task->rank)
            continue;
        if (s->nhave < n - 1)
            want[r] = !s->have[r];
        else if (!s->done_sent)
            want[r] = s->pulled[r] < braid_bw_nchunks(&s->plan, r) &&
                      s->plan.coll != BRAID_COLL_REDUCE_SCATTER;
        else
            want[r] = !s->dseen[r];
    }
    return braid_bw_only_remote(s->pc->mate, s->pc->nmates, want, n)
               ? BRAID_WAIT_REMOTE
               : BRAID_WAIT_LOCAL;
}

static braid_status_t send_done(braid_task_t *task, pull_t *s)
{
    int n = task->size, me = task->rank;
    for (int i = 1; i < n; i++) {
        int            p  = (me + i) % n;
        braid_status_t st = task->tl->ops->put_signal(
            task->tl->tcomm, &s->pc->mem, p, done_off(n, me), NULL, 0,
            done_off(n, me), s->id, &s->dreq[p]);
        if (st != BRAID_OK)
            return st;
    }
    s->done_sent = 1;
    return BRAID_OK;
}

static braid_status_t reqs_test(braid_task_t *task, braid_treq_t *reqs, int n)
{
    braid_status_t all = BRAID_OK;
    for (int r = 0; r < n; r++) {
        if (!reqs[r].active)
            continue;
        braid_status_t st = task->tl->ops->test(task->tl->tcomm, &reqs[r]);
        if (st == BRAID_INPROGRESS)
            all = BRAID_INPROGRESS;
        else if (st != BRAID_OK)
            return st;
    }
    return all;
}

static braid_status_t pull_progress(braid_task_t *task, braid_wait_t *wait)
{
    pull_t        *s     = task->priv;
    int            n     = task->size;
    size_t         moved = 0;
    braid_status_t st;

    if (s->pc == NULL) {
        braid_bw_local_result(task);
        return BRAID_OK;
    }
    if (task->tl->ops->progress != NULL &&
        (st = task->tl->ops->progress(task->tl->tcomm)) != BRAID_OK)
        return st;
    if (s->nhave < n - 1) {
        int in = hellos_in(task, s);
        if (in < 0)
            return BRAID_ERR_MISMATCH;
        if (in == 0) {
            *wait = wait_kind(task, s);
            return BRAID_INPROGRESS;
        }
    }
    while (!s->done_sent && moved < BRAID_BW_BUDGET) {
        size_t before = moved;
        if (s->gather_left > 0 &&
            (st = gather(task, s, &moved, BRAID_BW_BUDGET)) != BRAID_OK)
            return st;
        if (s->rs_next < s->rs_chunks) {
            if ((st = reduce_chunk(task, s, &moved)) != BRAID_OK)
                return st;
            if (s->plan.coll == BRAID_COLL_ALLREDUCE) {
                int all;
                if ((st = tell_progress(task, s, &all)) != BRAID_OK)
                    return st;
            }
        }
        if (s->gather_left == 0 && s->own_done < s->own_bytes)
            own_copy(s, s->own_done + BRAID_BW_BUDGET, &moved);
        int told = 1;
        if (s->rs_next == s->rs_chunks &&
            s->plan.coll == BRAID_COLL_ALLREDUCE &&
            (st = tell_progress(task, s, &told)) != BRAID_OK)
            return st;
        if (s->rs_next == s->rs_chunks && s->gather_left == 0 && told &&
            s->own_done == s->own_bytes &&
            (st = send_done(task, s)) != BRAID_OK)
            return st;
        if (moved == before)
            break; /* nothing ready: wait for the peers */
    }
    if (!s->done_sent) {
        *wait =
            moved >= BRAID_BW_BUDGET ? BRAID_WAIT_LOCAL : wait_kind(task, s);
        return BRAID_INPROGRESS;
    }
    for (int r = 0; r < n && s->ndone < n - 1; r++)
        if (r != task->rank && !s->dseen[r] &&
            braid_bw_flag_at(&s->pc->mem, done_off(n, r)) == s->id) {
            s->dseen[r] = 1;
            s->ndone++;
        }
    /* Every flag put of this call must have left before the call ends
     * (their sources are this call's state). */
    braid_status_t out = reqs_test(task, s->hreq, n);
    if (out == BRAID_OK)
        out = reqs_test(task, s->preq, n);
    if (out == BRAID_OK)
        out = reqs_test(task, s->dreq, n);
    if (out != BRAID_OK && out != BRAID_INPROGRESS)
        return out;
    if (s->ndone == n - 1 && out == BRAID_OK)
        return BRAID_OK;
    *wait = wait_kind(task, s);
    return BRAID_INPROGRESS;
}

static void pull_finish(braid_task_t *task)
{
    pull_t *s = task->priv;
    if (s != NULL && s->pc != NULL) {
        const braid_transport_t *ops = task->tl->ops;
        void                    *tc  = task->tl->tcomm;
        ops->cancel(tc, &s->rreq);
        ops->cancel(tc, &s->areq);
        for (int r = 0; r < task->size; r++) {
            ops->cancel(tc, &s->hreq[r]);
            ops->cancel(tc, &s->preq[r]);
            ops->cancel(tc, &s->dreq[r]);
        }
        if (s->exposed >= 1)
            ops->mem_unexpose(tc, s->hsend);
        if (s->exposed >= 2)
            ops->mem_unexpose(tc, s->hrecv);
    }
    braid_bw_priv_free(task);
}

static double pull_estimate(const braid_algo_t    *self,
                            const braid_cost_in_t *in)
{
    (void)self;
    return braid_bw_cost_pull(in);
}

BRAID_BW_ALGO(braid_bw_pull_allreduce, pull,
              BRAID_CAP_GET | BRAID_CAP_PUT_SIGNAL, BRAID_COLL_ALLREDUCE);
BRAID_BW_ALGO(braid_bw_pull_reduce_scatter, pull,
              BRAID_CAP_GET | BRAID_CAP_PUT_SIGNAL, BRAID_COLL_REDUCE_SCATTER);
BRAID_BW_ALGO(braid_bw_pull_allgather, pull,
              BRAID_CAP_GET | BRAID_CAP_PUT_SIGNAL, BRAID_COLL_ALLGATHER);
