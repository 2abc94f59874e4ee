/* Adapters from older plugin ABIs to the current one (adapt_v3.c). */
#ifndef BRAID_CORE_ADAPT_H
#define BRAID_CORE_ADAPT_H

#include <stddef.h>

#include <braid/plugin.h>

/* An ABI-4 view of desc, a braid_plugin_v3_t whose abi_version is 3.
 * BRAID_ERR_ABI with the reason in why when it cannot be adapted (a
 * malformed descriptor).  Free the view with braid_adapt_v3_free after the
 * plugin's unload. */
braid_status_t braid_adapt_v3(const braid_plugin_t **out, const void *desc,
                              char *why, size_t why_len);
void           braid_adapt_v3_free(const braid_plugin_t *adapted);

#endif
