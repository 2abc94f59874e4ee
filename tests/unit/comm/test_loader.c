/* The loader against a directory of good and broken plugins: every broken one
 * is reported with its reason and skipped; the good ones load; BRAID_PLUGINS
 * and shadowing work; the current directory is never searched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader/loader.h"
#include "../check.h"


static int copy_file(const char *to_dir, const char *from_dir, const char *name)
{
    char from[4096], to[4096], buf[65536];
    snprintf(from, sizeof(from), "%s/%s", from_dir, name);
    snprintf(to, sizeof(to), "%s/%s", to_dir, name);
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    size_t n;
    int err = in == NULL || out == NULL;
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

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_loader PLUGIN_DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    char copy[] = "/tmp/braid-loader-XXXXXX";
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
    expect(t, "tnosym", BRAID_PLUGIN_REJECTED, "no symbol");
    expect(t, "twrongname", BRAID_PLUGIN_REJECTED, "someoneelse");
    expect(t, "tshort", BRAID_PLUGIN_REJECTED, "8 bytes");
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
    CHECK(braid_loader_acquire(&t) == BRAID_ERR_PARSE, "malformed BRAID_PLUGINS"
          " refused");
    unsetenv("BRAID_PLUGINS");

    /* 3. The same plugin in two directories: the first in the path wins. */
    char path[8192];
    snprintf(path, sizeof(path), "%s:%s", copy, dir);
    setenv("BRAID_PLUGIN_PATH", path, 1);
    CHECK(braid_loader_acquire(&t) == BRAID_OK, "acquire with two dirs");
    const braid_plugin_entry_t *first = find(t, "tgood", 0),
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
