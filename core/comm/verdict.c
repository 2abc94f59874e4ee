/* The verdict of a failure inquiry (verdict.h).
 *
 * The failed call is the first one that some live rank has not completed:
 * calls complete in order on every rank, so each survivor's error names
 * the same number even when some of them finished that call before the
 * failure reached them.  Why it failed, in order of precedence:
 *   - the ranks called different things (a signature differs): MISMATCH,
 *     naming a rank of the majority and one that differs;
 *   - a rank's process is gone: PEER, naming it;
 *   - a rank does not answer, or has not entered the call: TIMEOUT, naming
 *     it with what is known of it (process state, calls entered and done);
 *   - every rank entered the call and none is missing: the call itself
 *     stalled or failed; the first rank's own error says how. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "comm/verdict.h"

#define NAMED_MAX 3

typedef struct out {
    char  *buf;
    size_t len, off;
} out_t;

static void put(out_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(out_t *o, const char *fmt, ...)
{
    if (o->off + 1 >= o->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->off, o->len - o->off, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->off +=
            (size_t)n < o->len - o->off ? (size_t)n : o->len - o->off - 1;
}

static int live(const braid_rank_state_t *r)
{
    return r->state != BRAID_RS_LOST;
}

static int sig_at(braid_sig_t *s, const braid_rank_state_t *r, uint64_t seq)
{
    return r->known && r->prog.entered > seq &&
           braid_progress_sig(s, &r->prog, seq);
}

/* The first call some live rank (any rank, failing that) has not done. */
static int failed_call(uint64_t *k, int size, const braid_rank_state_t *rs)
{
    for (int pass = 0; pass < 2; pass++) {
        int found = 0;
        for (int r = 0; r < size; r++) {
            if (!rs[r].known || (pass == 0 && !live(&rs[r])))
                continue;
            if (!found || rs[r].prog.completed < *k)
                *k = rs[r].prog.completed;
            found = 1;
        }
        if (found)
            return 1;
    }
    return 0;
}

/* Call seq as most ranks that recorded it have it (ties: the lowest
 * rank's): *ref is such a rank, -1 when nobody recorded it. */
static void majority(int *ref, int size, const braid_rank_state_t *rs,
                     uint64_t seq)
{
    int best = 0;
    *ref     = -1;
    for (int r = 0; r < size; r++) {
        braid_sig_t a, b;
        if (!sig_at(&a, &rs[r], seq))
            continue;
        int n = 0;
        for (int q = 0; q < size; q++)
            n += sig_at(&b, &rs[q], seq) && braid_sig_equal(&a, &b);
        if (n > best) {
            best = n;
            *ref = r;
        }
    }
}

/* The first call from k on whose recorded signatures differ. */
static int find_mismatch(uint64_t *seq, int *ref, int *odd, int size,
                         const braid_rank_state_t *rs, uint64_t k)
{
    for (uint64_t s = k; s < k + BRAID_HIST; s++) {
        braid_sig_t a, b;
        majority(ref, size, rs, s);
        if (*ref < 0 || !sig_at(&a, &rs[*ref], s))
            continue;
        for (int r = 0; r < size; r++) {
            if (sig_at(&b, &rs[r], s) && !braid_sig_equal(&a, &b)) {
                *seq = s;
                *odd = r;
                return 1;
            }
        }
    }
    return 0;
}

static const char *proc_words(char st)
{
    switch (st) {
    case 'T':
    case 't': return "process stopped";
    case 'Z':
    case 'X': return "process exited";
    case 'D': return "process in uninterruptible sleep";
    case 'R':
    case 'S': return "process running";
    default: return NULL;
    }
}

/* What is known of where rank r is: "in call #17", "between calls, after
 * #16", "in braid_finalize". */
static void where(out_t *o, const braid_rank_state_t *r,
                  const char *(*api_name)(int))
{
    const char *sep = "";
    /* A lost rank's process may not be reaped yet: its state says nothing
     * then. */
    if (r->proc && proc_words(r->proc) &&
        (r->state != BRAID_RS_LOST || r->proc == 'Z' || r->proc == 'X')) {
        put(o, "%s", proc_words(r->proc));
        sep = "; ";
    }
    if (r->known) {
        if (r->prog.entered > r->prog.completed)
            put(o, "%sin call #%llu", sep,
                (unsigned long long)r->prog.completed);
        else if (r->prog.completed > 0)
            put(o, "%sbetween calls, after #%llu", sep,
                (unsigned long long)(r->prog.completed - 1));
        else
            put(o, "%sbefore its first call", sep);
        sep = "; ";
    }
    if (r->state == BRAID_RS_ANSWERED && r->api != 0 && api_name != NULL)
        put(o, "%sinside %s", sep, api_name(r->api));
}

