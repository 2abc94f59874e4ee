/* Multi-process harness for the shm transport's tests and benchmark.
 *
 * The parent dlopens the plugin and maps a board (MAP_SHARED|MAP_ANONYMOUS)
 * with a process-shared barrier and one slot per rank; forked children are
 * the ranks, and an in-memory oob over the board stands in for the core's
 * bootstrap.  No libbraid: the plugin is driven through its ABI alone. */
#ifndef BRAID_TEST_SHM_HARNESS_H
#define BRAID_TEST_SHM_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <braid/plugin.h>

#define TH_SLOT 4096 /* largest oob contribution */

typedef struct th_board th_board_t;

typedef struct th_rank {
    int                         rank;
    int                         size;
    int                         oversub; /* more ranks than cores: yield */
    th_board_t                 *board;
    braid_oob_t                 oob;
    const braid_services_t  *svc;
    const braid_transport_t *tl;
} th_rank_t;

/* One rank's work: returns the number of failed checks. */
typedef int (*th_body_fn)(th_rank_t *r, void *arg);

extern int th_failures; /* this process's failed checks */

#define TH_CHECK(cond, ...)                                                 \
    do {                                                                    \
        if (!(cond)) {                                                      \
            th_fail(__FILE__, __LINE__, __VA_ARGS__);                       \
        }                                                                   \
    } while (0)

void th_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* dlopens path and finds transport "shm"; exits on failure. */
const braid_transport_t *th_load(const char *path);
const braid_services_t  *th_services(void);
const char                 *th_last_error(void);

/* Forks n ranks running body (each under a watchdog of timeout_s), waits
 * for them; returns the number of ranks that failed. */
int th_run(const braid_transport_t *tl, int n, th_body_fn body, void *arg,
           int timeout_s, const char *label);

/* The oob over the board, usable from a body. */
void th_barrier(th_rank_t *r);
/* A barrier that keeps the transport progressing while it waits, for when
 * peers need this rank to drain their messages before they can arrive. */
void th_progress_barrier(th_rank_t *r, void *tcomm);

/* Fds open in this process; mappings of braid-shm segments; braid-shm
 * names of process pid left in /dev/shm. */
int th_count_fds(void);
int th_count_shm_maps(void);
int th_count_shm_names(long pid);

/* Waits for n requests; returns the first error, or BRAID_OK. */
braid_status_t th_wait(th_rank_t *r, void *tcomm, braid_treq_t *reqs, int n);
/* What svc->sleep_polls() returns (0 by default): th_wait then sleeps in
 * the transport's wait hook as the core would. */
extern unsigned th_sleep_polls;

double th_now(void);
/* Call in a poll loop: yields like the core's wait loop (every poll with more
 * ranks than cores, else now and then: this machine is shared). */
void th_relax(th_rank_t *r, unsigned *polls);
const char *th_status_str(braid_status_t st); /* without libbraid */

#endif
