/* The loader against a directory of good and broken plugins: every broken one
 * is reported with its reason and skipped; the good ones load; an ABI-3
 * plugin loads through the adapter and works; BRAID_PLUGINS and shadowing
 * work; the current directory is never searched. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "loader/loader.h"

static int copy_file(const char *to_dir, const char *from_dir,
                     const char *name)
{
    char from[4096], to[4096], buf[65536];
    snprintf(from, sizeof(from), "%s/%s", from_dir, name);
    snprintf(to, sizeof(to), "%s/%s", to_dir, name);
    FILE  *in = fopen(from, "rb"), *out = fopen(to, "wb");
    size_t n;
    int    err = in == NULL || out == NULL;
    while (!err && (n = fread(buf, 1, sizeof(buf), in)) > 0)
        err = fwrite(buf, 1, n, out) != n;
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    return err;
}

static const braid_plugin_entry_t *find(const braid_plugin_table_t *t,
                                        const char *name, int nth)
{
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->entries[i].name, name) == 0 && nth-- == 0)
            return &t->entries[i];
    return NULL;
}

static void expect(const braid_plugin_table_t *t, const char *name,
                   braid_plugin_state_t state, const char *why_part)
{
    const braid_plugin_entry_t *e = find(t, name, 0);
    CHECK(e != NULL, "plugin %s listed", name);
    if (e == NULL)
        return;
    CHECK(e->state == state, "%s: state %d, expected %d (%s)", name, e->state,
          state, e->why);
    CHECK(why_part == NULL || strstr(e->why, why_part) != NULL,
          "%s: reason '%s' mentions '%s'", name, e->why, why_part);
}

/* The ABI-3 plugin "tv3" through the adapter: its transport and its
 * algorithm, driven through their ABI-4 views as the core would. */
