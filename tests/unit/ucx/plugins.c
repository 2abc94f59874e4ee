/* See plugins.h. */
#include <stdio.h>
#include <string.h>

#include "plugins.h"

int th_plugin_load(th_plugin_t *p, const char *path, const char *algo_path)
{
    memset(p, 0, sizeof(*p));
    p->desc  = tu_plugin_open(path, &p->dl);
    p->adesc = tu_plugin_open(algo_path, &p->adl);
    if ((p->tl = tu_transport(p->desc, "ucx")) == NULL) {
        fprintf(stderr, "%s: no transport \"ucx\"\n", path);
        return -1;
    }
    tu_set_timeout(TH_TIMEOUT_S);
    return 0;
}

void th_plugin_unload(th_plugin_t *p)
{
    tu_plugin_close(p->adesc, p->adl);
    tu_plugin_close(p->desc, p->dl);
    memset(p, 0, sizeof(*p));
}
