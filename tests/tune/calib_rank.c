/* One rank of the calibration tests (test_calib.sh): creates the world
 * communicator, checks that every rank feeds the cost model the same
 * figures, and prints them (rank 0) so that runs can be compared.
 *
 *   calib_rank [--split] [--mismatch] [--fail]
 *     --split     also a communicator of the even ranks: its own shape,
 *                 its own figures, the same on each of its ranks
 *     --mismatch  rank 1 sets BRAID_CALIBRATE=0 and the others not: init
 *                 must fail everywhere with BRAID_ERR_MISMATCH
 *     --fail      init is expected to fail: exit 0 when it does (after
 *                 printing why), so that braidrun lets every rank print
 * Output (rank 0): "why: <where the figures came from>", then
 * "figures: <every transport's four figures, stage, reduction, ...>",
 * "out: ..." per transport with curves, and "msg: <name> <msg_us>
 * <put_msg_us> ..." (what one more message in a stage costs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/calib.h"
#include "comm/comm.h"

#define MAX_FIG 64

/* The figures the selector was given, in a fixed order. */
static int figures(const braid_comm_t *c, double *f)
{
    int n = 0;
    for (int i = 0; i < c->ntls && n + 4 <= MAX_FIG - 2; i++) {
        f[n++] = c->tls[i].link.alpha_us;
        f[n++] = c->tls[i].link.beta_gbps;
        f[n++] = c->tls[i].link.put_alpha_us;
        f[n++] = c->tls[i].link.put_beta_gbps;
    }
    f[n++] = c->sel.stage_us;
    f[n++] = c->sel.reduce_gbps;
    /* The out-of-cache points the estimates interpolate toward. */
    for (int b = 0; b < c->sel.nbw && n + 10 <= MAX_FIG; b++) {
        const braid_bw_curve_t *k[4] = {&c->sel.bw[b].sr, &c->sel.bw[b].put,
                                        &c->sel.bw[b].get, &c->sel.bw[b].mget};
        for (int j = 0; j < 4; j++) {
            f[n++] = k[j]->out_gbps;
            f[n++] = k[j]->out_ws;
        }
        /* reads of braid_mem_alloc's memory: latency, in-cache figure */
        f[n++] = c->sel.bw[b].mget_alpha_us;
        f[n++] = c->sel.bw[b].mget_beta_gbps;
    }
    /* What one more message in a stage costs, each path. */
    for (int i = 0; i < c->ntls && n + 2 <= MAX_FIG; i++) {
        f[n++] = c->tls[i].link.msg_us;
        f[n++] = c->tls[i].link.put_msg_us;
    }
    return n;
}

/* 0 when every rank of c has the same figures (bitwise); prints them on
 * c's rank 0 after label. */
static int check_same(braid_comm_t *c, const char *label)
{
    double  f[MAX_FIG] = {0};
    int     n          = figures(c, f);
    double *all        = calloc((size_t)c->size * MAX_FIG, sizeof(double));
    if (all == NULL)
        return 1;
    braid_status_t st  = braid_allgather(f, all, MAX_FIG, BRAID_F64, c);
    int            bad = st != BRAID_OK;
    for (int r = 0; !bad && r < c->size; r++)
        if (memcmp(all + (size_t)r * MAX_FIG, f, sizeof(f)) != 0) {
            fprintf(stderr,
                    "calib_rank: %s: rank %d's figures differ from "
                    "rank %d's\n",
                    label, r, c->rank);
            bad = 1;
        }
    free(all);
    if (c->rank == 0) {
        char why[1536];
        braid_calib_describe(c, why, sizeof(why));
        printf("%s why: %s\n%s figures:", label, why, label);
        for (int i = 0; i < c->ntls; i++)
            printf(" %s", c->tls[i].ops->name);
        for (int i = 0; i < n; i++)
            printf(" %.17g", f[i]);
        printf("\n");
        for (int b = 0; b < c->sel.nbw; b++)
            printf("%s out: %s sr %.6g put %.6g get %.6g at %.0f mget %.6g "
                   "in %.6g\n",
                   label, c->sel.bw[b].tl->ops->name, c->sel.bw[b].sr.out_gbps,
                   c->sel.bw[b].put.out_gbps, c->sel.bw[b].get.out_gbps,
                   c->sel.bw[b].put.out_ws, c->sel.bw[b].mget.out_gbps,
                   c->sel.bw[b].mget_beta_gbps);
        printf("%s msg:", label);
        for (int i = 0; i < c->ntls; i++)
            printf(" %s %.6g %.6g", c->tls[i].ops->name,
                   c->tls[i].link.msg_us, c->tls[i].link.put_msg_us);
        printf("\n");
        fflush(stdout);
    }
    return bad;
}

int main(int argc, char **argv)
{
    int split = 0, mismatch = 0, fail = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--split"))
            split = 1;
        else if (!strcmp(argv[i], "--mismatch"))
            mismatch = 1;
        else if (!strcmp(argv[i], "--fail"))
            fail = 1;
        else {
            fprintf(stderr, "calib_rank: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    const char *rank_env = getenv("BRAID_RANK");
    if (mismatch && rank_env != NULL && atoi(rank_env) == 1)
        setenv("BRAID_CALIBRATE", "0", 1);
    braid_comm_t  *world;
    braid_status_t st = braid_init(&world);
    if (st != BRAID_OK) {
        printf("init failed: %s: %s\n", braid_status_str(st),
               braid_last_error());
        return fail ? 0 : 3;
    }
    if (fail) {
        printf("init succeeded where it should have failed\n");
        braid_finalize(world);
        return 1;
    }
    int bad = check_same(world, "world");
    if (split) {
        braid_comm_t *even = NULL;
        st = braid_comm_split(world, world->rank % 2 ? BRAID_UNDEFINED : 0,
                              world->rank, &even);
        if (st != BRAID_OK) {
            fprintf(stderr, "calib_rank: split: %s\n", braid_last_error());
            bad = 1;
        } else if (even != NULL) {
            bad |= check_same(even, "even");
            braid_finalize(even);
        }
    }
    braid_finalize(world);
    return bad;
}
