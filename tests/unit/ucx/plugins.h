/* The two plugins the ucx tests load from the build tree: the ucx
 * transport and the p2p algorithms that run over it (the rest of the
 * harness is tests/unit/common). */
#ifndef BRAID_TEST_UCX_PLUGINS_H
#define BRAID_TEST_UCX_PLUGINS_H

#include <braid/plugin.h>

#include "harness.h"

#define TH_TIMEOUT_S 30.0

typedef struct th_plugin {
    void                    *dl, *adl;
    const braid_plugin_t    *desc;  /* libbraid-ucx.so */
    const braid_plugin_t    *adesc; /* libbraid-p2p.so */
    const braid_transport_t *tl;
} th_plugin_t;

/* Exits when a plugin does not load (tu_plugin_open); -1 without "ucx". */
int  th_plugin_load(th_plugin_t *p, const char *path, const char *algo_path);
void th_plugin_unload(th_plugin_t *p);
static inline const braid_algo_t *
th_find_algo(const th_plugin_t *p, braid_coll_t coll, const char *name)
{
    return tu_algo(p->adesc, coll, name);
}

#endif
