/* The plugin contract as the core keeps it, seen from a plugin
 * (contract_plugin.c, whose counters this reads through dlsym).  Under
 * braidrun -n N with BRAID_PLUGIN_PATH=DIR (the plugin's folder) and
 *   BRAID_ALGO="allreduce:0-64=ctr,64-128=oobsum,128-256=devonly":
 *   1. a blocking call starts once and finishes once;
 *   2. a non-blocking call starts inside braid_iallreduce when the queue is
 *      empty; one queued behind it starts only after it completed (never
 *      two calls between start and finish at once);
 *   3. a backend (oobsum, no braid transport) was created at init through
 *      the oob, runs, and is freed at finalize;
 *   4. a candidate for device memory only (devonly) is refused for host
 *      memory even when forced, and never chosen by the cost model;
 *   5. a start() that fails after posting requests is followed by finish(),
 *      which cancels them all.
 * usage: test_contract DIR */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

#define PROG "test_contract"

static int failures, rank;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, PROG " rank %d FAIL line %d: ", rank, __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            failures++;                                                       \
        }                                                                     \
    } while (0)

static int *counter(void *dl, const char *name)
{
    int *c = dlsym(dl, name);
    if (c == NULL) {
        fprintf(stderr, PROG ": no counter %s in the plugin\n", name);
        exit(1);
    }
    return c;
}

/* Sum over ranks of (r + 1) * (i + 1), the input below. */
static int check_sum(const int32_t *got, size_t count, int size)
{
    int bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += got[i] != (int32_t)((size_t)size * (size + 1) / 2 * (i + 1));
    return bad;
}

static void fill(int32_t *buf, size_t count)
{
    for (size_t i = 0; i < count; i++)
        buf[i] = (int32_t)((size_t)(rank + 1) * (i + 1));
}

int main(int argc, char **argv)
{
    braid_comm_t *comm;
    char          path[4096], cand[80], why[200];
    int32_t       a[100], b[100], out[100], out2[100];

    if (argc != 2) {
        fprintf(stderr, "usage: " PROG " DIR\n");
        return 2;
    }
    if (braid_init(&comm) != BRAID_OK) {
        fprintf(stderr, PROG ": braid_init: %s\n", braid_last_error());
        return 1;
    }
    rank     = braid_comm_rank(comm);
    int size = braid_comm_size(comm);
    snprintf(path, sizeof(path), "%s/libbraid-contract.so", argv[1]);
    /* The library the loader opened; this reference keeps it mapped (and
     * its counters readable) after braid_finalize. */
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (dl == NULL) {
        fprintf(stderr, PROG ": the contract plugin is not loaded: %s\n",
                dlerror());
        return 1;
    }
    int *starts         = counter(dl, "contract_starts");
    int *finishes       = counter(dl, "contract_finishes");
    int *max_running    = counter(dl, "contract_max_running");
    int *left_active    = counter(dl, "contract_left_active");
    int *backends       = counter(dl, "contract_backends");
    int *backends_freed = counter(dl, "contract_backends_freed");
    int *backend_calls  = counter(dl, "contract_backend_calls");

    /* 1. Blocking, 16 bytes: ctr. */
    fill(a, 4);
    CHECK(braid_allreduce(a, out, 4, BRAID_I32, BRAID_SUM, comm) == BRAID_OK,
          "blocking ctr: %s", braid_last_error());
    CHECK(check_sum(out, 4, size) == 0, "blocking ctr: wrong result");
    CHECK(*starts == 1 && *finishes == 1, "blocking: %d starts, %d finishes",
          *starts, *finishes);

    /* 2. Two non-blocking calls. */
    braid_request_t *ra, *rb;
    fill(a, 4);
    fill(b, 4);
    CHECK(braid_iallreduce(a, out, 4, BRAID_I32, BRAID_SUM, comm, &ra) ==
              BRAID_OK,
          "iallreduce a: %s", braid_last_error());
    CHECK(*starts == 2,
          "an iallreduce onto an empty queue starts at once "
          "(%d starts)",
          *starts);
    CHECK(braid_iallreduce(b, out2, 4, BRAID_I32, BRAID_SUM, comm, &rb) ==
              BRAID_OK,
          "iallreduce b: %s", braid_last_error());
    CHECK(braid_wait(ra) == BRAID_OK && braid_wait(rb) == BRAID_OK,
          "waits: %s", braid_last_error());
    CHECK(check_sum(out, 4, size) == 0 && check_sum(out2, 4, size) == 0,
          "non-blocking: wrong results");
    CHECK(*starts == 3 && *finishes == 3 && *max_running == 1,
          "queued calls: %d starts, %d finishes, %d at once (want 3, 3, 1)",
          *starts, *finishes, *max_running);

    /* 3. The backend, 80 bytes. */
    CHECK(*backends == 1, "backend state created at init: %d", *backends);
    CHECK(braid_comm_choice(comm, BRAID_COLL_ALLREDUCE, 80, cand, sizeof(cand),
                            why, sizeof(why)) == BRAID_OK &&
              strcmp(cand, "oobsum") == 0,
          "80 B goes to the backend, written alone: %s", cand);
    fill(a, 20);
    CHECK(braid_allreduce(a, out, 20, BRAID_I32, BRAID_SUM, comm) == BRAID_OK,
          "backend: %s", braid_last_error());
    CHECK(check_sum(out, 20, size) == 0 && *backend_calls == 1,
          "backend: wrong result or not run (%d calls)", *backend_calls);

    /* 4. Device-only, forced for 160 bytes of host memory: refused, and the
     * communicator stays usable; never chosen on its own (400 bytes). */
    fill(a, 40);
    braid_status_t st =
        braid_allreduce(a, out, 40, BRAID_I32, BRAID_SUM, comm);
    CHECK(st == BRAID_ERR_NOT_SUPPORTED &&
              strstr(braid_last_error(), "devonly") != NULL,
          "forcing a device-only candidate on host memory: %d %s", st,
          braid_last_error());
    CHECK(braid_comm_choice(comm, BRAID_COLL_ALLREDUCE, 400, cand,
                            sizeof(cand), why, sizeof(why)) == BRAID_OK &&
              strstr(cand, "devonly") == NULL,
          "cost model on host memory picked %s", cand);
    fill(a, 100);
    CHECK(
        braid_allreduce(a, out, 100, BRAID_I32, BRAID_SUM, comm) == BRAID_OK &&
            check_sum(out, 100, size) == 0,
        "after the refusal, 400 B by the cost model: %s", braid_last_error());

    /* 5. A start that fails after posting: finish follows and cancels. */
    int before = *starts;
    setenv("CONTRACT_FAIL_START", "1", 1);
    fill(a, 4);
    st = braid_allreduce(a, out, 4, BRAID_I32, BRAID_SUM, comm);
    unsetenv("CONTRACT_FAIL_START");
    CHECK(st == BRAID_ERR_INTERNAL &&
              strstr(braid_last_error(), "fails on purpose") != NULL,
          "failing start: %d %s", st, braid_last_error());
    CHECK(*starts == before + 1 && *finishes == *starts,
          "finish after a failed start: %d starts, %d finishes", *starts,
          *finishes);
    CHECK(*left_active == 0, "%d requests left active after finish",
          *left_active);

    braid_finalize(comm);
    CHECK(*backends_freed == 1, "backend state freed at finalize: %d",
          *backends_freed);
    dlclose(dl);
    if (failures == 0)
        printf(PROG " rank %d: all checks passed\n", rank);
    return failures != 0;
}
