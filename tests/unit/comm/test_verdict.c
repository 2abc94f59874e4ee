/* Unit tests of the failure inquiry's verdict (core/comm/verdict.c) and of
 * call signatures and progress records (core/comm/sig.c): every situation
 * the verdict must tell apart, fed as the reports ranks would send. */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "comm/verdict.h"

#define N 4

static braid_sig_t allreduce(size_t count)
{
    return braid_sig_make(BRAID_COLL_ALLREDUCE, count, BRAID_F32, BRAID_SUM,
                          0);
}

/* Rank r entered calls 0..entered-1 (all with sig) and completed
 * 0..completed-1. */
static void progress(braid_rank_state_t *rs, uint64_t entered,
                     uint64_t completed, braid_sig_t sig)
{
    braid_progress_t p;
    memset(&p, 0, sizeof(p));
    for (uint64_t s = 0; s < entered; s++)
        braid_progress_enter(&p, s, &sig);
    if (completed > 0)
        braid_progress_done(&p, completed - 1);
    braid_progress_read(&rs->prog, &p);
    rs->known = 1;
}

static void setup(braid_rank_state_t *rs)
{
    memset(rs, 0, sizeof(*rs) * N);
    for (int r = 0; r < N; r++) {
        rs[r].state = BRAID_RS_ANSWERED;
        snprintf(rs[r].desc, sizeof(rs[r].desc), "rank %d (host h, pid %d)", r,
                 100 + r);
    }
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *api(int a)
{
    return a == 9 ? "braid_finalize" : "braid_allreduce";
}

static void test_signatures(void)
{
    braid_sig_t a = allreduce(16384), b = allreduce(8192);
    char        d[96];
    braid_sig_describe(d, sizeof(d), &a);
    CHECK(strcmp(d, "allreduce(count 16384, f32, sum)") == 0, "%s", d);
    CHECK(!braid_sig_equal(&a, &b), "counts differ");
    CHECK(braid_sig_hash32(&a, 7) != braid_sig_hash32(&b, 7), "hash count");
    CHECK(braid_sig_hash32(&a, 7) != braid_sig_hash32(&a, 8), "hash seq");
    braid_sig_t m =
        braid_sig_make(BRAID_COLL_ALLREDUCE, 16384, BRAID_F32, BRAID_MAX, 0);
    braid_sig_t i =
        braid_sig_make(BRAID_COLL_ALLREDUCE, 16384, BRAID_I32, BRAID_SUM, 0);
    CHECK(braid_sig_hash32(&a, 7) != braid_sig_hash32(&m, 7) &&
              braid_sig_hash32(&a, 7) != braid_sig_hash32(&i, 7),
          "hash op, dtype");
    CHECK(braid_sig_hash32(&a, 7) == braid_sig_hash32(&a, 7), "hash stable");
    /* Fields a collective ignores are ignored. */
    braid_sig_t x =
        braid_sig_make(BRAID_COLL_BARRIER, 0, BRAID_F64, BRAID_MAX, 3);
    braid_sig_t y =
        braid_sig_make(BRAID_COLL_BARRIER, 0, BRAID_U8, BRAID_SUM, 0);
    CHECK(braid_sig_equal(&x, &y), "barrier ignores dtype, op, root");
    braid_sig_t bc =
        braid_sig_make(BRAID_COLL_BROADCAST, 4, BRAID_U8, BRAID_PROD, 2);
    braid_sig_t back = braid_sig_unpack(bc.count, braid_sig_pack(&bc));
    CHECK(braid_sig_equal(&bc, &back) && back.root == 2 && back.op == 0,
          "pack/unpack broadcast");

    /* The record keeps the last BRAID_HIST calls. */
    braid_progress_t      p;
    braid_progress_snap_t s;
    braid_sig_t           got;
    memset(&p, 0, sizeof(p));
    for (uint64_t q = 0; q < 20; q++) {
        braid_sig_t sq = allreduce(q);
        braid_progress_enter(&p, q, &sq);
    }
    braid_progress_read(&s, &p);
    CHECK(s.entered == 20, "entered %llu", (unsigned long long)s.entered);
    CHECK(braid_progress_sig(&got, &s, 19) && got.count == 19, "last call");
    CHECK(braid_progress_sig(&got, &s, 12) && got.count == 12, "oldest kept");
    CHECK(!braid_progress_sig(&got, &s, 11), "call 11 is forgotten");
}

/* A stopped rank: it does not answer, its board says it never entered the
 * failed call; the others wait in it. */
static void test_stopped(void)
{
    braid_rank_state_t rs[N];
    braid_verdict_t    v;
    setup(rs);
    for (int r = 0; r < N; r++)
        progress(&rs[r], r == 2 ? 5 : 6, 5, allreduce(64));
    rs[2].state = BRAID_RS_SILENT;
    rs[2].proc  = 'T';
    braid_verdict_judge(&v, N, rs, api);
    CHECK(v.status == BRAID_ERR_TIMEOUT && v.call == 5 && v.culprit == 2,
          "status %d call %llu culprit %d", v.status,
          (unsigned long long)v.call, v.culprit);
    CHECK(strstr(v.text, "call #5 allreduce(count 64, f32, sum) did not "
                         "complete: rank 2 (host h, pid 102) does not answer "
                         "(process stopped; between calls, after #4); ranks "
                         "0,1,3 wait in it") != NULL,
          "%s", v.text);
}

/* A lost rank, and survivors that disagree on how far they got: the failed
 * call is the first one a survivor has not completed. */
static void test_lost_agreement(void)
{
    braid_rank_state_t rs[N];
    braid_verdict_t    v;
    setup(rs);
    progress(&rs[0], 8, 8, allreduce(64)); /* finished #7, in nothing */
    progress(&rs[1], 8, 7, allreduce(64)); /* stuck in #7 */
    progress(&rs[2], 9, 8, allreduce(64)); /* stuck in #8 */
    progress(&rs[3], 8, 7, allreduce(64));
    rs[3].state = BRAID_RS_LOST;
    rs[3].known = 0;
    braid_verdict_judge(&v, N, rs, api);
    CHECK(v.status == BRAID_ERR_PEER && v.call == 7 && v.culprit == 3,
          "status %d call %llu culprit %d", v.status,
          (unsigned long long)v.call, v.culprit);
    CHECK(starts(v.text, "call #7 allreduce(count 64, f32, sum) failed: rank "
                         "3 (host h, pid 103) was lost;"),
          "%s", v.text);
    CHECK(strstr(v.text, "rank 1 waits in it") != NULL, "%s", v.text);
}

/* Count mismatch: the majority's call and the odd one are both named. */
static void test_mismatch(void)
{
    braid_rank_state_t rs[N];
    braid_verdict_t    v;
    setup(rs);
    for (int r = 0; r < N; r++)
        progress(&rs[r], 4, 3, allreduce(r == 1 ? 8192 : 16384));
    /* Only call #3 differs: the earlier ones were the same everywhere. */
    braid_progress_t p;
    memset(&p, 0, sizeof(p));
    for (uint64_t s = 0; s < 4; s++) {
        braid_sig_t sg = allreduce(s < 3 ? 16384 : 8192);
        braid_progress_enter(&p, s, &sg);
    }
    braid_progress_done(&p, 2);
    braid_progress_read(&rs[1].prog, &p);
    braid_verdict_judge(&v, N, rs, api);
    CHECK(v.status == BRAID_ERR_MISMATCH && v.call == 3 && v.culprit == 1,
          "status %d call %llu culprit %d", v.status,
          (unsigned long long)v.call, v.culprit);
    CHECK(strcmp(v.text, "call #3 differs between ranks: rank 0 (host h, pid "
                         "100) calls allreduce(count 16384, f32, sum), rank 1 "
                         "(host h, pid 101) calls allreduce(count 8192, f32, "
                         "sum)") == 0,
          "%s", v.text);
}

/* A rank that answers from braid_finalize: it has not entered the call. */
static void test_behind(void)
{
    braid_rank_state_t rs[N];
    braid_verdict_t    v;
    setup(rs);
    for (int r = 0; r < N; r++)
        progress(&rs[r], r == 3 ? 10 : 11, 10, allreduce(1));
    rs[3].api = 9;
    braid_verdict_judge(&v, N, rs, api);
    CHECK(v.status == BRAID_ERR_TIMEOUT && v.call == 10 && v.culprit == 3,
          "status %d culprit %d", v.status, v.culprit);
    CHECK(strstr(v.text,
                 "rank 3 (host h, pid 103) has not entered it "
                 "(between calls, after #9; inside braid_finalize)") != NULL,
          "%s", v.text);
}

/* Everybody in the call, nobody missing: the rank that failed says how. */
static void test_stall(void)
{
    braid_rank_state_t rs[N];
    braid_verdict_t    v;
    setup(rs);
    for (int r = 0; r < N; r++)
        progress(&rs[r], 3, 2, allreduce(5));
    rs[2].status = BRAID_ERR_TRANSPORT;
    snprintf(rs[2].text, sizeof(rs[2].text), "ucx: broken");
    braid_verdict_judge(&v, N, rs, api);
    CHECK(v.status == BRAID_ERR_TRANSPORT && v.culprit == -1 && v.call == 2,
          "status %d culprit %d", v.status, v.culprit);
    CHECK(strstr(v.text, "every rank entered it: rank 2: ucx: broken"), "%s",
          v.text);
}

/* Rank 0 gone and only this rank's view: still a call number. */
static void test_alone(void)
{
    braid_rank_state_t rs[N];
    braid_verdict_t    v;
    setup(rs);
    for (int r = 0; r < N; r++)
        rs[r].state = BRAID_RS_UNKNOWN;
    rs[0].state = BRAID_RS_LOST;
    rs[1].state = BRAID_RS_ANSWERED;
    progress(&rs[1], 6, 5, allreduce(2));
    braid_verdict_judge(&v, N, rs, api);
    CHECK(v.status == BRAID_ERR_PEER && v.call == 5 && v.culprit == 0,
          "status %d call %llu culprit %d", v.status,
          (unsigned long long)v.call, v.culprit);
    CHECK(starts(v.text, "call #5 allreduce(count 2, f32, sum) failed: rank 0 "
                         "(host h, pid 100) was lost"),
          "%s", v.text);
}

int main(void)
{
    test_signatures();
    test_stopped();
    test_lost_agreement();
    test_mismatch();
    test_behind();
    test_stall();
    test_alone();
    return check_summary("verdict");
}
