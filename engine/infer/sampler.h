/* Choosing the next token from the full logits[V]: greedy, or temperature
 * and top-p (nucleus) sampling with a seeded generator.  Every rank holds
 * the same logits (gathered) and the same generator state, so every rank
 * picks the same token without further communication. */
#ifndef BRAID_INFER_SAMPLER_H
#define BRAID_INFER_SAMPLER_H

#include <stdint.h>

#include "engine/common/util.h"

typedef struct {
    double          temperature; /* 0: greedy */
    double          top_p; /* (0, 1]: smallest set of tokens with this mass */
    braid_eng_rng_t rng;
    int64_t         vocab;
    float          *probs; /* [vocab] */
    int32_t        *order; /* [vocab] candidates, by probability */
} braid_infer_sampler_t;

braid_status_t braid_infer_sampler_init(braid_infer_sampler_t *s,
                                        int64_t vocab, double temperature,
                                        double top_p, uint64_t seed);
void           braid_infer_sampler_free(braid_infer_sampler_t *s);
/* The token drawn from logits[vocab] (temperature > 0). */
int32_t braid_infer_sample(braid_infer_sampler_t *s, const float *logits);

#endif
