/* NCCL's own all-reduce time on this machine, measured the way braid-bench
 * measures braid's (a barrier, one call, its completion; the slowest rank;
 * the median over iterations), so that the two tables compare directly.
 * NCCL is opened at run time like the plugin opens it; braid only carries
 * the unique id and the barriers, on host memory.
 *   braidrun -n N nccl_bench [-b 8] [-e 256M] [-f 4] [-n 20] [-w 5] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

#include "../../plugins/backends/nccl/api.h"
#include "gpu_common.h"
#include "mp_common.h"

#define PROG "nccl_bench"

static size_t parse_size(const char *s)
{
    char  *end;
    size_t v = strtoull(s, &end, 10);
    return *end == 'K'   ? v << 10
           : *end == 'M' ? v << 20
           : *end == 'G' ? v << 30
                         : v;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t minb = 8, maxb = 256u << 20, factor = 4;
    int    iters = 20, warmup = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b"))
            minb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e"))
            maxb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-f"))
            factor = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-n"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-w"))
            warmup = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "%s: unknown option %s\n", PROG, argv[i]);
            return 2;
        }
    }
    if (iters < 1 || iters > 100000 || factor < 2) {
        fprintf(stderr, "%s: bad -n or -f\n", PROG);
        return 2;
    }
    gpu_open_or_skip(PROG);
    const char *lib  = getenv("BRAID_NCCL_LIBRARY");
    void       *nccl = dlopen(lib && *lib ? lib : "libnccl.so.2", RTLD_NOW);
    if (nccl == NULL) {
        printf("SKIP: %s: libnccl.so.2 not found (%s)\n", PROG, dlerror());
        return GPU_SKIP;
    }
    ncclResult_t (*get_id)(ncclUniqueId *) =
        (ncclResult_t(*)(ncclUniqueId *))dlsym(nccl, "ncclGetUniqueId");
    ncclResult_t (*init)(ncclComm_t *, int, ncclUniqueId, int) =
        (ncclResult_t(*)(ncclComm_t *, int, ncclUniqueId, int))dlsym(
            nccl, "ncclCommInitRank");
    ncclResult_t (*allreduce)(const void *, void *, size_t, ncclDataType_t,
                              ncclRedOp_t, ncclComm_t, cudaStream_t) =
        (ncclResult_t(*)(const void *, void *, size_t, ncclDataType_t,
                         ncclRedOp_t, ncclComm_t,
                         cudaStream_t))dlsym(nccl, "ncclAllReduce");
    ncclResult_t (*destroy)(ncclComm_t) =
        (ncclResult_t(*)(ncclComm_t))dlsym(nccl, "ncclCommDestroy");
    if (!get_id || !init || !allreduce || !destroy) {
        fprintf(stderr, "%s: libnccl lacks a function\n", PROG);
        return 1;
    }

    braid_comm_t  *comm;
    braid_status_t st = braid_init(&comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, -1, st, "braid_init");
    int          rank = braid_comm_rank(comm), size = braid_comm_size(comm);
    ncclUniqueId id;
    if (rank == 0 && get_id(&id) != ncclSuccess)
        mp_fatal(PROG, rank, BRAID_ERR_INTERNAL, "ncclGetUniqueId");
    if ((st = braid_broadcast(&id, sizeof(id), BRAID_U8, 0, comm)) != BRAID_OK)
        mp_fatal(PROG, rank, st, "broadcast of the NCCL id");
    ncclComm_t   nc;
    ncclResult_t res = init(&nc, size, id, rank);
    if (res != ncclSuccess)
        mp_fatal(PROG, rank, BRAID_ERR_INTERNAL, "ncclCommInitRank: error %d",
                 (int)res);

    cudaStream_t s    = gpu_stream();
    float       *send = gpu_alloc(maxb), *recv = gpu_alloc(maxb);
    double      *t    = malloc(sizeof(double) * (size_t)iters);
    double      *tmax = malloc(sizeof(double) * (size_t)iters);
    if (rank == 0) {
        printf(
            "# NCCL's own all-reduce (f32 sum, out of place), %d ranks; time "
            "= median over %d iterations of the slowest rank\n",
            size, iters);
        printf("# %10s %12s %11s %8s %8s\n", "size(B)", "count", "time(us)",
               "algbw", "busbw");
    }
    for (size_t bytes = minb; bytes <= maxb; bytes *= factor) {
        size_t count = bytes / 4;
        for (int i = 0; i < warmup + iters; i++) {
            if ((st = braid_barrier(comm)) != BRAID_OK)
                mp_fatal(PROG, rank, st, "barrier");
            double t0 = mp_now();
            if (allreduce(send, recv, count, ncclFloat32, ncclSum, nc, s) !=
                    ncclSuccess ||
                gpu_sync(s) != 0)
                mp_fatal(PROG, rank, BRAID_ERR_INTERNAL, "ncclAllReduce");
            if (i >= warmup)
                t[i - warmup] = mp_now() - t0;
        }
        if ((st = braid_allreduce(t, tmax, (size_t)iters, BRAID_F64, BRAID_MAX,
                                  comm)) != BRAID_OK)
            mp_fatal(PROG, rank, st, "allreduce of the times");
        qsort(tmax, (size_t)iters, sizeof(double), cmp);
        double us =
            (iters % 2 ? tmax[iters / 2]
                       : 0.5 * (tmax[iters / 2 - 1] + tmax[iters / 2])) *
            1e6;
        double algbw = (double)(count * 4) / us / 1e3;
        if (rank == 0)
            printf("  %10zu %12zu %11.2f %8.3f %8.3f\n", count * 4, count, us,
                   algbw, algbw * 2.0 * (size - 1) / size);
        fflush(stdout);
        if (bytes > maxb / factor)
            break;
    }
    destroy(nc);
    cm_free(send);
    cm_free(recv);
    free(t);
    free(tmax);
    return braid_finalize(comm) != BRAID_OK;
}
