/* braid-train: options, the training loop, and what it reports. */
#ifndef BRAID_TRAIN_TRAIN_H
#define BRAID_TRAIN_TRAIN_H

#include <stddef.h>

#include <braid/braid.h>

#include "data.h"
#include "gpt.h"

#define BRAID_TRAIN_MAX_SCALING 16

typedef struct braid_train_opts {
    braid_gpt_config_t cfg; /* from --preset or --config */
    char               model_name[64];
    int                model_given; /* --preset or --config was given */
    const char        *data_path;
    long               steps;   /* training ends at this step */
    long               stop_at; /* this run stops here; 0: steps */
    int                batch;   /* sequences per step, all ranks */
    int                micro;   /* per rank per forward pass; 0: auto */
    int                seq;     /* T (block_size unless given) */
    int                seq_given;
    float              lr, min_lr_frac, weight_decay, beta1, beta2, eps, clip;
    long               warmup; /* -1: auto */
    unsigned long long seed;
    double             val_frac;
    long               val_every; /* 0: at the end only */
    int                val_batches;
    int                overlap;
    size_t             bucket_bytes;
    long               check_every; /* 0: at the end only */
    int                threads;
    const char        *save_dir;
    long               save_every; /* 0: at the end only (with --save) */
    const char        *resume_dir;
    const char        *log_path;
    const char        *plot_path;
    int                scaling[BRAID_TRAIN_MAX_SCALING];
    int                nscaling;
    int                compare_overlap;
    int                rounds;
    long               log_every;
    int                quiet;
    long               diverge_step; /* testing: perturb the last rank */
} braid_train_opts_t;

/* Parses argv.  Returns 0 to run, 1 after --help, 2 on a usage error (the
 * message is printed). */
int braid_train_opts_parse(braid_train_opts_t *o, int argc, char **argv);

/* One step's figures, as rank 0 saw them. */
typedef struct braid_train_step {
    long   step; /* 1-based: the number of updates done */
    float  loss; /* mean over the global batch */
    float  val;  /* validation loss, NaN when not measured */
    float  lr, norm;
    double ms;      /* whole step */
    double wait_ms; /* waiting for the gradient all-reduce after backward */
    double poll_ms; /* in braid calls while the backward pass ran */
    double cpu_ms;  /* CPU time of this process during the step */
} braid_train_step_t;

typedef struct braid_train_result {
    int                 ranks;
    long                nsteps; /* steps run in this session */
    braid_train_step_t *steps;  /* (nsteps) */
    long                tokens_per_step;
    double              med_ms, med_wait_ms, med_poll_ms, med_cpu_ms;
    double              tok_s;     /* tokens_per_step / median step time */
    float               final_val; /* NaN if none */
} braid_train_result_t;

/* Trains on comm from the options (a resume, if asked) and fills res.
 * Collective over comm.  A scaling trial (trial set) prints, validates and
 * saves nothing; with idle != NULL it also joins an all-reduce on idle
 * after every step, with the ranks that sit this trial out (see
 * braid_train_idle). */
braid_status_t braid_train_run(braid_train_result_t     *res,
                               const braid_train_opts_t *o,
                               const braid_train_data_t *data,
                               braid_comm_t *comm, int trial,
                               braid_comm_t *idle);
/* What a rank outside a scaling trial does meanwhile: it joins those
 * per-step all-reduces on `world`, sleeping between tests, so that no wait
 * lasts longer than a step (BRAID_TIMEOUT bounds each one) and the idle
 * rank leaves its CPU to the others. */
braid_status_t braid_train_idle(braid_comm_t *world);
void           braid_train_result_free(braid_train_result_t *res);

#endif
