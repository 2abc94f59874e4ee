/* Bootstrap: rank/size discovery from the launcher's environment and a TCP
 * out-of-band channel per communicator.
 *
 * The channel is a star: the communicator's rank 0 listens, the others
 * connect.  Every connection proves it belongs to the job with a
 * challenge-response keyed by the job key (the key itself never crosses the
 * wire), and every message carries a header that is length-checked against
 * what the receiver expects.  All waits are bounded by BRAID_TIMEOUT. */
#ifndef BRAID_CORE_BOOTSTRAP_H
#define BRAID_CORE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

/* What the launcher told this process. */
typedef struct braid_launch {
    int     rank;
    int     size;
    char    host[256]; /* rendezvous host of rank 0 ("" = file rendezvous) */
    int     port;      /* rendezvous port */
    uint8_t key[16];   /* per-job key */
    char launcher[32]; /* "braidrun", "mpirun", "srun", "torchrun", "single" */
    char job_id[128];  /* used to name the file rendezvous */
    /* Added by the bootstrap; all-zero means "not given", so a hand-filled
     * launch (tests) only needs the fields above. */
    int key_set;       /* 1: key is the job key.  0 with host == "": rank
                          0 draws a random key and shares it through the
                          0600 rendezvous file.  0 with a host: key is
                          used as it is. */
    int has_listen_fd; /* rank 0 inherited a listening socket: braidrun's
                          BRAID_LISTEN_FD (no free-port race) */
    int  listen_fd;    /* owned by braid_bootstrap_init, which closes it */
    char ifaddr[64];   /* BRAID_IFADDR: where rank 0 listens in the file
                          rendezvous ("" = 127.0.0.1) */
    char rendezvous_dir[512]; /* BRAID_RENDEZVOUS_DIR ("" = /tmp) */
    int  rdv;                 /* BRAID_RDV_BY_HOST (0), _STORE or _PROBE */
    char rank_from[64];       /* "RANK/WORLD_SIZE": for messages */
    char addr_from[64];       /* "MASTER_ADDR/MASTER_PORT", "BRAID_ADDR" */
} braid_launch_t;

/* How the ranks find rank 0 (launch->rdv). */
enum {
    /* host "": the file rendezvous; else rank 0 listens on host:port. */
    BRAID_RDV_BY_HOST = 0,
    /* host:port is a torch TCPStore (torchrun's agent store): rank 0 listens
     * on an ephemeral port of the interface facing it and publishes where;
     * the others read it there. */
    BRAID_RDV_STORE,
    /* host:port is torch's TCPStore or nothing yet (RANK/WORLD_SIZE without
     * torchrun's agent store): rank 0 listens there if the port is free and
     * uses the store otherwise; the others ask whoever answers there. */
    BRAID_RDV_PROBE,
};

/* Reads BRAID_RANK/BRAID_SIZE/BRAID_ADDR/BRAID_JOB_KEY (braidrun), Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE, Slurm's SLURM_PROCID/SLURM_NTASKS, and
 * RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, in that order.  No variables at
 * all means a single rank.  Malformed values are BRAID_ERR_PARSE naming the
 * variable and position. */
braid_status_t braid_launch_from_env(braid_launch_t *launch);

/* "host vm, rank 2 of 4 (RANK/WORLD_SIZE), rendezvous 10.0.0.1:29500
 * (MASTER_ADDR/MASTER_PORT)": where an init failure happened and which of
 * the launcher's variables it came from. */
void braid_launch_describe(const braid_launch_t *launch, char *buf,
                           size_t len);
/* Returns st with the last error prefixed by "braid_init on <describe>: "
 * (launch NULL: only the host, when the launch could not be read). */
braid_status_t braid_launch_failed(braid_status_t        st,
                                   const braid_launch_t *launch);

/* secure.c.  1 when every address host resolves to is a loopback address:
 * a rendezvous there is reachable from this host only. */
int braid_host_is_loopback(const char *host);
/* BRAID_ERR_AUTH: a rendezvous at host:port (from `from`) is reachable from
 * other hosts and has no BRAID_JOB_KEY; says how to make and pass one. */
braid_status_t braid_key_required_error(const char *host, int port,
                                        const char *from);

/* BRAID_JOB_KEY format: exactly 32 hex digits.  name is used in messages. */
braid_status_t braid_parse_job_key(const char *name, const char *value,
                                   uint8_t key[16]);
/* 32 lower-case hex digits and a NUL. */
void braid_format_job_key(const uint8_t key[16], char hex[33]);

typedef struct braid_bootstrap braid_bootstrap_t;

/* World channel from the launch description.  Collective.  Rank 0 listens
 * (on the inherited socket, on host:port, or, with host == "", on an
 * ephemeral port published in $BRAID_RENDEZVOUS_DIR/braid-<uid>-<job_id>);
 * the others connect and prove the job key.  Returns once every rank has
 * joined, or BRAID_ERR_TIMEOUT after BRAID_TIMEOUT seconds.
 * A channel is used by one thread at a time; every operation is collective
 * and bounded by BRAID_TIMEOUT.  After an error the channel is failed: its
 * sockets are closed (so that the peers notice at once) and every further
 * operation returns BRAID_ERR_STATE with the first error's message. */