static void test_adapted(const braid_plugin_entry_t *e)
{
    CHECK(e->abi == 3 && e->adapted && e->desc != NULL &&
              e->desc->abi_version == BRAID_PLUGIN_ABI_VERSION &&
              e->desc->n_transports == 1 && e->desc->n_algos == 1,
          "tv3: adapted descriptor");
    if (e->desc == NULL || e->desc->n_transports != 1 || e->desc->n_algos != 1)
        return;
    const braid_transport_t *tl     = e->desc->transports[0];
    const braid_algo_t      *al     = e->desc->algos[0];
    const int               *stream = dlsym(e->dl, "tv3_last_stream");
    CHECK(tl->struct_size >= BRAID_TRANSPORT_V4_MIN_SIZE &&
              !strcmp(tl->name, "loop3") && tl->caps == BRAID_CAP_SENDRECV &&
              tl->mem_types == 0 && tl->cancel != NULL && tl->wait == NULL,
          "tv3: transport view");
    CHECK(al->struct_size >= BRAID_ALGO_V4_MIN_SIZE &&
              !strcmp(al->name, "copy3") && al->mem_types == 0 &&
              al->flags == 0 && al->coll == BRAID_COLL_ALLREDUCE,
          "tv3: algorithm view (host memory only, no backend)");

    int          nodes[1] = {0}, cpus[1] = {-1};
    braid_oob_t  oob  = {sizeof(oob), 0, 1, NULL, NULL, NULL};
    braid_topo_t topo = {.struct_size  = sizeof(topo),
                         .size         = 1,
                         .kind         = BRAID_TOPO_SINGLE_HOST,
                         .nnodes       = 1,
                         .ppn          = 1,
                         .node_of_rank = nodes,
                         .cpu_of_rank  = cpus,
                         .nmates       = -1};
    braid_tl_t   h    = {.struct_size = sizeof(h),
                         .ops         = tl,
                         .link        = {.struct_size = sizeof(braid_link_t)}};
    CHECK(tl->comm_create(tl, braid_core_services(), &oob, &topo, &h.tcomm) ==
              BRAID_OK,
          "tv3: comm_create through the adapter: %s", braid_last_error());
    if (h.tcomm == NULL)
        return;
    tl->link(h.tcomm, &h.link);
    CHECK(h.link.alpha_us == 2.5 && h.link.beta_gbps == 4.0 &&
              h.link.struct_size == sizeof(braid_link_t),
          "tv3: link %g us %g GB/s", h.link.alpha_us, h.link.beta_gbps);
    braid_cost_in_t in = {.struct_size = sizeof(in),
                          .coll        = BRAID_COLL_ALLREDUCE,
                          .bytes       = 4000,
                          .nranks      = 1,
                          .nnodes      = 1,
                          .ppn         = 1,
                          .link        = h.link,
                          .reduce_gbps = 8};
    CHECK(al->estimate(al, &in) == 3.5, "tv3: estimate %g, want 3.5",
          al->estimate(al, &in));

    void *state = NULL;
    for (int call = 0; call < 2; call++) {
        int            src[4] = {1, 2, 3, 4 + call}, dst[4] = {0};
        braid_task_t   t  = {.struct_size = sizeof(t),
                             .coll        = BRAID_COLL_ALLREDUCE,
                             .sendbuf     = src,
                             .recvbuf     = dst,
                             .count       = 4,
                             .dtype       = BRAID_I32,
                             .op          = BRAID_SUM,
                             .dtsize      = 4,
                             .rank        = 0,
                             .size        = 1,
                             .seq         = (uint64_t)(10 + call),
                             .topo        = &topo,
                             .tl          = &h,
                             .svc         = braid_core_services(),
                             .comm_state  = &state,
                             .algo        = al};
        braid_wait_t   w  = BRAID_WAIT_LOCAL;
        braid_status_t st = al->start(&t, &w);
        CHECK(st == BRAID_OK && w == BRAID_WAIT_LOCAL, "tv3: start %d", st);
        CHECK(stream != NULL && *stream == call,
              "tv3: call %d: ABI 3 task->stream %d, want %d", call,
              stream ? *stream : -9, call);
        st = al->progress(&t, &w);
        CHECK(st == BRAID_INPROGRESS && w == BRAID_WAIT_REMOTE,
              "tv3: remote_wait becomes BRAID_WAIT_REMOTE (%d, %d)", st, w);
        w  = BRAID_WAIT_REMOTE;
        st = al->progress(&t, &w);
        CHECK(st == BRAID_OK, "tv3: done on the second progress (%d)", st);
        al->finish(&t);
        CHECK(t.priv == NULL && memcmp(src, dst, sizeof(src)) == 0,
              "tv3: the call copied through the adapted transport");
    }
    CHECK(state != NULL, "tv3: the adapter keeps per-communicator state");
    al->comm_state_free(state, &h);
    tl->comm_destroy(h.tcomm);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_loader PLUGIN_DIR\n");
        return 2;
    }
    const char *dir    = argv[1];
    char        copy[] = "/tmp/braid-loader-XXXXXX";
    if (mkdtemp(copy) == NULL || copy_file(copy, dir, "libbraid-tgood.so")) {
        fprintf(stderr, "cannot prepare a second plugin directory\n");
        return 1;
    }
    const braid_plugin_table_t *t;

    /* 1. Everything in dir, nothing excluded. */
    setenv("BRAID_PLUGIN_PATH", dir, 1);
    unsetenv("BRAID_PLUGINS");
    CHECK(braid_loader_acquire(&t) == BRAID_OK, "acquire");
    expect(t, "tgood", BRAID_PLUGIN_AVAILABLE, NULL);
    CHECK(find(t, "tgood", 0) && find(t, "tgood", 0)->desc &&
              !strcmp(find(t, "tgood", 0)->desc->version, "1.2"),
          "descriptor of the good plugin is kept");
    expect(t, "tunavail", BRAID_PLUGIN_UNAVAILABLE, "no widget");
    expect(t, "tbadabi", BRAID_PLUGIN_REJECTED, "ABI version 999");
    expect(t, "tbadabi", BRAID_PLUGIN_REJECTED, "newer than this core");
    expect(t, "tnosym", BRAID_PLUGIN_REJECTED, "no symbol");
    expect(t, "twrongname", BRAID_PLUGIN_REJECTED, "someoneelse");
    expect(t, "tshort", BRAID_PLUGIN_REJECTED, "8 bytes");
    expect(t, "tfuture", BRAID_PLUGIN_REJECTED, "ABI 5");
    expect(t, "tfuture", BRAID_PLUGIN_REJECTED, "newer than this core");
    expect(t, "tabi2", BRAID_PLUGIN_REJECTED, "too old to adapt");
    expect(t, "tsmalltl", BRAID_PLUGIN_REJECTED, "smaller than ABI 4");
    expect(t, "tv3bad", BRAID_PLUGIN_REJECTED, "lacks its name, cancel");
    expect(t, "tv3", BRAID_PLUGIN_AVAILABLE, NULL);
    if (find(t, "tv3", 0) != NULL)
        test_adapted(find(t, "tv3", 0));
    CHECK(find(t, "tbadabi", 0) && find(t, "tbadabi", 0)->desc == NULL &&
              find(t, "tbadabi", 0)->dl == NULL,
          "rejected plugin is closed");
    braid_loader_release();

    /* 2. Keep-list and exclude-list. */
    setenv("BRAID_PLUGINS", "tunavail", 1);
    CHECK(braid_loader_acquire(&t) == BRAID_OK, "acquire with keep list");
    expect(t, "tgood", BRAID_PLUGIN_EXCLUDED, "BRAID_PLUGINS");
    expect(t, "tunavail", BRAID_PLUGIN_UNAVAILABLE, NULL);
    braid_loader_release();
    setenv("BRAID_PLUGINS", "^tgood", 1);
    CHECK(braid_loader_acquire(&t) == BRAID_OK, "acquire with exclude list");
    expect(t, "tgood", BRAID_PLUGIN_EXCLUDED, NULL);
    expect(t, "tunavail", BRAID_PLUGIN_UNAVAILABLE, NULL);
    braid_loader_release();
    setenv("BRAID_PLUGINS", "tgood,", 1);
    CHECK(braid_loader_acquire(&t) == BRAID_ERR_PARSE,
          "malformed BRAID_PLUGINS"
          " refused");
    unsetenv("BRAID_PLUGINS");

    /* 3. The same plugin in two directories: the first in the path wins. */
    char path[8192];
    snprintf(path, sizeof(path), "%s:%s", copy, dir);
    setenv("BRAID_PLUGIN_PATH", path, 1);
    CHECK(braid_loader_acquire(&t) == BRAID_OK, "acquire with two dirs");
    const braid_plugin_entry_t *first  = find(t, "tgood", 0),
                               *second = find(t, "tgood", 1);
    CHECK(first && second && first->state == BRAID_PLUGIN_AVAILABLE &&
              strncmp(first->path, copy, strlen(copy)) == 0 &&
              second->state == BRAID_PLUGIN_SHADOWED,
          "first tgood in path wins, second shadowed");
    braid_loader_release();

    /* 4. Plugins in the current directory are not loaded. */
    setenv("BRAID_PLUGIN_PATH", "/nonexistent", 1);
    CHECK(chdir(dir) == 0, "chdir");
    CHECK(braid_loader_acquire(&t) == BRAID_OK, "acquire from elsewhere");
    CHECK(find(t, "tgood", 0) == NULL, "cwd is not searched");
    braid_loader_release();

    char f[8192];
    snprintf(f, sizeof(f), "%s/libbraid-tgood.so", copy);
    unlink(f);
    rmdir(copy);
    return check_summary("test_loader");
}
