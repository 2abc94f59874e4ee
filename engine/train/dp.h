/* Data parallelism: gradients are averaged over the ranks with braid's
 * all-reduce, bucket by bucket while the backward pass runs.
 *
 * Buckets are contiguous ranges of the flat gradient array, cut from its
 * end (where the backward pass starts, see gpt.h) in pieces of
 * bucket_bytes.  A bucket goes out with braid_iallreduce, in place, as soon
 * as the backward pass reports every gradient in it final; between pieces
 * of backward work (nn.h's poll hook) the pending requests are tested in
 * issue order, which is when braid moves them on (it has no progress thread
 * of its own): on a host where every core computes, that is the cheapest
 * time to give communication the CPU.  finish() sends what is left and
 * waits for all of it.  Without overlap, finish() does a single all-reduce
 * of the whole array after the backward pass, for comparison. */
#ifndef BRAID_TRAIN_DP_H
#define BRAID_TRAIN_DP_H

#include <stddef.h>

#include <braid/braid.h>

typedef struct braid_train_bucket {
    size_t           lo, hi; /* elements [lo, hi) of the gradient array */
    braid_request_t *req;    /* in flight, or NULL */
    int              sent, done;
} braid_train_bucket_t;

typedef struct braid_train_dp {
    braid_comm_t         *comm;
    float                *grads;
    size_t                n;
    int                   overlap;
    int                   active; /* this backward pass sends buckets */
    int                   nbuckets;
    braid_train_bucket_t *b;         /* b[0] is the last range of the array */
    int                   next_send; /* first bucket not sent */
    int                   next_done; /* first bucket not complete */
    braid_status_t        err;       /* first failure (hooks cannot return) */
    double                t_poll;    /* seconds in braid calls during the
                                        backward pass (posting, testing) */
    double t_wait;                   /* seconds waiting in finish() */
} braid_train_dp_t;

braid_status_t braid_train_dp_create(braid_train_dp_t *dp, braid_comm_t *comm,
                                     float *grads, size_t n,
                                     size_t bucket_bytes, int overlap);
void           braid_train_dp_free(braid_train_dp_t *dp);

/* Prints, for n gradients in buckets of bucket_bytes (or one all-reduce
 * without overlap), the candidate braid's dispatcher picks for each message
 * size and why.  Any rank of comm may call it; it communicates nothing. */
void braid_train_dp_print_choices(braid_comm_t *comm, size_t n,
                                  size_t bucket_bytes, int overlap,
                                  const char *indent);

/* Before the backward pass that completes this step's gradients: resets
 * the buckets and installs the poll hook (overlap only). */
void braid_train_dp_begin(braid_train_dp_t *dp);
/* braid_gpt_ready_fn: sends every bucket lying at or above offset. */
void braid_train_dp_ready(void *dp, size_t offset);
/* Sends what is left, waits for everything, removes the poll hook.  The
 * gradients are then the average over the ranks, identical on all. */
braid_status_t braid_train_dp_finish(braid_train_dp_t *dp);

#endif
