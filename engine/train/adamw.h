/* AdamW with decoupled weight decay, global-norm gradient clipping and a
 * warmup-then-cosine learning rate. */
#ifndef BRAID_TRAIN_ADAMW_H
#define BRAID_TRAIN_ADAMW_H

#include <stddef.h>

#include "gpt.h"

typedef struct braid_adamw {
    float  beta1, beta2, eps, weight_decay;
    size_t n;
    float *m, *v; /* (n) first and second moments, laid out like params */
    long   t;     /* updates done: the bias corrections depend on it */
} braid_adamw_t;

braid_status_t braid_adamw_create(braid_adamw_t *opt, size_t n, float beta1,
                                  float beta2, float eps, float weight_decay);
void           braid_adamw_free(braid_adamw_t *opt);

/* One update of model->params from model->grads.  Weight decay applies to
 * the tensors marked decay (matrices and embeddings), not to biases and
 * norms. */
void braid_adamw_update(braid_adamw_t *opt, braid_gpt_t *model, float lr);

/* Learning rate of step (0-based): linear warmup over `warmup` steps to
 * lr, then a cosine down to lr * min_frac at step `total`. */
float braid_train_lr(long step, long warmup, long total, float lr,
                     float min_frac);

/* The gradients' global L2 norm; if above clip (> 0), scales them down to
 * it.  Returns the norm before clipping. */
float braid_train_clip(float *grads, size_t n, float clip);

#endif
