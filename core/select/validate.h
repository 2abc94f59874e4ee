/* The user's names checked against what the loader found, at init.
 *
 * BRAID_ALGO and BRAID_PLUGINS are parsed without knowing which plugins
 * exist; a misspelled name would otherwise pass init and fail at the first
 * call (BRAID_ALGO) or be ignored (BRAID_PLUGINS).  Every name is looked up
 * in the plugin table, and an unknown one fails braid_init with its position
 * and the nearest known name.  No list of plugins is written down here: the
 * names are whatever the plugins found declare. */
#ifndef BRAID_CORE_VALIDATE_H
#define BRAID_CORE_VALIDATE_H

#include "loader/loader.h"
#include "select/select.h"

/* BRAID_PLUGINS (text, may be NULL): every name must be a plugin found in
 * the search path, kept or excluded.  BRAID_ERR_NOT_FOUND otherwise. */
braid_status_t braid_validate_plugins(const char                 *text,
                                      const braid_plugin_table_t *t);
/* BRAID_ALGO (parsed spec and its text): every algorithm must be one that a
 * loaded plugin has for that collective, every transport one that a loaded
 * plugin brings.  BRAID_ERR_NOT_FOUND otherwise. */
braid_status_t braid_validate_algo(const braid_algo_spec_t    *spec,
                                   const char                 *text,
                                   const braid_plugin_table_t *t);
/* For each collective without any candidate on this communicator, why:
 * no plugin here has an algorithm for it, or no transport those algorithms
 * need is open (and why not).  Written into sel->none_why for the
 * dispatcher's error message. */
void braid_validate_why_none(braid_selector_t           *sel,
                             const braid_plugin_table_t *t,
                             const braid_tl_t *tls, int ntls);

#endif
