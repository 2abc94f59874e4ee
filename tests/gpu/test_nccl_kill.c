/* A rank dies in the middle of collectives on CUDA device memory: every
 * other rank must get an error (a lost peer) within BRAID_TIMEOUT, never
 * hang.  The last rank kills itself (SIGKILL) after some calls; each
 * survivor prints "OK: ..." with the status, the time it took and the
 * message, or "BAD: ..." -- tests/gpu/run.sh counts them.  --stream does the
 * same with braid_allreduce_cuda and a cudaStreamSynchronize per call.
 *   braidrun -n N --grace 60 test_nccl_kill [--stream] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>
#include <braid/cuda.h>

#include "gpu_common.h"
#include "mp_common.h"

#define PROG  "test_nccl_kill"
#define COUNT (1 << 20)

int main(int argc, char **argv)
{
    int         stream_mode = argc > 1 && strcmp(argv[1], "--stream") == 0;
    const char *env         = getenv("BRAID_TIMEOUT");
    double      timeout     = env ? atof(env) : 30;
    gpu_open_or_skip(PROG);
    braid_comm_t  *comm;
    braid_status_t st = braid_init(&comm);
    if (st != BRAID_OK)
        mp_fatal(PROG, -1, st, "braid_init");
    int rank = braid_comm_rank(comm), size = braid_comm_size(comm);
    if (size < 2) {
        printf("SKIP: %s needs 2 ranks or more\n", PROG);
        return GPU_SKIP;
    }
    float       *buf     = gpu_alloc(sizeof(float) * COUNT);
    cudaStream_t s       = gpu_stream();
    double       last_ok = mp_now();
    for (int i = 0;; i++) {
        if (rank == size - 1 && i == 20) {
            fflush(stdout);
            raise(SIGKILL);
        }
        if (stream_mode) {
            st = braid_allreduce_cuda(buf, buf, COUNT, BRAID_F32, BRAID_MAX,
                                      comm, s);
            int err = st == BRAID_OK ? gpu_sync(s) : 0;
            if (st == BRAID_OK && err != 0)
                printf("rank %d: cudaStreamSynchronize returned CUDA error %d "
                       "after %.1f s; the next call says why\n",
                       rank, err, mp_now() - last_ok);
        } else {
            st = braid_allreduce(buf, buf, COUNT, BRAID_F32, BRAID_MAX, comm);
        }
        if (st != BRAID_OK)
            break;
        last_ok = mp_now();
        if (mp_now() - last_ok > 3 * timeout + 60)
            break; /* cannot happen: a call that hangs does not return */
    }
    double took = mp_now() - last_ok;
    int    ok   = (st == BRAID_ERR_PEER || st == BRAID_ERR_TIMEOUT ||
              st == BRAID_ERR_STATE) &&
             took <= timeout + 10;
    printf("rank %d: %s: %s after %.1f s (BRAID_TIMEOUT %.0f s): %s\n", rank,
           ok ? "OK" : "BAD", braid_status_str(st), took, timeout,
           braid_last_error());
    fflush(stdout);
    /* The communicator is failed; finalize must still return promptly. */
    braid_finalize(comm);
    return ok ? 0 : 1;
}
