/* In-process harness for the ucx plugin: ranks are threads, the out-of-band
 * channel is a shared board guarded by a mutex and a condition variable,
 * and the services are the test's own (mocks are allowed in unit tests). */
#ifndef BRAID_TEST_UCX_HARNESS_H
#define BRAID_TEST_UCX_HARNESS_H

#include <pthread.h>
#include <stddef.h>

#include <braid/plugin.h>

#define TH_TIMEOUT_S 30.0

/* One "job": n rank threads sharing a board. */
typedef struct th_board {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    int             n;
    int             arrived, departed, draining;
    unsigned long   gen;
    size_t          len, cap;
    char           *buf;
} th_board_t;

typedef struct th_oob_ctx {
    th_board_t *board;
    int         rank;
} th_oob_ctx_t;

void th_board_init(th_board_t *b, int n);
void th_board_destroy(th_board_t *b);
/* The braid_oob_t of one rank on the board (ctx must outlive it). */
void th_oob(braid_oob_t *oob, th_oob_ctx_t *ctx, th_board_t *b, int rank);

extern const braid_services_t th_svc;
const char *th_last_error(void); /* this thread's last svc->error message */
double      th_now(void);

/* The loaded plugins: the ucx transport's and the p2p algorithms'. */
typedef struct th_plugin {
    void                       *dl, *adl;
    const braid_plugin_t    *desc;  /* libbraid-ucx.so */
    const braid_plugin_t    *adesc; /* libbraid-p2p.so */
    const braid_transport_t *tl;
} th_plugin_t;

int  th_plugin_load(th_plugin_t *p, const char *path, const char *algo_path);
void th_plugin_unload(th_plugin_t *p);
const braid_algo_t *th_find_algo(const th_plugin_t *p, braid_coll_t coll,
                                    const char *name);

/* Runs task to completion (start, progress with sched_yield, finish). */
braid_status_t th_drive(const braid_algo_t *algo, braid_task_t *task);

#endif
