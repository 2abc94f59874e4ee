/* The verdict of a failure inquiry (internal): from what each rank said, or
 * what its host's board showed, which call failed and why, in one message
 * that every rank reports.  A pure function, so that the unit tests can
 * feed it every situation. */
#ifndef BRAID_CORE_VERDICT_H
#define BRAID_CORE_VERDICT_H

#include "comm/sig.h"

enum {
    BRAID_RS_UNKNOWN = 0, /* not asked (its own rank 0 is unreachable) */
    BRAID_RS_ANSWERED,    /* answered the inquiry */
    BRAID_RS_SILENT,      /* connected, but no answer within the window */
    BRAID_RS_LOST,        /* its connection ended: the process is gone */
};

typedef struct braid_rank_state {
    int state; /* BRAID_RS_* */
    int known; /* prog holds its progress (answered, or a board) */
    braid_progress_snap_t prog;
    int     api;       /* answered: the braid call it is inside (0: none) */
    int32_t status;    /* answered: its own failure, BRAID_OK if only asked */
    char    proc;      /* its process state as /proc shows it, 0 unknown */
    char    desc[96];  /* "rank 3 (host h, pid p)" */
    char    text[200]; /* answered: its own error message */
} braid_rank_state_t;

typedef struct braid_verdict {
    braid_status_t status; /* MISMATCH, PEER, TIMEOUT, or a rank's own */
    uint64_t       call;   /* the failed call: the first one some live
                              rank has not completed */
    int  culprit;          /* the rank named first, -1 if none */
    char text[480];
} braid_verdict_t;

/* api_name: names braid_api_t values (comm/entry.c), or NULL. */
void braid_verdict_judge(braid_verdict_t *out, int size,
                         const braid_rank_state_t *rs,
                         const char *(*api_name)(int api));

#endif
