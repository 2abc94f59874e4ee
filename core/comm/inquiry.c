/* The communicator's side of a failure inquiry (bootstrap/inquiry.c says
 * how it runs): what a rank reports, and how the root -- or a rank left
 * without one -- turns the reports into the verdict (comm/verdict.c).
 *
 * A report holds the rank's own progress record (calls entered and
 * completed, the signatures of the last BRAID_HIST), the braid call it is
 * inside, its own error if its call failed, and what its host's progress
 * board shows of its host mates, with their process states: a stopped rank
 * cannot answer, but a mate can say how far it got.  All ranks of a job
 * run the same library, so the report travels as the struct it is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/verdict.h"
#include "util/env.h"
#include "util/log.h"
#include "util/proc.h"

#define LOG_COMP "comm"

_Static_assert((int)BRAID_RS_ANSWERED == (int)BRAID_INQ_ANSWERED &&
                   (int)BRAID_RS_SILENT == (int)BRAID_INQ_SILENT &&
                   (int)BRAID_RS_LOST == (int)BRAID_INQ_LOST,
               "inquiry states and rank states must agree");

/* A host mate as this rank's board shows it. */
typedef struct view {
    int32_t           rank;   /* -1: empty */
    char              proc;   /* /proc state letter, 0 if unknown */
    uint8_t           failed; /* a call failed there: its progress is final */
    uint8_t           pad[2];
    int64_t           pid;
    uint64_t          entered, completed;
    braid_hist_snap_t last; /* its last call entered */
} view_t;

typedef struct report {
    int32_t               status; /* its own failure; BRAID_OK if asked */
    int32_t               api;    /* the call it is inside, 0 if none */
    int32_t               nviews;
    int32_t               pad;
    braid_progress_snap_t self;
    char                  text[200];
    view_t                views[]; /* topo.ppn of them */
} report_t;

static size_t report_len(const braid_comm_t *comm)
{
    return sizeof(report_t) + (size_t)comm->topo.ppn * sizeof(view_t);
}

static void take_view(view_t *v, braid_comm_t *comm, int r,
                      braid_progress_t *slot)
{
    braid_progress_snap_t s;
    braid_progress_read(&s, slot);
    v->rank      = r;
    v->pid       = s.pid;
    v->proc      = r == comm->rank ? 'R' : braid_proc_state((long)s.pid);
    v->entered   = s.entered;
    v->completed = s.completed;
    v->failed    = s.failed != 0;
    if (s.entered > 0)
        v->last = s.hist[(s.entered - 1) & (BRAID_HIST - 1)];
}

static void report(void *ctx, void *buf, braid_status_t st, const char *text)
{
    braid_comm_t *comm = ctx;
    report_t     *rep  = buf;
    memset(rep, 0, report_len(comm));
    rep->status = st;
    rep->api    = (int32_t)(atomic_load(&comm->inside) & 0xff);
    braid_progress_read(&rep->self, comm->progress);
    snprintf(rep->text, sizeof(rep->text), "%s", text);
    for (int r = 0; r < comm->size && rep->nviews < comm->topo.ppn; r++) {
        braid_progress_t *slot = braid_board_slot(comm, r);
        if (slot != NULL)
            take_view(&rep->views[rep->nviews++], comm, r, slot);
    }
}

