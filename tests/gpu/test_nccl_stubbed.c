/* The whole path of a device-memory call, without a GPU: the nccl plugin
 * is loaded and available through stub libraries (stub_nccl.c,
 * stub_cudart.c), and a stub driver (libcuda.so.1, on LD_LIBRARY_PATH)
 * declares one array device memory.  Then, on every rank of a braidrun job:
 *   - host buffers never reach NCCL, device buffers always do (the stub
 *     records each NCCL call), on a split communicator too;
 *   - one rank's device memory goes to NCCL as well (no host copy);
 *   - a stream-ordered call reaches NCCL with the caller's stream, and
 *     host memory on a stream is refused;
 *   - the result is the stub's (its "sum" is nranks times the input).
 * What NCCL computes on a GPU is tests/gpu/run.sh's job.
 *   braidrun -n N test_nccl_stubbed STUB_DIR */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <braid/braid.h>
#include <braid/cuda.h>

#include "../unit/check.h"

typedef struct stub_call {
    int    coll;
    size_t count;
    int    dtype, op, root;
    void  *stream;
} stub_call_t;

static struct {
    float host[256], dev_in[256], dev_out[256];
} m;

static const stub_call_t *(*last_call)(void);

/* dir NULL: by name, through the loader's search. */
static void *open_stub(const char *dir, const char *file)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir ? dir : "", file);
    void *dl = dlopen(dir ? path : file, RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL, "dlopen %s: %s", file, dlerror());
    return dl;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_nccl_stubbed STUB_DIR\n");
        return 2;
    }
    /* The driver by its name (LD_LIBRARY_PATH), as braid finds it. */
    void *drv  = open_stub(NULL, "libcuda.so.1");
    void *nccl = open_stub(argv[1], "libstub-nccl.so");
    if (drv == NULL || nccl == NULL)
        return check_summary("nccl_stubbed");
    void (*set_ranges)(const void *, size_t, const void *, size_t) =
        (void (*)(const void *, size_t, const void *, size_t))dlsym(
            drv, "stub_cuda_set_ranges");
    last_call =
        (const stub_call_t *(*)(void))dlsym(nccl, "stub_nccl_last_call");
    set_ranges(m.dev_in, sizeof(m.dev_in) + sizeof(m.dev_out), NULL, 0);

    braid_comm_t *comm;
    CHECK(braid_init(&comm) == BRAID_OK, "braid_init: %s", braid_last_error());
    if (comm == NULL)
        return check_summary("nccl_stubbed");
    int size = braid_comm_size(comm);

    /* Host memory: a host candidate, NCCL untouched. */
    for (int i = 0; i < 256; i++)
        m.host[i] = m.dev_in[i] = (float)i;
    CHECK(braid_allreduce(m.host, m.host, 256, BRAID_F32, BRAID_SUM, comm) ==
                  BRAID_OK &&
              last_call()->count == 0,
          "host all-reduce stays off NCCL: %s", braid_last_error());
    CHECK(m.host[3] == 3.0f * size, "and is right");

    /* Device memory: NCCL, with braid's arguments. */
    braid_status_t st =
        braid_allreduce(m.dev_in, m.dev_out, 100, BRAID_F32, BRAID_SUM, comm);
    CHECK(st == BRAID_OK && last_call()->coll == 0 &&
              last_call()->count == 100 && last_call()->dtype == 7 &&
              last_call()->op == 0,
          "device all-reduce runs on NCCL: %d %s", st, braid_last_error());
    CHECK(m.dev_out[7] == 7.0f * size, "the stub's result comes back: %g",
          m.dev_out[7]);
    st = braid_broadcast(m.dev_out, 50, BRAID_I32, size - 1, comm);
    CHECK(st == BRAID_OK && last_call()->coll == 3 &&
              last_call()->root == size - 1,
          "device broadcast on NCCL: %s", braid_last_error());
    CHECK(braid_barrier(comm) == BRAID_OK && last_call()->coll == 3,
          "a plain barrier (no buffers) stays on the host");

    /* Stream-ordered: the caller's stream reaches NCCL. */
    static char  token;
    cudaStream_t s = (cudaStream_t)&token;
    st = braid_allgather_cuda(m.dev_in, m.dev_out, 256 / size, BRAID_F32, comm,
                              s);
    CHECK(st == BRAID_OK && last_call()->coll == 2 &&
              last_call()->stream == (void *)s,
          "allgather_cuda on the caller's stream: %s", braid_last_error());
    st = braid_barrier_cuda(comm, s);
    CHECK(st == BRAID_OK && (size == 1 || (last_call()->coll == 0 &&
                                           last_call()->count == 1)),
          "stream barrier: one word on NCCL: %s", braid_last_error());
    CHECK(braid_allreduce_cuda(m.host, m.host, 4, BRAID_F32, BRAID_SUM, comm,
                               s) == BRAID_ERR_INVALID_ARG,
          "host memory on a stream refused");

    /* A split communicator gets its own NCCL side. */
    braid_comm_t *half = NULL;
    CHECK(braid_comm_split(comm, braid_comm_rank(comm) % 2, 0, &half) ==
              BRAID_OK,
          "split: %s", braid_last_error());
    if (half != NULL) {
        st = braid_reduce_scatter(m.dev_in, m.dev_out, 8, BRAID_F64, BRAID_MAX,
                                  half);
        CHECK(st == BRAID_OK && last_call()->coll == 1 &&
                  last_call()->count == 8 && last_call()->dtype == 8 &&
                  last_call()->op == 2,
              "device reduce_scatter on the split communicator: %s",
              braid_last_error());
        CHECK(braid_finalize(half) == BRAID_OK, "finalize split");
    }
    CHECK(braid_finalize(comm) == BRAID_OK, "finalize: %s",
          braid_last_error());
    return check_summary("nccl_stubbed");
}
