/* Checkpoints of braid-train: a directory that Hugging Face's GPT-2 code
 * and braid-infer read as a model, plus what resuming needs.
 *
 *   config.json          GPT2Config (model_type "gpt2", n_layer, n_head,
 *                        n_embd, n_positions, vocab_size, ...)
 *   model.safetensors    the parameters, f32, under GPT-2's names; the
 *                        four matrices of a block are stored (in, out) as
 *                        GPT-2's Conv1D keeps them (in memory they are
 *                        (out, in)); the LM head is wte (tied, not stored)
 *   optim.safetensors    AdamW's moments, "exp_avg." / "exp_avg_sq." +
 *                        the parameter's name, laid out like the parameter
 *   train.json           step, AdamW's update count, seed, batch, and the
 *                        data it was trained on; written last, so a
 *                        directory with it is a complete checkpoint
 *
 * Every file is written to a temporary name and renamed. */
#ifndef BRAID_TRAIN_CKPT_H
#define BRAID_TRAIN_CKPT_H

#include <stdint.h>

#include <braid/braid.h>

#include "adamw.h"
#include "gpt.h"

/* What train.json records besides the tensors. */
typedef struct braid_train_ckpt_state {
    long               step;   /* updates done */
    long               adam_t; /* AdamW's update count */
    unsigned long long seed;
    int                batch, seq;
    uint64_t           data_bytes; /* corpus size and fingerprint */
    uint64_t           data_hash;
    float              loss; /* of the last step */
} braid_train_ckpt_state_t;

/* Writes the checkpoint into dir (created if missing). */
braid_status_t braid_train_ckpt_save(const char *dir, const braid_gpt_t *model,
                                     const braid_adamw_t            *opt,
                                     const braid_train_ckpt_state_t *state);

/* Reads dir/config.json (a GPT-2 configuration). */
braid_status_t braid_train_ckpt_config(braid_gpt_config_t *cfg,
                                       const char         *dir);

/* Fills model->params (and, when opt is not NULL, the moments from
 * optim.safetensors and *state from train.json; state may be NULL).  The
 * model must have the checkpoint's configuration. */
braid_status_t braid_train_ckpt_load(braid_gpt_t *model, braid_adamw_t *opt,
                                     braid_train_ckpt_state_t *state,
                                     const char               *dir);

#endif
