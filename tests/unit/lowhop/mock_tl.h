/* A put-with-signal transport for in-process tests: ranks are threads of
 * one process, areas are plain heap memory, a put is a memcpy followed by a
 * release store of the flag.
 *
 * To shake out races the transport can be unkind (chaos): a put is delivered
 * late, at a random later progress()/test() call of the sender, puts are
 * delivered out of order, and delivery sometimes sleeps.  A late put reads
 * its source only when delivered (like a zero-copy RDMA write), so an
 * algorithm that touches a put's source before the put completed gets wrong
 * results.  mem_free frees the area at once, so a peer writing into a freed
 * area is a use-after-free for AddressSanitizer. */
#ifndef BRAID_TEST_LOWHOP_MOCK_TL_H
#define BRAID_TEST_LOWHOP_MOCK_TL_H

#include <stdint.h>

#include <braid/plugin.h>

#define MOCK_MAX_RANKS 16

typedef struct mock_world mock_world_t;
typedef struct mock_tl    mock_tl_t;

extern const braid_transport_t mock_transport;

/* A world of n ranks; chaos 0: every put lands at once, 1: unkind. */
mock_world_t *mock_world_new(int n, uint64_t seed, int chaos);
void          mock_world_free(mock_world_t *w);
/* Problems the world saw (ranks disagreeing on mem_alloc, bad puts). */
long mock_world_errors(const mock_world_t *w);
void mock_world_barrier(mock_world_t *w);

/* Rank's endpoint (the tcomm handed to the transport's functions). */
mock_tl_t *mock_tl_new(mock_world_t *w, int rank);
void       mock_tl_free(mock_tl_t *t);
long       mock_tl_allocs(const mock_tl_t *t); /* mem_alloc calls */
long       mock_tl_live_areas(const mock_tl_t *t);

#endif
