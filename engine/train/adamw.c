/* AdamW, gradient clipping, learning-rate schedule (see adamw.h). */
#include "adamw.h"

#include <math.h>
#include <stdlib.h>

#include "engine/common/err.h"
#include "engine/common/hot.h"

braid_status_t braid_adamw_create(braid_adamw_t *opt, size_t n, float beta1,
                                  float beta2, float eps, float weight_decay)
{
    *opt   = (braid_adamw_t){.beta1        = beta1,
                             .beta2        = beta2,
                             .eps          = eps,
                             .weight_decay = weight_decay,
                             .n            = n};
    opt->m = calloc(n, sizeof(float));
    opt->v = calloc(n, sizeof(float));
    if (opt->m == NULL || opt->v == NULL) {
        braid_adamw_free(opt);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY,
                              "out of memory for the "
                              "optimizer state of %zu parameters",
                              n);
    }
    return BRAID_OK;
}

void braid_adamw_free(braid_adamw_t *opt)
{
    free(opt->m);
    free(opt->v);
    opt->m = opt->v = NULL;
}

/* Every rank applies this update to the same averaged gradients, and the
 * results must be bitwise identical even on ranks whose CPUs differ: this
 * file is built without FMA contraction (meson.build), so each operation
 * rounds once whatever vector width its ISA clone uses. */
ENG_HOT
static void update_range(float *p, float *m, float *v, const float *g,
                         size_t n, float b1, float b2, float c1, float c2,
                         float eps, float lr, float wd)
{
    for (size_t j = 0; j < n; j++) {
        m[j]       = b1 * m[j] + (1.0f - b1) * g[j];
        v[j]       = b2 * v[j] + (1.0f - b2) * g[j] * g[j];
        float mhat = m[j] / c1, vhat = v[j] / c2;
        p[j] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[j]);
    }
}

void braid_adamw_update(braid_adamw_t *opt, braid_gpt_t *model, float lr)
{
    opt->t++;
    float b1 = opt->beta1, b2 = opt->beta2;
    float c1 = 1.0f - powf(b1, (float)opt->t); /* bias corrections */
    float c2 = 1.0f - powf(b2, (float)opt->t);
    for (int i = 0; i < model->ntensors; i++) {
        const braid_gpt_tensor_t *t  = &model->tensors[i];
        float                     wd = t->decay ? opt->weight_decay : 0.0f;
        float *p = model->params + t->offset, *g = model->grads + t->offset;
        float *m = opt->m + t->offset, *v = opt->v + t->offset;
        update_range(p, m, v, g, t->numel, b1, b2, c1, c2, opt->eps, lr, wd);
    }
}

float braid_train_lr(long step, long warmup, long total, float lr,
                     float min_frac)
{
    if (step < warmup)
        return lr * (float)(step + 1) / (float)warmup;
    if (step >= total || total <= warmup)
        return lr * min_frac;
    double ratio = (double)(step - warmup) / (double)(total - warmup);
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio)); /* 1 -> 0 */
    return lr * (float)(min_frac + coeff * (1.0 - min_frac));
}

/* Sum of squares in 8 lanes of doubles, added up in a fixed order: the
 * compiler may vectorise the lanes (each stays its own sum) but not
 * reorder them, so every rank gets the same norm. */
ENG_HOT
static double sum_squares(const float *x, size_t n)
{
    double lane[8] = {0};
    size_t i       = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += (double)x[i + l] * x[i + l];
    for (; i < n; i++)
        lane[0] += (double)x[i] * x[i];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

float braid_train_clip(float *grads, size_t n, float clip)
{
    double ss   = sum_squares(grads, n);
    float  norm = (float)sqrt(ss);
    if (clip > 0.0f && norm > clip) {
        float s = clip / norm;
        for (size_t i = 0; i < n; i++)
            grads[i] *= s;
    }
    return norm;
}
