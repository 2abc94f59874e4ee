/* Collectives on CUDA device memory through the plain API, on every rank
 * of a braidrun job (ranks share a GPU or have one each): every collective,
 * dtype and op, several counts, in place and out of place.  Each rank
 * checks its result against values it computes itself, that the send
 * buffer is untouched, and that every rank holds the same bits.  Without a
 * GPU every rank prints why and exits 77 (skipped).
 *   braidrun -n N test_nccl_colls [--quick] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

#include "gpu_common.h"
#include "mp_common.h"
#include "reference.h"

#define PROG "test_nccl_colls"

static braid_comm_t *comm;
static int           rank, size;
static long          checks, failures;
static const char   *step = "start";

/* Input element j of rank r: small integers, so that every order of
 * summation gives the same exact value in every dtype; PROD gets +-1 (u8:
 * 1 and 2, wrapping like the dtype). */
static double input(braid_dtype_t dt, braid_op_t op, int r, size_t j)
{
    int k = (int)((j * 7 + (size_t)r * 3) % 11);
    if (op == BRAID_PROD)
        return dt == BRAID_U8 ? (k % 3 == 0 ? 2 : 1) : (k % 2 ? -1 : 1);
    return dt == BRAID_U8 ? k : k - 5;
}

static double expected(braid_dtype_t dt, braid_op_t op, size_t j)
{
    double acc = input(dt, op, 0, j);
    for (int r = 1; r < size; r++) {
        double v = input(dt, op, r, j);
        acc      = op == BRAID_PROD  ? acc * v
                   : op == BRAID_MIN ? fmin(acc, v)
                   : op == BRAID_MAX ? fmax(acc, v)
                                     : acc + v;
    }
    if (ref_is_float(dt))
        return ref_round_f(dt, op == BRAID_AVG ? acc / size : acc);
    int64_t i = (int64_t)acc;
    if (op == BRAID_AVG)
        i /= size; /* truncates toward zero */
    return (double)ref_wrap_i(dt, i);
}

static void store(braid_dtype_t dt, void *buf, size_t i, double v)
{
    if (ref_is_float(dt))
        ref_store_f(dt, buf, i, v);
    else
        ref_store_i(dt, buf, i, (int64_t)v);
}

/* NCCL's float AVG multiplies by 1/n before it sums (its own rounding);
 * everything else is exact. */
static int same(braid_dtype_t dt, braid_op_t op, const void *buf, size_t i,
                double want)
{
    if (!ref_is_float(dt))
        return (double)ref_load_i(dt, buf, i) == want;
    double got = ref_load_f(dt, buf, i);
    if (op == BRAID_AVG)
        return fabs(got - want) <=
               (dt == BRAID_F16 || dt == BRAID_BF16 ? 0x1p-6 : 1e-6) *
                   fmax(1, fabs(want));
    return got == want;
}

static void report(const char *what, braid_dtype_t dt, braid_op_t op,
                   size_t count, int inplace, long bad, size_t first)
{
    checks++;
    if (bad == 0)
        return;
    failures++;
    fprintf(stderr,
            "FAIL rank %d: %s %s %s count %zu %s: %ld wrong, first "
            "at %zu\n",
            rank, what, ref_name(dt), ref_op_name(op), count,
            inplace ? "in place" : "out of place", bad, first);
}

/* Every rank must hold the same bits. */
static void same_everywhere(const void *buf, size_t len, const char *what)
{
    uint64_t h        = ref_hash(REF_HASH_INIT, buf, len),
             *all     = calloc((size_t)size, 8);
    braid_status_t st = braid_allgather(&h, all, 1, BRAID_I64, comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "allgather of result hashes");
    int differ = 0;
    for (int r = 0; r < size; r++)
        differ |= all[r] != all[0];
    checks++;
    if (differ) {
        failures++;
        fprintf(stderr, "FAIL rank %d: %s: results differ between ranks\n",
                rank, what);
    }
    free(all);
}

