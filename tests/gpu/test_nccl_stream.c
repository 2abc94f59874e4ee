/* The stream-ordered API (braid/cuda.h) on CUDA device memory: copies and
 * collectives queued on one stream run in order (a chain of all-reduces
 * that feed each other, between an upload and a download on that stream),
 * every collective and the stream barrier, and the plain API after the
 * stream has been synchronised.  Without a GPU every rank prints why and
 * exits 77 (skipped).
 *   braidrun -n N test_nccl_stream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>
#include <braid/cuda.h>

#include "gpu_common.h"
#include "mp_common.h"

#define PROG  "test_nccl_stream"
#define COUNT 4096
#define CHAIN 5

static int  rank, size;
static long checks, failures;

static void check(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL rank %d: %s\n", rank, what);
    }
}

static void must(braid_status_t st, const char *what)
{
    if (st != BRAID_OK)
        mp_fatal(PROG, rank, st, "%s", what);
}

int main(void)
{
    const char *step = "start";
    gpu_open_or_skip(PROG);
    mp_watchdog(PROG, 240, &step);
    braid_comm_t *comm;
    must(braid_init(&comm), "braid_init");
    rank              = braid_comm_rank(comm);
    size              = braid_comm_size(comm);
    cudaStream_t s    = gpu_stream();
    float       *host = malloc(sizeof(float) * COUNT * (size_t)size);
    float       *dev  = gpu_alloc(sizeof(float) * COUNT * (size_t)size);
    float       *dev2 = gpu_alloc(sizeof(float) * COUNT * (size_t)size);

    /* 1. upload, CHAIN all-reduces each summing the last, download: all on
     * the stream, nothing waited for until the end. */
    step = "chain";
    for (int j = 0; j < COUNT; j++)
        host[j] = (float)(rank + 1);
    gpu_copy_async(dev, host, sizeof(float) * COUNT, 1, s);
    for (int k = 0; k < CHAIN; k++)
        must(braid_allreduce_cuda(dev, dev, COUNT, BRAID_F32, BRAID_SUM, comm,
                                  s),
             "allreduce_cuda");
    gpu_copy_async(host, dev, sizeof(float) * COUNT, 2, s);
    check(gpu_sync(s) == 0, "stream synchronises");
    double want = size * (size + 1) / 2.0 * pow(size, CHAIN - 1);
    int    bad  = 0;
    for (int j = 0; j < COUNT; j++)
        bad += host[j] != (float)want;
    check(bad == 0, "chained all-reduces ran in stream order");

    /* 2. the other collectives, each checked after its stream is done. */
    step = "allgather";
    for (int j = 0; j < COUNT; j++)
        host[j] = (float)(rank * 1000 + j % 7);
    gpu_put(dev, host, sizeof(float) * COUNT);
    must(braid_allgather_cuda(dev, dev2, COUNT, BRAID_F32, comm, s),
         "allgather_cuda");
    check(gpu_sync(s) == 0, "sync");
    gpu_get(host, dev2, sizeof(float) * COUNT * (size_t)size);
    bad = 0;
    for (int r = 0; r < size; r++)
        for (int j = 0; j < COUNT; j++)
            bad += host[(size_t)r * COUNT + (size_t)j] !=
                   (float)(r * 1000 + j % 7);
    check(bad == 0, "allgather_cuda");

    step = "reduce_scatter";
    for (int j = 0; j < COUNT * size; j++)
        host[j] = (float)(j % 5);
    gpu_put(dev, host, sizeof(float) * COUNT * (size_t)size);
    must(braid_reduce_scatter_cuda(dev, dev2, COUNT, BRAID_F32, BRAID_MAX,
                                   comm, s),
         "reduce_scatter_cuda");
    check(gpu_sync(s) == 0, "sync");
    gpu_get(host, dev2, sizeof(float) * COUNT);
    bad = 0;
    for (int j = 0; j < COUNT; j++)
        bad += host[j] != (float)(((size_t)rank * COUNT + (size_t)j) % 5);
    check(bad == 0, "reduce_scatter_cuda");

    step = "broadcast";
    for (int j = 0; j < COUNT; j++)
        host[j] = rank == size - 1 ? (float)j : -1.0f;
    gpu_put(dev, host, sizeof(float) * COUNT);
    must(braid_broadcast_cuda(dev, COUNT, BRAID_F32, size - 1, comm, s),
         "broadcast_cuda");
    must(braid_barrier_cuda(comm, s), "barrier_cuda");
    check(gpu_sync(s) == 0, "sync");
    gpu_get(host, dev, sizeof(float) * COUNT);
    bad = 0;
    for (int j = 0; j < COUNT; j++)
        bad += host[j] != (float)j;
    check(bad == 0, "broadcast_cuda from the last rank");

    /* 3. the plain API on the same memory once the stream is done. */
    step = "plain";
    must(braid_allreduce(dev, dev2, COUNT, BRAID_F32, BRAID_MIN, comm),
         "plain allreduce");
    gpu_get(host, dev2, sizeof(float) * COUNT);
    bad = 0;
    for (int j = 0; j < COUNT; j++)
        bad += host[j] != (float)j;
    check(bad == 0, "plain all-reduce after stream-ordered calls");

    long total = 0;
    must(braid_allreduce(&failures, &total, 1, BRAID_I64, BRAID_SUM, comm),
         "allreduce of the failures");
    if (rank == 0)
        printf("%s: %d ranks, %ld checks per rank, %ld failed in all\n", PROG,
               size, checks, total);
    cm_free(dev);
    cm_free(dev2);
    free(host);
    mp_watchdog(PROG, 0, &step);
    return total != 0 || braid_finalize(comm) != BRAID_OK;
}
