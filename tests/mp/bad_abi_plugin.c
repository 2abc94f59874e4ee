/* A plugin built for an ABI that does not exist: the loader must read
 * abi_version, refuse it with BRAID_ERR_ABI, say so in its log, and go on
 * with the other plugins.  Every other field is left empty on purpose: a
 * loader that touched them before checking the version would crash here. */
#include <braid/plugin.h>

__attribute__((visibility("default"))) const braid_plugin_t braid_plugin_v4 = {
    .abi_version = 999,
    .struct_size = sizeof(braid_plugin_t),
    .name        = "badabi",
    .version     = "0",
};
