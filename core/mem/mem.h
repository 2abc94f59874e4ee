/* The allocations of braid_mem_alloc, as the core and its services see
 * them (alloc.c). */
#ifndef BRAID_CORE_MEM_H
#define BRAID_CORE_MEM_H

#include <braid/plugin.h>

/* svc->mem_shared_find: 1 and *out filled when [ptr, ptr + len) lies inside
 * one live allocation of braid_mem_alloc, else 0. */
int braid_mem_shared_find(const void *ptr, size_t len,
                          braid_mem_shared_t *out);

#endif
