/* Training data: byte-level tokens from a text file or a directory of them.
 *
 * A file is mapped; the files of a directory (in path order, hidden files
 * skipped) are read and concatenated.  The first (1 - val_frac) of the
 * bytes train, the rest is held out for validation.  Training sequences
 * are windows of T+1 bytes (inputs and next-byte targets) at offsets drawn
 * from the seed, the step and the sequence's index in the global batch,
 * so a batch does not depend on the number of ranks that share it, each
 * rank reads only its own slice, and a resumed run needs nothing but the
 * step to continue where it stopped (as nanoGPT samples, with
 * replacement). */
#ifndef BRAID_TRAIN_DATA_H
#define BRAID_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include <braid/braid.h>

typedef struct braid_train_data {
    unsigned char *bytes;
    size_t         n;      /* corpus bytes */
    size_t         ntrain; /* bytes [0, ntrain) train, [ntrain, n) validate */
    int            nfiles;
    int            mapped; /* a single file, mapped read-only */
} braid_train_data_t;

/* Reads path (file or directory).  Needs at least T+1 training bytes and,
 * when val_frac > 0, T+1 validation bytes. */
braid_status_t braid_train_data_open(braid_train_data_t *d, const char *path,
                                     double val_frac, int T);
void           braid_train_data_close(braid_train_data_t *d);

/* Sequences [first, first + count) of the global batch of `step`:
 * inputs and targets (count, T). */
void braid_train_data_batch(const braid_train_data_t *d, int *inputs,
                            int *targets, uint64_t seed, long step, long first,
                            int count, int T);

/* Validation windows [first, first + count) of `total`, spread evenly over
 * the held-out bytes (overlapping if the split is short). */
void braid_train_data_val(const braid_train_data_t *d, int *inputs,
                          int *targets, long first, int count, long total,
                          int T);

#endif