/* "0-2,5": the ranks for which pick() holds. */
static void rank_list(out_t *o, int size, const int *pick)
{
    int first = 1;
    for (int r = 0; r < size; r++) {
        if (!pick[r])
            continue;
        int e = r;
        while (e + 1 < size && pick[e + 1])
            e++;
        put(o, first ? "%d" : ",%d", r);
        if (e > r)
            put(o, "%s%d", e == r + 1 ? "," : "-", e);
        first = 0;
        r     = e;
    }
}

/* The ranks in call k that are not to blame: "; ranks 0-2 wait in it". */
static void waiting(out_t *o, int size, const braid_rank_state_t *rs,
                    const int *named, uint64_t k)
{
    int pick[size], n = 0;
    for (int r = 0; r < size; r++) {
        pick[r] = !named[r] && live(&rs[r]) && rs[r].known &&
                  rs[r].prog.entered > k && rs[r].prog.completed <= k;
        n += pick[r];
    }
    if (n == 0)
        return;
    put(o, "; rank%s ", n > 1 ? "s" : "");
    rank_list(o, size, pick);
    put(o, " wait%s in it", n > 1 ? "" : "s");
}

static void head(out_t *o, int size, const braid_rank_state_t *rs, int have_k,
                 uint64_t k)
{
    braid_sig_t s;
    char        d[96];
    int         ref;
    if (!have_k) {
        put(o, "the communicator failed");
        return;
    }
    put(o, "call #%llu", (unsigned long long)k);
    majority(&ref, size, rs, k);
    if (ref >= 0 && sig_at(&s, &rs[ref], k)) {
        braid_sig_describe(d, sizeof(d), &s);
        put(o, " %s", d);
    }
}

void braid_verdict_judge(braid_verdict_t *v, int size,
                         const braid_rank_state_t *rs,
                         const char *(*api_name)(int api))
{
    out_t    o = {v->text, sizeof(v->text), 0};
    uint64_t k = 0, mseq = 0;
    int      ref = -1, odd = -1, named[size > 0 ? size : 1], nnamed = 0;
    int      have_k = failed_call(&k, size, rs);

    v->text[0] = '\0';
    v->call    = k;
    v->culprit = -1;
    memset(named, 0, sizeof(named));

    if (have_k && find_mismatch(&mseq, &ref, &odd, size, rs, k)) {
        braid_sig_t a, b;
        char        da[96], db[96];
        sig_at(&a, &rs[ref], mseq);
        sig_at(&b, &rs[odd], mseq);
        braid_sig_describe(da, sizeof(da), &a);
        braid_sig_describe(db, sizeof(db), &b);
        v->status  = BRAID_ERR_MISMATCH;
        v->call    = mseq;
        v->culprit = odd;
        put(&o, "call #%llu differs between ranks: %s calls %s, %s calls %s",
            (unsigned long long)mseq, rs[ref].desc, da, rs[odd].desc, db);
        return;
    }

    /* The ranks to blame: the lost, the silent, then those that answered
     * but have not entered the failed call. */
    for (int pass = 0; pass < 3; pass++) {
        for (int r = 0; r < size && nnamed < NAMED_MAX; r++) {
            const braid_rank_state_t *x = &rs[r];
            int behind = have_k && x->known && live(x) && x->prog.entered <= k;
            int blame  = pass == 0   ? x->state == BRAID_RS_LOST
                         : pass == 1 ? x->state == BRAID_RS_SILENT
                                     : behind;
            if (!blame || named[r])
                continue;
            named[r] = 1;
            if (nnamed++ == 0) {
                v->culprit = r;
                head(&o, size, rs, have_k, k);
                put(&o, x->state == BRAID_RS_LOST ? " failed: "
                                                  : " did not complete: ");
                v->status = x->state == BRAID_RS_LOST ? BRAID_ERR_PEER
                                                      : BRAID_ERR_TIMEOUT;
            } else {
                put(&o, "; ");
            }
            char  w[160] = "";
            out_t wo     = {w, sizeof(w), 0};
            where(&wo, x, api_name);
            put(&o, "%s %s%s%s%s", x->desc,
                x->state == BRAID_RS_LOST     ? "was lost"
                : x->state == BRAID_RS_SILENT ? "does not answer"
                                              : "has not entered it",
                w[0] ? " (" : "", w, w[0] ? ")" : "");
        }
    }
    if (nnamed > 0) {
        waiting(&o, size, rs, named, k);
        return;
    }

    /* Nobody missing: the call failed by itself.  The first rank that
     * reported an error of its own says how. */
    v->status = BRAID_ERR_TIMEOUT;
    head(&o, size, rs, have_k, k);
    put(&o, " did not complete although every rank entered it");
    for (int r = 0; r < size; r++) {
        if (rs[r].state == BRAID_RS_ANSWERED && rs[r].status != BRAID_OK) {
            v->status = (braid_status_t)rs[r].status;
            put(&o, ": rank %d: %s", r, rs[r].text);
            break;
        }
    }
}
