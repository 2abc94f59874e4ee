/* The NCCL plugin's probe through the real loader, against stub libraries
 * (so it runs on machines without a GPU or NCCL): every reason a user can
 * meet, word for word, and availability once everything is there.
 *   usage: test_nccl_probe PLUGIN_DIR STUB_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/check.h"
#include "loader/loader.h"

static char stub_dir[4096];

static void set_stub(const char *var, const char *file)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", stub_dir, file);
    setenv(var, path, 1);
}

/* Loads the plugins, checks nccl's state and that its reason holds each
 * of the parts, and unloads (so that the next case probes afresh). */
static void expect(const char *label, braid_plugin_state_t state,
                   const char *part1, const char *part2)
{
    const braid_plugin_table_t *t;
    CHECK(braid_loader_acquire(&t) == BRAID_OK, "%s: load", label);
    const braid_plugin_entry_t *e = NULL;
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->entries[i].name, "nccl") == 0)
            e = &t->entries[i];
    CHECK(e != NULL, "%s: nccl plugin listed", label);
    if (e != NULL) {
        printf("%-28s %s\n", label,
               e->state == BRAID_PLUGIN_AVAILABLE ? "available" : e->why);
        CHECK(e->state == state, "%s: state %d, expected %d (%s)", label,
              e->state, state, e->why);
        CHECK(part1 == NULL || strstr(e->why, part1) != NULL,
              "%s: reason '%s' says '%s'", label, e->why, part1);
        CHECK(part2 == NULL || strstr(e->why, part2) != NULL,
              "%s: reason '%s' says '%s'", label, e->why, part2);
    }
    braid_loader_release();
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_nccl_probe PLUGIN_DIR STUB_DIR\n");
        return 2;
    }
    snprintf(stub_dir, sizeof(stub_dir), "%s", argv[2]);
    setenv("BRAID_PLUGIN_PATH", argv[1], 1);
    setenv("BRAID_PLUGINS", "nccl", 1);
    setenv("BRAID_DEBUG", "error", 1);
    unsetenv("STUB_NCCL_VERSION");
    unsetenv("STUB_CUDA_COUNT_ERROR");
    unsetenv("STUB_CUDA_DEVICES");

    setenv("BRAID_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
    expect("library path does not exist", BRAID_PLUGIN_UNAVAILABLE,
           "libnccl.so.2 not found", "/nonexistent/libnccl.so.2");

    set_stub("BRAID_NCCL_LIBRARY", "libstub-nccl.so");
    set_stub("BRAID_CUDART_LIBRARY", "libstub-cudart.so");
    setenv("STUB_NCCL_VERSION", "2307", 1); /* 2.3.7, old code scheme */
    expect("NCCL 2.3.7", BRAID_PLUGIN_UNAVAILABLE,
           "NCCL 2.3.7 too old (need 2.4 or newer", NULL);
    setenv("STUB_NCCL_VERSION", "30000", 1);
    expect("NCCL 3.0.0", BRAID_PLUGIN_UNAVAILABLE,
           "NCCL 3.0.0 is not NCCL 2.x", NULL);
    setenv("STUB_NCCL_VERSION", "2408", 1); /* 2.4.8: old enough is enough */
    expect("NCCL 2.4.8", BRAID_PLUGIN_AVAILABLE, NULL, NULL);
    unsetenv("STUB_NCCL_VERSION");

    set_stub("BRAID_NCCL_LIBRARY", "libstub-nccl-nobcast.so");
    expect("NCCL without ncclBroadcast", BRAID_PLUGIN_UNAVAILABLE,
           "has no ncclBroadcast", NULL);
    set_stub("BRAID_NCCL_LIBRARY", "libstub-nccl.so");

    setenv("BRAID_CUDART_LIBRARY", "/nonexistent/libcudart.so", 1);
    expect("CUDA runtime missing", BRAID_PLUGIN_UNAVAILABLE,
           "CUDA runtime not found", "NCCL 2.28.9 found");
    set_stub("BRAID_CUDART_LIBRARY", "libstub-cudart.so");

    setenv("STUB_CUDA_COUNT_ERROR", "35", 1);
    expect("no driver", BRAID_PLUGIN_UNAVAILABLE, "CUDA driver not loaded",
           "NCCL 2.28.9 found");
    setenv("STUB_CUDA_COUNT_ERROR", "100", 1);
    expect("no device (error)", BRAID_PLUGIN_UNAVAILABLE, "no CUDA device",
           "no CUDA-capable device is detected");
    setenv("STUB_CUDA_COUNT_ERROR", "3", 1);
    expect("initialisation failure", BRAID_PLUGIN_UNAVAILABLE,
           "CUDA initialisation failed", "error 3");
    unsetenv("STUB_CUDA_COUNT_ERROR");
    setenv("STUB_CUDA_DEVICES", "0", 1);
    expect("no device (count 0)", BRAID_PLUGIN_UNAVAILABLE, "no CUDA device",
           "0 devices");
    unsetenv("STUB_CUDA_DEVICES");

    expect("everything there", BRAID_PLUGIN_AVAILABLE, NULL, NULL);

    setenv("BRAID_PLUGINS", "^nccl", 1);
    {
        const braid_plugin_table_t *t;
        CHECK(braid_loader_acquire(&t) == BRAID_OK, "load");
        int excluded = 0;
        for (int i = 0; i < t->n; i++)
            excluded |= !strcmp(t->entries[i].name, "nccl") &&
                        t->entries[i].state == BRAID_PLUGIN_EXCLUDED;
        CHECK(excluded, "BRAID_PLUGINS=^nccl excludes it before dlopen");
        braid_loader_release();
    }
    return check_summary("nccl_probe");
}
