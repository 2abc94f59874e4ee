/* AdamW, gradient clipping, learning-rate schedule (see adamw.h). */
#include "adamw.h"

#include <math.h>
#include <stdlib.h>

#include "engine/common/err.h"
#include "util.h"

braid_status_t braid_adamw_create(braid_adamw_t *opt, size_t n, float beta1,
                                  float beta2, float eps, float weight_decay)
{
    *opt = (braid_adamw_t){.beta1 = beta1, .beta2 = beta2, .eps = eps,
                           .weight_decay = weight_decay, .n = n};
    opt->m = calloc(n, sizeof(float));
    opt->v = calloc(n, sizeof(float));
    if (opt->m == NULL || opt->v == NULL) {
        braid_adamw_free(opt);
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory for the "
                                 "optimizer state of %zu parameters", n);
    }
    return BRAID_OK;
}

void braid_adamw_free(braid_adamw_t *opt)
{
    free(opt->m);
    free(opt->v);
    opt->m = opt->v = NULL;
}

void braid_adamw_update(braid_adamw_t *opt, braid_gpt_t *model, float lr)
{
    opt->t++;
    float b1 = opt->beta1, b2 = opt->beta2;
    float c1 = 1.0f - powf(b1, (float)opt->t); /* bias corrections */
    float c2 = 1.0f - powf(b2, (float)opt->t);
    for (int i = 0; i < model->ntensors; i++) {
        const braid_gpt_tensor_t *t = &model->tensors[i];
        float wd = t->decay ? opt->weight_decay : 0.0f;
        float *p = model->params + t->offset, *g = model->grads + t->offset;
        float *m = opt->m + t->offset, *v = opt->v + t->offset;
        for (size_t j = 0; j < t->numel; j++) {
            m[j] = b1 * m[j] + (1.0f - b1) * g[j];
            v[j] = b2 * v[j] + (1.0f - b2) * g[j] * g[j];
            float mhat = m[j] / c1, vhat = v[j] / c2;
            p[j] -= lr * (mhat / (sqrtf(vhat) + opt->eps) + wd * p[j]);
        }
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

float braid_train_clip(float *grads, size_t n, float clip)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (double)grads[i] * grads[i];
    float norm = (float)sqrt(ss);
    if (clip > 0.0f && norm > clip) {
        float s = clip / norm;
        for (size_t i = 0; i < n; i++)
            grads[i] *= s;
    }
    return norm;
}