braid_status_t braid_bootstrap_init(const braid_launch_t *launch,
                                    braid_bootstrap_t   **bs);
/* World channel of rank of size through a caller's key-value store (see
 * braid_init_kv). */
braid_status_t braid_bootstrap_init_kv(int rank, int size,
                                       const braid_kv_t   *kv,
                                       braid_bootstrap_t **bs);
/* Collective over parent: a new channel for the ranks sharing color, ranked by
 * (key, parent rank).  color == BRAID_UNDEFINED gives *child = NULL. */
braid_status_t braid_bootstrap_split(braid_bootstrap_t *parent, int color,
                                     int key, braid_bootstrap_t **child);
int            braid_bootstrap_rank(const braid_bootstrap_t *bs);
int            braid_bootstrap_size(const braid_bootstrap_t *bs);
/* recvbuf gets size*len bytes, rank r's at r*len.  Collective. */
braid_status_t braid_bootstrap_allgather(braid_bootstrap_t *bs,
                                         const void *sendbuf, void *recvbuf,
                                         size_t len);
braid_status_t braid_bootstrap_bcast(braid_bootstrap_t *bs, void *buf,
                                     size_t len, int root);
braid_status_t braid_bootstrap_barrier(braid_bootstrap_t *bs);
void           braid_bootstrap_destroy(braid_bootstrap_t *bs);

/* Failure detector: BRAID_OK while no rank of this channel is known to be
 * lost and no failure inquiry is asked for; otherwise the channel's failure
 * (BRAID_ERR_PEER naming the lost rank, "rank 3 (host h, pid p) was lost",
 * or, once a communicator set the inquiry hooks, the inquiry's verdict).
 * The root notices a rank whose connection ended, or a rank's report
 * asking for an inquiry, and runs one (or, without hooks, tells every
 * other rank in an ABORT frame); the others notice the root's QUERY (and
 * answer it), its ABORT, or the end of its connection.  The core calls it
 * from every wait loop every few milliseconds: unless there is something
 * to act on it does not block (an inquiry is bounded by its window), and
 * it never consumes a message of an operation in flight.  Once the channel
 * failed (here or in an operation), it returns that first error every time. */
braid_status_t braid_bootstrap_health(braid_bootstrap_t *bs);
/* The communicator over this channel failed on its own (a transport error,
 * a timeout): fail the channel too, so that every rank learns it at once
 * rather than at its own timeout.  The root sends every rank an ABORT with
 * msg; another rank sends it to the root, which then aborts for everyone
 * ("rank 2 (host h, pid p) failed: msg").  No-op if the channel already
 * failed.  Keeps the thread's last error. */
void braid_bootstrap_abort(braid_bootstrap_t *bs, braid_status_t status,
                           const char *msg);

/* Failure inquiry (inquiry.c).  When a call of the communicator fails or
 * times out, every rank tells the channel's root, in a report of the
 * communicator's making, how far it got; the root turns the reports into
 * one verdict and fails the channel with it, so that every rank reports
 * the same message.  A rank whose root does not answer judges alone from
 * what it sees.  The communicator sets the hooks once it is set up; until
 * then (and without them) failures travel as plain ABORT frames. */
enum {
    BRAID_INQ_PENDING = 0,
    BRAID_INQ_ANSWERED, /* its report is there */
    BRAID_INQ_SILENT,   /* connected, but no report within the window */
    BRAID_INQ_LOST,     /* its connection ended */
};

typedef struct braid_inquiry {
    void  *ctx;
    size_t report_len; /* bytes of every rank's report */
    /* This rank's report into buf.  st and text: its own failure, or
     * BRAID_OK and "" when it was asked. */
    void (*report)(void *ctx, void *buf, braid_status_t st, const char *text);
    /* Root: the verdict from the reports (rank r's at r * report_len where
     * state[r] is BRAID_INQ_ANSWERED, the root's own at 0): its message
     * into text, its status returned. */
    braid_status_t (*judge)(void *ctx, const void *reports,
                            const uint8_t *state, char *text, size_t len);
    /* A rank whose root is lost (BRAID_INQ_LOST) or silent: the verdict
     * from what it sees itself. */
    braid_status_t (*judge_alone)(void *ctx, int root_state, char *text,
                                  size_t len);
} braid_inquiry_t;

void braid_bootstrap_set_inquiry(braid_bootstrap_t     *bs,
                                 const braid_inquiry_t *inq);
/* A call failed here with st (braid_last_error() says how) or timed out:
 * run the inquiry and fail the channel with its verdict, which is returned
 * (status, and message as the last error).  Bounded: a few times
 * braid_inquiry_window_s(). */
braid_status_t braid_bootstrap_inquire(braid_bootstrap_t *bs,
                                       braid_status_t     st);
/* How long the root waits for reports: a quarter of BRAID_TIMEOUT, at
 * least 0.25 s and at most 2 s.  Ranks inside braid answer within
 * milliseconds; one that does not by then is named as not answering. */
double braid_inquiry_window_s(void);
/* Root: what it knows of rank r (pid 0 and host "" if nothing). */
void braid_bootstrap_ident(const braid_bootstrap_t *bs, int r, long *pid,
                           char *host, size_t host_len);

#endif
