/* What the unit tests of plugins share (tu_*): the services, an
 * out-of-band channel, loading a plugin from the build tree, running
 * ranks as forked processes or threads, and driving one algorithm call as
 * the core does.
 *
 * The services are the core's own (core/loader/services.c), so a plugin
 * meets in its unit test what it meets in libbraid: errors recorded for
 * tu_last_error (= braid_last_error), logging filtered by BRAID_DEBUG,
 * BRAID_TIMEOUT, BRAID_SLEEP_POLLS, the reduction kernels and the shared
 * algorithm machinery (core/algo).  Only the transport under test, or a
 * mock one, is the test's. */
#ifndef BRAID_TEST_UNIT_HARNESS_H
#define BRAID_TEST_UNIT_HARNESS_H

#include <stddef.h>

#include <braid/plugin.h>

/* ---------------------------------------------------------------- services */

const braid_services_t *tu_svc(void);
const char             *tu_last_error(void);
void                    tu_clear_error(void);
double                  tu_now(void);
/* BRAID_TIMEOUT (seconds) for the waits the services bound, and for the
 * board's; call before the ranks start. */
void tu_set_timeout(double s);
/* What svc->sleep_polls() returns from now on (BRAID_SLEEP_POLLS). */
void tu_set_sleep_polls(unsigned n);

/* --------------------------------------------------- out-of-band channel */

/* A board in shared memory for n ranks: threads of this process, or
 * processes forked after tu_board_new.  Each allgather contribution is at
 * most max_len bytes.  Every wait on it is bounded by BRAID_TIMEOUT, and
 * ends at once when a rank aborts the board (its peers then fail instead of
 * waiting for it). */
typedef struct tu_board tu_board_t;

tu_board_t *tu_board_new(int n, size_t max_len);
void        tu_board_free(tu_board_t *b);
/* The braid_oob_t of rank on the board (valid while the board is). */
void           tu_oob(braid_oob_t *oob, tu_board_t *b, int rank);
braid_status_t tu_barrier(tu_board_t *b, int rank);
void           tu_board_abort(tu_board_t *b);
/* A barrier that keeps the transport progressing while it waits, for when
 * peers need this rank to drain their messages before they can arrive. */
braid_status_t tu_progress_barrier(tu_board_t *b, int rank,
                                   const braid_transport_t *tl, void *tcomm);

/* ---------------------------------------------------------------- plugins */

/* dlopens path and checks its ABI-4 descriptor; prints why and exits 1
 * when it cannot (a unit test without its plugin has nothing to test). */
const braid_plugin_t *tu_plugin_open(const char *path, void **dl);
void                  tu_plugin_close(const braid_plugin_t *p, void *dl);
/* The plugin's transport or algorithm of that name; NULL when absent. */
const braid_transport_t *tu_transport(const braid_plugin_t *p,
                                      const char           *name);
const braid_algo_t      *tu_algo(const braid_plugin_t *p, braid_coll_t coll,
                                 const char *name);

/* ------------------------------------------------------------------ ranks */

/* One rank's work; returns its number of failed checks. */
typedef int (*tu_rank_fn)(int rank, int n, void *arg);

/* Forks n ranks running fn, each killed by SIGALRM after timeout_s
 * seconds (a hung rank dies loudly), and waits for them; each rank exits
 * with fn's failures (through exit, so LeakSanitizer looks).  Returns how
 * many ranks failed, each named on stderr with label; pids (n entries, may
 * be NULL) receives the ranks' process ids. */
int tu_fork(int n, tu_rank_fn fn, void *arg, unsigned timeout_s,
            const char *label, long *pids);
/* The shm transport's names in /dev/shm that carry process pid's id:
 * counts them, and unlinks them too when and_unlink is set. */
int tu_shm_names(long pid, int and_unlink);
/* Unlinks the names carrying this process's id before the process has
 * made any: they are a dead process's whose id the kernel has handed out
 * again (a rank killed while it created its segment leaves its name), and
 * would read as this process's leak.  Returns how many. */
int tu_clear_stale_shm_names(void);
/* Runs n threads; returns the sum of fn's results. */
int tu_threads(int n, tu_rank_fn fn, void *arg);

/* One host, n ranks, not pinned (nodes: n entries, filled with 0). */
braid_topo_t tu_topo(int n, int *nodes);

/* ---------------------------------------------------------------- a call */

/* Runs task to completion as the core does: start, progress (yielding the
 * CPU between polls: ranks share cores) until done, an error or limit_s
 * seconds (BRAID_ERR_TIMEOUT), then finish -- after a failed start too.
 * task->priv is reset first. */
braid_status_t tu_drive(const braid_algo_t *algo, braid_task_t *task,
                        double limit_s);

#endif