/* One call: fill on the host, copy over, run, copy back, check. */
static void run_one(braid_coll_t coll, braid_dtype_t dt, braid_op_t op,
                    size_t count, int inplace, int root, unsigned char *hs,
                    unsigned char *hr, unsigned char *ds, unsigned char *dr)
{
    size_t sz = ref_size(dt), n = (size_t)size, blk = count * sz;
    size_t slen = coll == BRAID_COLL_REDUCE_SCATTER ? n * blk : blk;
    size_t rlen = coll == BRAID_COLL_ALLGATHER ? n * blk : blk;
    memset(hr, 0xEE, rlen);
    for (size_t j = 0; j < slen / sz; j++)
        store(dt, hs, j, input(dt, op, rank, j));
    if (coll == BRAID_COLL_BROADCAST)
        for (size_t j = 0; j < count; j++)
            store(dt, hr, j, rank == root ? input(dt, op, root, j) : 0);
    gpu_put(ds, hs, slen);
    gpu_put(dr, hr, rlen);

    const void *send = ds;
    void       *recv = dr;
    if (inplace && coll == BRAID_COLL_ALLREDUCE) {
        gpu_put(dr, hs, blk);
        send = dr;
    } else if (inplace && coll == BRAID_COLL_ALLGATHER) {
        gpu_put(dr + (size_t)rank * blk, hs, blk);
        send = dr + (size_t)rank * blk;
    } else if (inplace && coll == BRAID_COLL_REDUCE_SCATTER) {
        recv = ds + (size_t)rank * blk;
    }
    braid_status_t st;
    switch (coll) {
    case BRAID_COLL_ALLREDUCE:
        st = braid_allreduce(send, recv, count, dt, op, comm);
        break;
    case BRAID_COLL_REDUCE_SCATTER:
        st = braid_reduce_scatter(send, recv, count, dt, op, comm);
        break;
    case BRAID_COLL_ALLGATHER:
        st = braid_allgather(send, recv, count, dt, comm);
        break;
    default: st = braid_broadcast(dr, count, dt, root, comm); break;
    }
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "%s %s %s count %zu", braid_coll_name(coll),
                 ref_name(dt), ref_op_name(op), count);

    /* The result, wherever the call put it. */
    unsigned char *res = hr;
    gpu_get(hr, recv, coll == BRAID_COLL_ALLGATHER ? rlen : blk);
    long   bad   = 0;
    size_t first = 0;
    for (size_t j = 0; j < (coll == BRAID_COLL_ALLGATHER ? n * count : count);
         j++) {
        double want;
        switch (coll) {
        case BRAID_COLL_ALLREDUCE: want = expected(dt, op, j); break;
        case BRAID_COLL_REDUCE_SCATTER:
            want = expected(dt, op, (size_t)rank * count + j);
            break;
        case BRAID_COLL_ALLGATHER:
            want = input(dt, op, (int)(j / count), j % count);
            break;
        default: want = input(dt, op, root, j); break;
        }
        if (!same(dt,
                  coll == BRAID_COLL_ALLREDUCE ||
                          coll == BRAID_COLL_REDUCE_SCATTER
                      ? op
                      : BRAID_SUM,
                  res, j, want) &&
            bad++ == 0)
            first = j;
    }
    report(braid_coll_name(coll), dt, op, count, inplace, bad, first);
    same_everywhere(res, coll == BRAID_COLL_ALLGATHER ? rlen : blk,
                    braid_coll_name(coll));

    if (!inplace && coll != BRAID_COLL_BROADCAST) {
        /* The send buffer is input only. */
        unsigned char *back = malloc(slen ? slen : 1);
        gpu_get(back, ds, slen);
        report("send buffer untouched", dt, op, count, inplace,
               memcmp(back, hs, slen) != 0, 0);
        free(back);
    }
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    gpu_open_or_skip(PROG);
    mp_watchdog(PROG, 280, &step);
    braid_status_t st = braid_init(&comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, -1, st, "braid_init");
    rank = braid_comm_rank(comm);
    size = braid_comm_size(comm);

    const size_t   counts[] = {1, 3, 1000, 65537, (1u << 20) + 3};
    int            ncounts  = quick ? 3 : 5;
    size_t         cap      = ((1u << 20) + 3) * 8 * (size_t)size;
    unsigned char *hs = malloc(cap), *hr = malloc(cap);
    unsigned char *ds = gpu_alloc(cap), *dr = gpu_alloc(cap);
    if (!hs || !hr)
        mp_fatal(PROG, rank, BRAID_ERR_NO_MEMORY, "host buffers");

    for (int coll = 0; coll < BRAID_COLL_BARRIER; coll++)
        for (int dt = 0; dt < BRAID_DTYPE_COUNT; dt++)
            for (int op = 0; op < BRAID_OP_COUNT; op++) {
                int reduces = coll == BRAID_COLL_ALLREDUCE ||
                              coll == BRAID_COLL_REDUCE_SCATTER;
                if (!reduces && op != BRAID_SUM)
                    continue;
                for (int k = 0; k < ncounts; k++) {
                    /* The largest count on all-reduce f32 only. */
                    if (k == 4 &&
                        (coll != BRAID_COLL_ALLREDUCE || dt != BRAID_F32))
                        continue;
                    for (int inplace = 0; inplace < 2; inplace++) {
                        if (coll == BRAID_COLL_BROADCAST && !inplace)
                            continue;
                        step = braid_coll_name((braid_coll_t)coll);
                        run_one((braid_coll_t)coll, (braid_dtype_t)dt,
                                (braid_op_t)op, counts[k], inplace,
                                (k + dt) % size, hs, hr, ds, dr);
                    }
                }
            }
    step = "barrier";
    if ((st = braid_barrier(comm)) != BRAID_OK)
        mp_fatal(PROG, rank, st, "barrier");

    /* A communicator from braid_comm_split gets its own NCCL communicator. */
    braid_comm_t *half = NULL;
    step               = "comm_split";
    if ((st = braid_comm_split(comm, rank % 2, rank, &half)) != BRAID_OK)
        mp_fatal(PROG, rank, st, "comm_split");
    braid_comm_t *world      = comm;
    int           world_rank = rank, world_size = size;
    comm = half;
    rank = braid_comm_rank(half);
    size = braid_comm_size(half);
    run_one(BRAID_COLL_ALLREDUCE, BRAID_F32, BRAID_SUM, 1000, 0, 0, hs, hr, ds,
            dr);
    run_one(BRAID_COLL_ALLGATHER, BRAID_I32, BRAID_SUM, 77, 1, 0, hs, hr, ds,
            dr);
    if ((st = braid_finalize(half)) != BRAID_OK)
        mp_fatal(PROG, rank, st, "finalize of the split communicator");
    comm = world;
    rank = world_rank;
    size = world_size;

    long total = 0;
    if ((st = braid_allreduce(&failures, &total, 1, BRAID_I64, BRAID_SUM,
                              comm)) != BRAID_OK)
        mp_fatal(PROG, rank, st, "allreduce of the failures");
    if (rank == 0)
        printf("%s: %d ranks, %ld checks per rank, %ld failed in all\n", PROG,
               size, checks, total);
    cm_free(ds);
    cm_free(dr);
    free(hs);
    free(hr);
    mp_watchdog(PROG, 0, &step);
    st = braid_finalize(comm);
    return total != 0 || st != BRAID_OK;
}