/* A report from the network: bounded and printable before use. */
static const report_t *report_of(const braid_comm_t *comm,
                                 const uint8_t *reports, int r)
{
    report_t *rep = (report_t *)(reports + (size_t)r * report_len(comm));
    rep->text[sizeof(rep->text) - 1] = '\0';
    for (char *p = rep->text; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            *p = '?';
    if (rep->nviews < 0 || rep->nviews > comm->topo.ppn)
        rep->nviews = 0;
    return rep;
}

/* What one view says of its rank, unless better is known already. */
static void apply_view(braid_rank_state_t *rs, const view_t *v)
{
    if (rs->state == BRAID_RS_ANSWERED ||
        (rs->known && rs->prog.entered >= v->entered))
        return;
    memset(&rs->prog, 0, sizeof(rs->prog));
    rs->known          = 1;
    rs->prog.entered   = v->entered;
    rs->prog.completed = v->completed;
    rs->prog.pid       = v->pid;
    if (v->entered > 0 && v->last.seq1 == v->entered)
        rs->prog.hist[(v->entered - 1) & (BRAID_HIST - 1)] = v->last;
    if (v->proc)
        rs->proc = v->proc;
}

/* An answering rank as its report says. */
static void take_report(braid_rank_state_t *rs, const report_t *rep)
{
    rs->known  = 1;
    rs->prog   = rep->self;
    rs->api    = rep->api;
    rs->status = rep->status;
    snprintf(rs->text, sizeof(rs->text), "%s", rep->text);
}

/* What a report's board views say of the ranks that did not answer. */
static void take_views(braid_rank_state_t *rs, const braid_comm_t *comm,
                       const report_t *rep)
{
    for (int i = 0; i < rep->nviews; i++) {
        int q = rep->views[i].rank;
        if (q >= 0 && q < comm->size)
            apply_view(&rs[q], &rep->views[i]);
    }
}

static void describe(braid_rank_state_t *rs, braid_comm_t *comm, int r)
{
    long pid;
    char host[64];
    braid_bootstrap_ident(comm->bs, r, &pid, host, sizeof(host));
    if (pid == 0 && rs->known)
        pid = (long)rs->prog.pid;
    if (pid == 0)
        snprintf(rs->desc, sizeof(rs->desc), "rank %d", r);
    else if (host[0])
        snprintf(rs->desc, sizeof(rs->desc), "rank %d (host %s, pid %ld)", r,
                 host, pid);
    else
        snprintf(rs->desc, sizeof(rs->desc), "rank %d (pid %ld)", r, pid);
}

static const char *api_name(int api)
{
    return braid_api_name((braid_api_t)api);
}

/* Names the culprit to the launcher (braidrun's summary) and returns the
 * verdict's status with its text in text. */
static braid_status_t conclude(braid_comm_t *comm, braid_rank_state_t *rs,
                               char *text, size_t len)
{
    braid_verdict_t v;
    for (int r = 0; r < comm->size; r++)
        describe(&rs[r], comm, r);
    braid_verdict_judge(&v, comm->size, rs, api_name);
    snprintf(text, len, "%s", v.text);
    if (v.culprit >= 0) {
        long pid = 0;
        char host[64];
        braid_bootstrap_ident(comm->bs, v.culprit, &pid, host, sizeof(host));
        if (pid == 0 && rs[v.culprit].known)
            pid = (long)rs[v.culprit].prog.pid;
        braid_launcher_blame(pid, v.text);
    }
    return v.status;
}

static braid_status_t judge(void *ctx, const void *reports,
                            const uint8_t *state, char *text, size_t len)
{
    braid_comm_t       *comm = ctx;
    braid_rank_state_t *rs   = calloc((size_t)comm->size, sizeof(*rs));
    if (rs == NULL) {
        snprintf(text, len, "a call failed (no memory to judge why)");
        return BRAID_ERR_NO_MEMORY;
    }
    for (int r = 0; r < comm->size; r++) {
        rs[r].state = state[r];
        if (state[r] == BRAID_INQ_ANSWERED)
            take_report(&rs[r], report_of(comm, reports, r));
    }
    for (int r = 0; r < comm->size; r++) {
        if (state[r] == BRAID_INQ_ANSWERED)
            take_views(rs, comm, report_of(comm, reports, r));
    }
    braid_status_t st = conclude(comm, rs, text, len);
    free(rs);
    return st;
}

static braid_status_t judge_alone(void *ctx, int root_state, char *text,
                                  size_t len)
{
    braid_comm_t       *comm = ctx;
    braid_rank_state_t *rs   = calloc((size_t)comm->size, sizeof(*rs));
    report_t           *rep  = calloc(1, report_len(comm));
    braid_status_t      st;
    if (rs == NULL || rep == NULL) {
        snprintf(text, len, "rank 0 does not answer (no memory to say more)");
        st = root_state == BRAID_RS_LOST ? BRAID_ERR_PEER : BRAID_ERR_TIMEOUT;
        goto out;
    }
    /* Mates still inside a call may yet complete it (they may have had
     * rank 0's data before it went): wait, a little, until every one has
     * failed, left its call, or gone, so that all judge the same board.
     * This rank will complete nothing more: say so first, or mates judging
     * at the same time would wait for each other. */
    atomic_store(&comm->progress->failed, 1);
    double deadline = braid_now_s() + braid_inquiry_window_s();
    for (;;) {
        int settling = 0;
        report(comm, rep, BRAID_OK, "");
        for (int i = 0; i < rep->nviews; i++) {
            const view_t *v = &rep->views[i];
            settling += v->rank != comm->rank && v->rank != 0 && !v->failed &&
                        v->entered > v->completed && v->proc != 0 &&
                        v->proc != 'Z' && v->proc != 'X';
        }
        if (settling == 0 || braid_now_s() > deadline)
            break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    rs[comm->rank].state = BRAID_RS_ANSWERED;
    take_report(&rs[comm->rank], rep);
    rs[0].state = root_state;
    /* Mates whose process is gone are most likely survivors that gave up
     * before this one: they still count for the failed call, or ranks
     * that look at the board a moment apart would name different ones. */
    take_views(rs, comm, rep);
    st = conclude(comm, rs, text, len);
out:
    free(rs);
    free(rep);
    return st;
}

void braid_comm_inquiry_attach(braid_comm_t *comm)
{
    braid_inquiry_t inq = {
        .ctx         = comm,
        .report_len  = report_len(comm),
        .report      = report,
        .judge       = judge,
        .judge_alone = judge_alone,
    };
    braid_bootstrap_set_inquiry(comm->bs, &inq);
}

braid_status_t braid_call_failed(braid_comm_t *comm, braid_call_t *call,
                                 braid_status_t st, int here)
{
    char                seen[512], verdict[512];
    const braid_task_t *t = &call->task;
    seen[0]               = '\0';
    if (here) {
        snprintf(seen, sizeof(seen), "%s", braid_last_error());
        st = braid_bootstrap_inquire(comm->bs, st);
    }
    snprintf(verdict, sizeof(verdict), "%s", braid_last_error());
    if (seen[0] != '\0' && strstr(verdict, seen) == NULL)
        st = braid_error(st,
                         "%s (here: %s of %zu elements (%s), call #%llu: "
                         "%s)",
                         verdict, braid_coll_name(t->coll), t->count,
                         call->cand->name, (unsigned long long)t->seq, seen);
    else
        st = braid_error(st, "%s (here: %s of %zu elements (%s), call #%llu)",
                         verdict, braid_coll_name(t->coll), t->count,
                         call->cand->name, (unsigned long long)t->seq);
    return braid_call_complete(comm, call, st);
}
