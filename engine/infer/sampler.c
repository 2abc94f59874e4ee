/* Temperature and top-p sampling (see sampler.h). */
#include <math.h>
#include <stdlib.h>

#include "engine/common/err.h"
#include "engine/infer/sampler.h"

braid_status_t braid_infer_sampler_init(braid_infer_sampler_t *s,
                                        int64_t vocab, double temperature,
                                        double top_p, uint64_t seed)
{
    s->temperature = temperature;
    s->top_p       = top_p;
    s->rng.state   = braid_eng_mix64(seed ^ 0x5a4d504c4552ull);
    s->vocab       = vocab;
    s->probs       = malloc((size_t)vocab * sizeof(float));
    s->order       = malloc((size_t)vocab * sizeof(int32_t));
    if (!s->probs || !s->order) {
        braid_infer_sampler_free(s);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    }
    return BRAID_OK;
}

void braid_infer_sampler_free(braid_infer_sampler_t *s)
{
    free(s->probs);
    free(s->order);
    s->probs = NULL;
    s->order = NULL;
}

/* Descending probability, then ascending id: a total order, so qsort's
 * result does not depend on its algorithm. */
static int by_prob(const void *a, const void *b, void *probs)
{
    const float *p = probs;
    int32_t      x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (p[x] != p[y])
        return p[x] > p[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

int32_t braid_infer_sample(braid_infer_sampler_t *s, const float *logits)
{
    int64_t V    = s->vocab;
    float   best = -INFINITY;
    for (int64_t i = 0; i < V; i++)
        best = fmaxf(best, logits[i]);
    double sum = 0;
    for (int64_t i = 0; i < V; i++) {
        s->probs[i] = expf((float)((logits[i] - best) / s->temperature));
        sum += s->probs[i];
    }
    for (int64_t i = 0; i < V; i++)
        s->probs[i] = (float)(s->probs[i] / sum);

    /* Only tokens at least (1 - top_p) / (V - 1) likely can be in the
     * nucleus (the rest together have less than 1 - top_p), so sort just
     * those: a few hundred instead of the whole vocabulary. */
    float   floor = V > 1 ? (float)((1.0 - s->top_p) / (double)(V - 1)) : 0;
    int64_t n     = 0;
    for (int64_t i = 0; i < V; i++)
        if (s->probs[i] >= floor)
            s->order[n++] = (int32_t)i;
    qsort_r(s->order, (size_t)n, sizeof(int32_t), by_prob, s->probs);
    double  mass = 0;
    int64_t keep = n;
    for (int64_t i = 0; i < n; i++) {
        mass += s->probs[s->order[i]];
        if (mass >= s->top_p) {
            keep = i + 1;
            break;
        }
    }
    double r   = braid_eng_rng_next(&s->rng) * mass; /* within the kept mass */
    double acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += s->probs[s->order[i]];
        if (r < acc)
            return s->order[i];
    }
    return s->order[keep - 1];
}
