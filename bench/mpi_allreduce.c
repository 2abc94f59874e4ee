/* mpi-allreduce-bench: Open MPI's MPI_Allreduce measured exactly as
 * braid-bench measures braid (f32 sum, out of place; per call: a barrier,
 * then the call timed alone; batch: 5 batches of -n back-to-back calls, time
 * per call; max over ranks, median over iterations or batches), so the two
 * can be compared as ratios in one session.  Baseline only: not part of
 * braid.
 *   mpirun -np 2 mpi-allreduce-bench [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5]
 *                                    [-t percall|batch] [-a 0|1]
 *                                    [-C allreduce|reduce_scatter|allgather]
 *                                    [-o FILE]
 * -C: MPI_Reduce_scatter_block or MPI_Allgather instead, size being the
 * larger buffer as in braid-bench; -a 1: fewer calls for large sizes, as
 * braid-tune (n * 256 KiB / size, at least 3); -o: also a CSV
 * "coll,nranks,size,series,time_us" with series "ompi" (bench/plot.sh,
 * bench/tune_report.py). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 5 /* as braid-bench */

static size_t parse_size(const char *s)
{
    char  *end;
    size_t v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K':
    case 'k': v <<= 10; break;
    case 'M':
    case 'm': v <<= 20; break;
    case 'G':
    case 'g': v <<= 30; break;
    default: break;
    }
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t minb = 8, maxb = 64u << 20;
    int    factor = 2, iters = 20, warmup = 5, batch = 0, bad = 0, adapt = 0;
    int    alloc_mem = 0; /* -M mpi: buffers from MPI_Alloc_mem */
    const char *coll = "allreduce", *csv = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b"))
            minb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e"))
            maxb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-f"))
            factor = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-w"))
            warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) {
            batch = !strcmp(argv[i + 1], "batch");
            bad |= !batch && strcmp(argv[i + 1], "percall");
        } else if (!strcmp(argv[i], "-a"))
            adapt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-M")) {
            alloc_mem = !strcmp(argv[i + 1], "mpi");
            bad |= !alloc_mem && strcmp(argv[i + 1], "host");
        } else if (!strcmp(argv[i], "-o"))
            csv = argv[i + 1];
        else if (!strcmp(argv[i], "-C")) {
            coll = argv[i + 1];
            bad |= strcmp(coll, "allreduce") &&
                   strcmp(coll, "reduce_scatter") && strcmp(coll, "allgather");
        } else
            bad = 1;
    }
    if (bad || factor < 2 || iters < 1 || minb < 4 || maxb < minb) {
        fprintf(
            stderr,
            "usage: mpi-allreduce-bench [-b min] [-e max] [-f factor>=2] "
            "[-n iters] [-w warmup] [-t percall|batch] [-a 0|1] [-C "
            "allreduce|reduce_scatter|allgather] [-M host|mpi] [-o csv]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* -M mpi: the library's own allocator, as braid-bench -M braid takes
     * braid's: each library with the memory it offers for its buffers. */
    float *send = NULL, *recv = NULL;
    if (alloc_mem) {
        if (MPI_Alloc_mem((MPI_Aint)maxb, MPI_INFO_NULL, &send) !=
                MPI_SUCCESS ||
            MPI_Alloc_mem((MPI_Aint)maxb, MPI_INFO_NULL, &recv) != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
    } else {
        send = malloc(maxb);
        recv = malloc(maxb);
    }
    int     nt    = batch ? BATCHES : iters;
    double *times = malloc(sizeof(double) * (size_t)nt);
    double *tmax  = malloc(sizeof(double) * (size_t)nt);
    int ar = !strcmp(coll, "allreduce"), rs = !strcmp(coll, "reduce_scatter");
    double factor_bus =
        ar ? 2.0 * (size - 1) / size : (double)(size - 1) / size;
    FILE *out = NULL;
    /* Both buffers written with real values before the first call, as
     * braid-bench and torch's ones() do: a buffer only ever read (here once
     * malloc + memset(0), which the compiler turns into calloc) is the
     * kernel's one zero page in every place, always in cache, and makes
     * every read of the input free. */
    for (size_t i = 0; i < maxb / sizeof(float); i++)
        send[i] = (float)(rank + 1 + (int)(i % 7));
    memset(recv, 0xEE, maxb);
    if (rank == 0 && csv != NULL) {
        if ((out = fopen(csv, "w")) == NULL) {
            fprintf(stderr, "mpi-allreduce-bench: -o %s: cannot write\n", csv);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(out, "coll,nranks,size,series,time_us\n");
    }
    if (rank == 0)
        printf("# MPI_%s f32%s, %d ranks, out of place, median of "
               "%d %s\n%12s %12s %12s %10s %10s\n",
               ar   ? "Allreduce"
               : rs ? "Reduce_scatter_block"
                    : "Allgather",
               ar || rs ? " sum" : "", size, nt,
               batch ? "batches of back-to-back calls" : "single calls",
               "size", "count", "time(us)", "algbw", "busbw");
    /* As braid-bench: the last size is maxb even off the geometric steps. */
    for (size_t bytes = minb; bytes <= maxb;
         bytes        = bytes < maxb && bytes * (size_t)factor > maxb
                            ? maxb
                            : bytes * (size_t)factor) {
        /* reduce_scatter and allgather: count per rank, size the larger
         * buffer, as braid-bench. */
        int count = (int)(bytes / sizeof(float) / (ar ? 1 : (size_t)size));
        if (count < 1)
            count = 1;
        size_t shown = (size_t)count * sizeof(float) * (ar ? 1 : (size_t)size);
        int    n     = nt;
        if (adapt && !batch) {
            double scaled = (double)iters * (256 << 10) / (double)shown;
            n             = scaled < iters ? (int)scaled : iters;
            n             = n < 3 ? 3 : n;
        }
        for (int i = 0; i < warmup + n; i++) {
            int calls = batch ? iters : 1;
            if (i >= warmup)
                MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int k = 0; k < calls; k++) {
                if (ar)
                    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD);
                else if (rs)
                    MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT,
                                             MPI_SUM, MPI_COMM_WORLD);
                else
                    MPI_Allgather(send, count, MPI_FLOAT, recv, count,
                                  MPI_FLOAT, MPI_COMM_WORLD);
                if (i < warmup)
                    break;
            }
            if (i >= warmup)
                times[i - warmup] = (MPI_Wtime() - t0) / calls * 1e6;
        }
        MPI_Allreduce(times, tmax, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        qsort(tmax, (size_t)n, sizeof(double), cmp_double);
        double us =
            n % 2 ? tmax[n / 2] : 0.5 * (tmax[n / 2 - 1] + tmax[n / 2]);
        double algbw = (double)shown / us / 1e3;
        if (rank == 0)
            printf("%12zu %12d %12.2f %10.3f %10.3f\n", shown, count, us,
                   algbw, algbw * factor_bus);
        if (out != NULL)
            fprintf(out, "%s,%d,%zu,ompi,%.3f\n", coll, size, shown, us);
        if (bytes == maxb)
            break;
    }
    if (out != NULL && fclose(out) != 0) {
        fprintf(stderr, "mpi-allreduce-bench: -o %s: cannot write\n", csv);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (alloc_mem) {
        MPI_Free_mem(send);
        MPI_Free_mem(recv);
    } else {
        free(send);
        free(recv);
    }
    free(times);
    free(tmax);
    MPI_Finalize();
    return 0;
}
