/* Device-pointer detection (core/cuda/devptr.c) without a GPU, in two
 * runs.  "none": no CUDA driver can be loaded, so every pointer is host
 * memory, cheaply, even after a driver is mapped from outside the loader's
 * search.  "stub": a stub driver (libcuda.so.1 built by the test) is on
 * LD_LIBRARY_PATH; its answers are used for each call, never cached, and
 * its failures become errors that name the call and the buffer.
 *   usage: test_devptr none|stub STUB_LIBCUDA */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/check.h"
#include "cuda/devptr.h"
#include "util/log.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static braid_mem_kind_t kind_of(const void *p)
{
    braid_mem_kind_t k  = (braid_mem_kind_t)-1;
    braid_status_t   st = braid_devptr_kind(&k, p, "test", "buf");
    CHECK(st == BRAID_OK, "kind of %p: %s", p, braid_last_error());
    return k;
}

static void (*set_ranges)(const void *, size_t, const void *, size_t);
static void (*fail_next)(int);

static int knobs(const char *path)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL, "dlopen %s: %s", path, dlerror());
    if (dl == NULL)
        return 0;
    set_ranges = (void (*)(const void *, size_t, const void *, size_t))dlsym(
        dl, "stub_cuda_set_ranges");
    fail_next = (void (*)(int))dlsym(dl, "stub_cuda_fail_next");
    CHECK(set_ranges && fail_next, "stub knobs");
    return set_ranges && fail_next;
}

static void per_call(const char *what, const void *a, const void *b)
{
    int              n = 1000000;
    braid_mem_kind_t k;
    double           t0 = now();
    for (int i = 0; i < n; i++)
        braid_devptr_buffers(&k, a, b, "allreduce");
    printf("%s: %.1f ns per call\n", what, (now() - t0) / n * 1e9);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "none") && strcmp(argv[1], "stub"))) {
        fprintf(stderr, "usage: test_devptr none|stub STUB_LIBCUDA\n");
        return 2;
    }
    static char host[4096], dev[4096], managed[4096];

    if (strcmp(argv[1], "none") == 0) {
        void *real = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (real != NULL) {
            printf("SKIP: a CUDA driver is installed here, so the case "
                   "without one cannot be run\n");
            return 77;
        }
        CHECK(!braid_devptr_driver_loaded(), "no CUDA driver to load");
        CHECK(kind_of(dev) == BRAID_MEM_KIND_HOST, "no driver: host");
        per_call("without a driver", host, host + 64);
        /* A driver mapped by path, outside the loader's search, is not one
         * a CUDA program would use: still no driver, still host. */
        if (knobs(argv[2]))
            set_ranges(dev, sizeof(dev), NULL, 0);
        CHECK(!braid_devptr_driver_loaded() &&
                  kind_of(dev) == BRAID_MEM_KIND_HOST,
              "the answer stands");
        return check_summary("devptr none");
    }

    /* 1. The first query loads the driver (the stub, on LD_LIBRARY_PATH). */
    CHECK(braid_devptr_driver_loaded(), "driver found by its name");
    if (!knobs(argv[2]))
        return check_summary("devptr stub");
    CHECK(kind_of(dev) == BRAID_MEM_KIND_HOST, "nothing declared yet: host");
    set_ranges(dev, sizeof(dev), managed, sizeof(managed));
    CHECK(kind_of(dev) == BRAID_MEM_KIND_DEVICE, "device range: device");
    CHECK(kind_of(dev + 4095) == BRAID_MEM_KIND_DEVICE, "last byte: device");
    CHECK(kind_of(managed + 17) == BRAID_MEM_KIND_DEVICE, "managed: device");
    CHECK(kind_of(host) == BRAID_MEM_KIND_HOST, "host array: host");
    CHECK(kind_of(NULL) == BRAID_MEM_KIND_HOST, "NULL: host");

    /* 2. Nothing is cached: the same pointer freed and reused as host. */
    set_ranges(NULL, 0, NULL, 0);
    CHECK(kind_of(dev) == BRAID_MEM_KIND_HOST, "range gone: host again");
    set_ranges(dev, sizeof(dev), NULL, 0);
    CHECK(kind_of(dev) == BRAID_MEM_KIND_DEVICE, "range back: device");

    /* 3. Driver errors: not initialised is host; others name the buffer. */
    fail_next(3);
    CHECK(kind_of(dev) == BRAID_MEM_KIND_HOST, "not initialised: host");
    fail_next(999);
    braid_mem_kind_t k;
    braid_status_t   st = braid_devptr_buffers(&k, host, dev, "allreduce");
    CHECK(st == BRAID_ERR_INTERNAL, "driver failure is an error (%d)", st);
    CHECK(
        strstr(braid_last_error(), "allreduce: cannot tell whether sendbuf") &&
            strstr(braid_last_error(), "cuPointerGetAttributes") &&
            strstr(braid_last_error(), "stub failure for the test"),
        "message names the call, the buffer and the driver's words: %s",
        braid_last_error());
    CHECK(kind_of(dev) == BRAID_MEM_KIND_DEVICE, "next query fine again");

    /* 4. A call's two buffers: the same kind, or an error naming both. */
    CHECK(braid_devptr_buffers(&k, dev, dev + 64, "allreduce") == BRAID_OK &&
              k == BRAID_MEM_KIND_DEVICE,
          "device + device");
    CHECK(braid_devptr_buffers(&k, host, host, "broadcast") == BRAID_OK &&
              k == BRAID_MEM_KIND_HOST,
          "host in place");
    CHECK(braid_devptr_buffers(&k, NULL, NULL, "barrier") == BRAID_OK &&
              k == BRAID_MEM_KIND_HOST,
          "no buffers: host");
    CHECK(braid_devptr_buffers(&k, NULL, dev, "allgather") == BRAID_OK &&
              k == BRAID_MEM_KIND_DEVICE,
          "only recvbuf given: its kind");
    st = braid_devptr_buffers(&k, dev, host, "allreduce");
    CHECK(
        st == BRAID_ERR_INVALID_ARG &&
            strstr(braid_last_error(),
                   "sendbuf is CUDA device memory but recvbuf is host memory"),
        "mixed kinds refused: %s", braid_last_error());
    per_call("with the (stub) driver", host, host + 64);
    return check_summary("devptr stub");
}
