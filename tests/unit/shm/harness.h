/* The shm transport's tests and benchmark: forked ranks drive the built
 * plugin through its ABI over the shared harness (tests/unit/common: the
 * core's services, the out-of-band board), plus what only a shared-memory
 * transport needs checked (segments and descriptors left behind). */
#ifndef BRAID_TEST_SHM_HARNESS_H
#define BRAID_TEST_SHM_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <braid/plugin.h>

#include "../common/harness.h"

typedef struct th_rank {
    int                      rank;
    int                      size;
    int                      oversub; /* more ranks than cores: yield */
    tu_board_t              *board;
    braid_oob_t              oob;
    const braid_services_t  *svc;
    const braid_transport_t *tl;
} th_rank_t;

/* One rank's work: returns the number of failed checks. */
typedef int (*th_body_fn)(th_rank_t *r, void *arg);

extern int th_failures; /* this process's failed checks */

#define TH_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            th_fail(__FILE__, __LINE__, __VA_ARGS__);                         \
        }                                                                     \
    } while (0)

void th_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* dlopens path and finds transport "shm"; exits on failure. */
const braid_transport_t *th_load(const char *path);
#define th_last_error tu_last_error
#define th_now        tu_now
#define th_status_str braid_status_str

/* Forks n ranks running body (each under a watchdog of timeout_s), waits
 * for them; returns the number of ranks that failed or left segments. */
int th_run(const braid_transport_t *tl, int n, th_body_fn body, void *arg,
           int timeout_s, const char *label);

/* The oob over the board, usable from a body. */
void th_barrier(th_rank_t *r);
/* A barrier that keeps the transport progressing while it waits. */
void th_progress_barrier(th_rank_t *r, void *tcomm);

/* Fds open in this process; mappings of braid-shm segments; braid-shm
 * names of process pid left in /dev/shm. */
int th_count_fds(void);
int th_count_shm_maps(void);
int th_count_shm_names(long pid);

/* Waits for n requests; returns the first error, or BRAID_OK. */
braid_status_t th_wait(th_rank_t *r, void *tcomm, braid_treq_t *reqs, int n);
/* BRAID_SLEEP_POLLS (0 by default): svc->sleep_polls() returns it, and
 * th_wait then sleeps in the transport's wait hook as the core would. */
void th_set_sleep_polls(unsigned n);

/* Call in a poll loop: yields like the core's wait loop (every poll with more
 * ranks than cores, else now and then: this machine is shared). */
void th_relax(th_rank_t *r, unsigned *polls);

#endif
