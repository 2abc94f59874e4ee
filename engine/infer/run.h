/* braid-infer's state for one run, shared by the command line (main.c)
 * and the report (report.c). */
#ifndef BRAID_INFER_RUN_H
#define BRAID_INFER_RUN_H

#include <stdint.h>
#include <stdio.h>

#include <braid/braid.h>

#include "engine/common/pool.h"
#include "engine/common/tokenizer.h"
#include "engine/infer/config.h"
#include "engine/infer/model.h"
#include "engine/infer/sampler.h"
#include "engine/infer/weights.h"

typedef struct {
    const char   *model, *preset, *prompt, *prompt_ids, *tokenizer;
    const char   *save, *dump_logits, *json_path;
    int64_t       prompt_len, gen, ctx, chunk, threads, shards;
    double        temperature, top_p;
    uint64_t      seed;
    braid_dtype_t dtype; /* BRAID_DTYPE_COUNT: as in the checkpoint */
    int           json, ignore_eos;
} braid_infer_opts_t;

typedef struct {
    braid_infer_opts_t    o;
    braid_comm_t         *comm;
    int                   rank, size, local_ranks, threads;
    braid_infer_config_t  cfg;
    braid_infer_split_t   sp;
    braid_infer_weights_t w;
    int                   have_w;
    braid_eng_tok_t      *tok;
    braid_eng_pool_t     *pool;
    braid_infer_model_t   m;
    int                   have_m;
    braid_infer_sampler_t smp;
    int32_t              *prompt;
    size_t                n_prompt;
    int32_t              *out; /* generated ids */
    int64_t               n_out;
    double                load_s;
    int                   dumping; /* --dump-logits: gather every row */
    FILE                 *dump;    /* rank 0 writes them */
    float                *full;    /* gathered logits */
} braid_infer_run_t;

/* Gathers every rank's timings and memory and has rank 0 print them (text,
 * or JSON with --json): t = {prefill, decode} seconds, phase = the model's
 * collective statistics of each. */
braid_status_t braid_infer_report(braid_infer_run_t *r, const double t[2],
                                  const braid_infer_stats_t phase[2]);

#endif
