/* mpi-allreduce-bench: Open MPI's MPI_Allreduce measured exactly as
 * braid-bench measures braid (f32 sum, out of place, per-iteration time = max
 * over ranks, median over iterations), so the two can be compared as ratios
 * in one session.  Baseline only: not part of braid.
 *   mpirun -np 2 mpi-allreduce-bench [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *s)
{
    char  *end;
    size_t v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
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
    int    factor = 2, iters = 20, warmup = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "-f")) factor = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
    }
    if (factor < 2 || iters < 1 || minb < 4 || maxb < minb) {
        fprintf(stderr, "usage: mpi-allreduce-bench [-b min] [-e max] [-f factor>=2] [-n iters] [-w warmup]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    float  *send  = malloc(maxb), *recv = malloc(maxb);
    double *times = malloc(sizeof(double) * (size_t)iters);
    memset(send, 0, maxb);
    if (rank == 0)
        printf("# MPI_Allreduce f32 sum, %d ranks, out of place, median of %d\n"
               "%12s %12s %12s %10s %10s\n", size, iters, "size", "count",
               "time(us)", "algbw", "busbw");
    for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
        int count = (int)(bytes / sizeof(float));
        for (int i = 0; i < warmup; i++)
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < iters; i++) {
            double t0 = MPI_Wtime();
            MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double dt = MPI_Wtime() - t0, mx;
            MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            times[i] = mx * 1e6;
        }
        qsort(times, (size_t)iters, sizeof(double), cmp_double);
        double us = times[iters / 2], algbw = (double)bytes / us / 1e3;
        if (rank == 0)
            printf("%12zu %12d %12.2f %10.3f %10.3f\n", bytes, count, us, algbw,
                   algbw * 2.0 * (size - 1) / size);
    }
    free(send);
    free(recv);
    free(times);
    MPI_Finalize();
    return 0;
}
