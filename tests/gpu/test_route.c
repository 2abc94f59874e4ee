/* Routing by memory kind through the public API, without a GPU and
 * without the nccl plugin: a stub CUDA driver (libcuda.so.1 built by the
 * test) declares one array device memory.  Host candidates must never be
 * handed it: every call on it is refused with the reason (here no
 * candidate takes device memory), two buffers of different kinds are an
 * argument error, stream-ordered calls want device memory, and host calls
 * go on as before.
 *   usage: test_route STUB_LIBCUDA */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <braid/braid.h>
#include <braid/cuda.h>

#include "../unit/check.h"

/* One object, so that the "device" range covers exactly dev_a and dev_b. */
static struct {
    float host_a[64], host_b[64], dev_a[64], dev_b[64];
} m;
#define host_a m.host_a
#define host_b m.host_b
#define dev_a  m.dev_a
#define dev_b  m.dev_b

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_route STUB_LIBCUDA\n");
        return 2;
    }
    braid_comm_t *comm;
    CHECK(braid_init(&comm) == BRAID_OK, "braid_init: %s", braid_last_error());
    if (comm == NULL)
        return check_summary("route");
    CHECK(braid_allreduce(host_a, host_b, 64, BRAID_F32, BRAID_SUM, comm) ==
              BRAID_OK,
          "host call without a driver");

    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL, "stub driver: %s", dlerror());
    if (dl == NULL)
        return check_summary("route");
    void (*set_ranges)(const void *, size_t, const void *, size_t) =
        (void (*)(const void *, size_t, const void *, size_t))dlsym(
            dl, "stub_cuda_set_ranges");
    set_ranges(dev_a, sizeof(dev_a) + sizeof(dev_b), NULL, 0);

    CHECK(braid_allreduce(host_a, host_b, 64, BRAID_F32, BRAID_SUM, comm) ==
              BRAID_OK,
          "host call with a driver: %s", braid_last_error());
    host_b[0] = 1;
    dev_b[0]  = 5;
    braid_status_t st =
        braid_allreduce(dev_a, dev_b, 64, BRAID_F32, BRAID_SUM, comm);
    CHECK(st == BRAID_ERR_NOT_SUPPORTED &&
              strstr(braid_last_error(), "no candidate can run allreduce of "
                                         "256 bytes on device memory"),
          "device buffers refused: %d %s", st, braid_last_error());
    CHECK(dev_b[0] == 5, "and nothing written");
    st = braid_broadcast(dev_a, 64, BRAID_F32, 0, comm);
    CHECK(st == BRAID_ERR_NOT_SUPPORTED, "broadcast on device memory: %s",
          braid_last_error());
    st = braid_allreduce(host_a, dev_b, 64, BRAID_F32, BRAID_SUM, comm);
    CHECK(st == BRAID_ERR_INVALID_ARG &&
              strstr(braid_last_error(), "sendbuf is host memory but recvbuf "
                                         "is CUDA device memory"),
          "mixed kinds: %s", braid_last_error());
    braid_request_t *req = NULL;
    st = braid_iallreduce(dev_a, dev_b, 64, BRAID_F32, BRAID_SUM, comm, &req);
    CHECK(st == BRAID_ERR_NOT_SUPPORTED && req == NULL,
          "non-blocking on device memory refused: %s", braid_last_error());

    st = braid_allreduce_cuda(host_a, host_b, 64, BRAID_F32, BRAID_SUM, comm,
                              NULL);
    CHECK(st == BRAID_ERR_INVALID_ARG &&
              strstr(braid_last_error(), "a stream-ordered call takes CUDA "
                                         "device memory"),
          "stream call on host memory: %s", braid_last_error());
    st = braid_allreduce_cuda(dev_a, dev_b, 64, BRAID_F32, BRAID_SUM, comm,
                              NULL);
    CHECK(st == BRAID_ERR_NOT_SUPPORTED &&
              strstr(braid_last_error(), "on device memory, stream-ordered"),
          "stream call, no candidate: %s", braid_last_error());
    /* Nothing to order on one rank, or without data. */
    CHECK(braid_barrier_cuda(comm, NULL) == BRAID_OK,
          "1-rank stream barrier: "
          "%s",
          braid_last_error());
    CHECK(braid_allgather_cuda(dev_a, dev_b, 0, BRAID_F32, comm, NULL) ==
              BRAID_OK,
          "empty stream call: %s", braid_last_error());

    /* Refusals are argument errors: the communicator still works. */
    CHECK(braid_allreduce(host_a, host_b, 64, BRAID_F32, BRAID_SUM, comm) ==
                  BRAID_OK &&
              host_b[0] == host_a[0],
          "host calls after the refusals: %s", braid_last_error());
    CHECK(braid_finalize(comm) == BRAID_OK, "finalize");
    return check_summary("route");
}
