/* Device-pointer detection (core/cuda/devptr.c) without a GPU: with no
 * CUDA driver in the process every pointer is host memory; once a driver
 * (here a stub built as libcuda.so.1) is loaded, its answers are used for
 * each call, never cached, and its failures become errors that name the
 * buffer. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/devptr.h"
#include "util/log.h"
#include "../unit/check.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static braid_mem_kind_t kind_of(const void *p)
{
    braid_mem_kind_t k = (braid_mem_kind_t)-1;
    braid_status_t st = braid_devptr_kind(&k, p, "test", "buf");
    CHECK(st == BRAID_OK, "kind of %p: %s", p, braid_last_error());
    return k;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_devptr STUB_LIBCUDA\n");
        return 2;
    }
    static char host[4096], dev[4096], managed[4096];

    /* 1. No driver: host, whatever the pointer. */
    CHECK(!braid_devptr_driver_loaded(), "no CUDA driver loaded yet");
    CHECK(kind_of(dev) == BRAID_MEM_KIND_HOST, "no driver: host");
    CHECK(kind_of(NULL) == BRAID_MEM_KIND_HOST, "NULL: host");
    int n = 1000000;
    double t0 = now();
    braid_mem_kind_t k;
    for (int i = 0; i < n; i++)
        braid_devptr_buffers(&k, host, host + 64, "allreduce");
    printf("without a driver: %.1f ns per call\n", (now() - t0) / n * 1e9);

    /* 2. The driver arrives after the first calls: noticed at once. */
    void *dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL, "dlopen %s: %s", argv[1], dlerror());
    if (dl == NULL)
        return check_summary("devptr");
    void (*set_ranges)(const void *, size_t, const void *, size_t) =
        (void (*)(const void *, size_t, const void *, size_t))dlsym(
            dl, "stub_cuda_set_ranges");
    void (*fail_next)(int) = (void (*)(int))dlsym(dl, "stub_cuda_fail_next");
    CHECK(set_ranges && fail_next, "stub knobs");
    if (!set_ranges || !fail_next)
        return check_summary("devptr");
    set_ranges(dev, sizeof(dev), managed, sizeof(managed));
    CHECK(braid_devptr_driver_loaded(), "driver seen once loaded");
    CHECK(kind_of(dev) == BRAID_MEM_KIND_DEVICE, "device range: device");
    CHECK(kind_of(dev + 4095) == BRAID_MEM_KIND_DEVICE, "last byte: device");
    CHECK(kind_of(managed + 17) == BRAID_MEM_KIND_DEVICE, "managed: device");
    CHECK(kind_of(host) == BRAID_MEM_KIND_HOST, "host array: host");
    CHECK(kind_of(NULL) == BRAID_MEM_KIND_HOST, "NULL: host");

    /* 3. Nothing is cached: the same pointer freed and reused as host. */
    set_ranges(NULL, 0, NULL, 0);
    CHECK(kind_of(dev) == BRAID_MEM_KIND_HOST, "range gone: host again");
    set_ranges(dev, sizeof(dev), NULL, 0);
    CHECK(kind_of(dev) == BRAID_MEM_KIND_DEVICE, "range back: device");

    /* 4. Driver errors: not initialised is host; others name the buffer. */
    fail_next(3);
    CHECK(kind_of(dev) == BRAID_MEM_KIND_HOST, "not initialised: host");
    fail_next(999);
    braid_status_t st = braid_devptr_buffers(&k, host, dev, "allreduce");
    CHECK(st == BRAID_ERR_INTERNAL, "driver failure is an error (%d)", st);
    CHECK(strstr(braid_last_error(), "allreduce: cannot tell whether sendbuf") &&
              strstr(braid_last_error(), "cuPointerGetAttributes") &&
              strstr(braid_last_error(), "stub failure for the test"),
          "message names the buffer, the call and the driver's words: %s",
          braid_last_error());
    CHECK(kind_of(dev) == BRAID_MEM_KIND_DEVICE, "next query fine again");

    /* 5. A call's two buffers: the same kind, or an error naming both. */
    CHECK(braid_devptr_buffers(&k, dev, dev + 64, "allreduce") == BRAID_OK &&
              k == BRAID_MEM_KIND_DEVICE, "device + device");
    CHECK(braid_devptr_buffers(&k, host, host, "broadcast") == BRAID_OK &&
              k == BRAID_MEM_KIND_HOST, "host in place");
    CHECK(braid_devptr_buffers(&k, NULL, NULL, "barrier") == BRAID_OK &&
              k == BRAID_MEM_KIND_HOST, "no buffers: host");
    CHECK(braid_devptr_buffers(&k, NULL, dev, "allgather") == BRAID_OK &&
              k == BRAID_MEM_KIND_DEVICE, "only recvbuf given: its kind");
    st = braid_devptr_buffers(&k, dev, host, "allreduce");
    CHECK(st == BRAID_ERR_INVALID_ARG && strstr(braid_last_error(),
          "sendbuf is CUDA device memory but recvbuf is host memory"),
          "mixed kinds refused: %s", braid_last_error());

    t0 = now();
    for (int i = 0; i < n; i++)
        braid_devptr_buffers(&k, host, host + 64, "allreduce");
    printf("with the (stub) driver, a call's two buffers: %.1f ns per call\n",
           (now() - t0) / n * 1e9);
    return check_summary("devptr");
}
