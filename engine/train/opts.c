/* braid-train's command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/common/err.h"
#include "train.h"
#include "util.h"

static const char usage[] =
    "usage: braid-train --data PATH [options]    (under braidrun, mpirun, "
    "...)\n"
    "\n"
    "Data-parallel GPT pretraining on byte-level text.  Gradients are "
    "averaged\n"
    "over the ranks with braid's all-reduce, bucket by bucket while the\n"
    "backward pass runs.\n"
    "\n"
    "model and data\n"
    "  --data PATH         text file, or directory of them (required)\n"
    "  --preset NAME       tiny, or dN: N layers, N heads, 64N channels, "
    "block\n"
    "                      1024 (d12 = GPT-2 small's size)   [tiny]\n"
    "  --config FILE       model from JSON {\"n_layer\":..,\"n_head\":..,\n"
    "                      "
    "\"n_embd\":..,\"block_size\":..[,\"vocab_size\":256]}\n"
    "  --seq T             tokens per sequence                [block_size]\n"
    "  --val-frac F        held-out share of the data        [0.1]\n"
    "  --val-every K       validation loss every K steps     [at the end]\n"
    "  --val-batches N     global batches per validation     [4]\n"
    "optimisation\n"
    "  --steps N           train until step N (the schedule's end) [20]\n"
    "  --stop-at S         stop this run after step S (resume later) [N]\n"
    "  --batch N           sequences per step, all ranks     [8]\n"
    "  --micro N           sequences per forward pass and rank (the rest is\n"
    "                      gradient accumulation)            [batch/ranks]\n"
    "  --lr X              peak learning rate                [1e-3]\n"
    "  --warmup N          linear warmup steps, then cosine  [steps/10]\n"
    "  --min-lr-frac X     final learning rate / peak        [0.1]\n"
    "  --wd X              AdamW weight decay (matrices)     [0.1]\n"
    "  --beta1 X --beta2 X --eps X                           [0.9 0.95 1e-8]\n"
    "  --clip X            clip the gradient norm to X, 0 off [1.0]\n"
    "  --seed N            initialisation and data order     [1337]\n"
    "parallelism\n"
    "  --bucket-mb X       gradient bucket size in MiB       [4]\n"
    "  --no-overlap        one all-reduce after the backward pass instead\n"
    "  --check-every K     compare parameters and optimizer state across "
    "ranks\n"
    "                      every K steps; fail if they differ [at the end]\n"
    "  --threads N         OpenBLAS threads per rank          [1]\n"
    "checkpoints and output\n"
    "  --save DIR          write a checkpoint to DIR (model.safetensors,\n"
    "                      optim.safetensors, train.json) at the end\n"
    "  --save-every K      ... and every K steps\n"
    "  --resume DIR        continue from a checkpoint\n"
    "  --log FILE          per-step CSV (rank 0)\n"
    "  --plot FILE.png     plot the loss curve with gnuplot at the end\n"
    "  --log-every K       print every K steps                [1]\n"
    "  --quiet             no per-step output\n"
    "scaling (weak: --micro sequences per rank and step in every trial)\n"
    "  --scaling LIST      train on the first n ranks for each n in LIST "
    "(e.g.\n"
    "                      1,2), alternating, --rounds times; print "
    "tokens/s,\n"
    "                      speedup and scaling efficiency per rank count\n"
    "  --compare-overlap   also run every count above 1 with --no-overlap\n"
    "  --rounds N                                             [3]\n"
    "testing\n"
    "  --inject-divergence S  the last rank perturbs a parameter after step "
    "S\n";

static int bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr,
            "braid-train: %s '%s': %s\n(braid-train --help lists "
            "the options)\n",
            opt, val, why);
    return 2;
}

/* engine/common's parsers name the option and the offending text */
static int parsed(braid_status_t st)
{
    if (st == BRAID_OK)
        return 0;
    fprintf(stderr,
            "braid-train: %s\n(braid-train --help lists the "
            "options)\n",
            braid_eng_error());
    return 2;
}

static int parse_long(long *out, const char *opt, const char *s, long lo,
                      long hi)
{
    int64_t v;
    int     rc = parsed(braid_eng_parse_int(&v, s, lo, hi, 0, opt));
    if (rc == 0)
        *out = (long)v;
    return rc;
}

static int parse_int(int *out, const char *opt, const char *s, long lo,
                     long hi)
{
    long v;
    int  rc = parse_long(&v, opt, s, lo, hi);
    if (rc == 0)
        *out = (int)v;
    return rc;
}

static int parse_float(float *out, const char *opt, const char *s, double lo,
                       double hi)
{
    double v;
    int    rc = parsed(braid_eng_parse_double(&v, s, lo, hi, opt));
    if (rc == 0)
        *out = (float)v;
    return rc;
}

static int parse_list(braid_train_opts_t *o, const char *s)
{
    int32_t *ids;
    size_t   n;
    if (parsed(braid_eng_parse_ids(&ids, &n, s, 1 << 20, "--scaling")) != 0)
        return 2;
    int rc = 0;
    if (n > BRAID_TRAIN_MAX_SCALING)
        rc = bad("--scaling", s, "at most 16 rank counts");
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ids[i] == 0)
            rc = bad("--scaling", s, "rank counts start at 1");
        for (size_t j = 0; j < i && rc == 0; j++)
            if (ids[j] == ids[i])
                rc = bad("--scaling", s, "a rank count is repeated");
        o->scaling[i] = ids[i];
    }
    o->nscaling = rc == 0 ? (int)n : 0;
    free(ids);
    return rc;
}

int braid_train_opts_parse(braid_train_opts_t *o, int argc, char **argv)
{
    *o = (braid_train_opts_t){
        .steps        = 20,
        .batch        = 8,
        .lr           = 1e-3f,
        .min_lr_frac  = 0.1f,
        .weight_decay = 0.1f,
        .beta1        = 0.9f,
        .beta2        = 0.95f,
        .eps          = 1e-8f,
        .clip         = 1.0f,
        .warmup       = -1,
        .seed         = 1337,
        .val_frac     = 0.1,
        .val_batches  = 4,
        .overlap      = 1,
        .bucket_bytes = (size_t)4 << 20,
        .threads      = 1,
        .rounds       = 3,
        .log_every    = 1,
        .diverge_step = -1,
    };
    const char *preset = NULL, *config = NULL;
    int         rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        /* flags */
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (strcmp(a, "--no-overlap") == 0) {
            o->overlap = 0;
            continue;
        }
        if (strcmp(a, "--compare-overlap") == 0) {
            o->compare_overlap = 1;
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
            continue;
        }
        /* options with a value */
        if (strncmp(a, "--", 2) != 0)
            return bad("argument", a, "not an option");
        if (i + 1 >= argc)
            return bad(a, "", "needs a value");
        const char *v = argv[++i];
        float       f = 0;
        if (strcmp(a, "--data") == 0)
            o->data_path = v;
        else if (strcmp(a, "--preset") == 0)
            preset = v;
        else if (strcmp(a, "--config") == 0)
            config = v;
        else if (strcmp(a, "--seq") == 0)
            rc = parse_int(&o->seq, a, v, 1, 65536);
        else if (strcmp(a, "--val-frac") == 0) {
            rc          = parse_float(&f, a, v, 0, 0.9);
            o->val_frac = f;
        } else if (strcmp(a, "--val-every") == 0)
            rc = parse_long(&o->val_every, a, v, 0, 1L << 40);
        else if (strcmp(a, "--val-batches") == 0)
            rc = parse_int(&o->val_batches, a, v, 1, 1 << 20);
        else if (strcmp(a, "--steps") == 0)
            rc = parse_long(&o->steps, a, v, 1, 1L << 40);
        else if (strcmp(a, "--stop-at") == 0)
            rc = parse_long(&o->stop_at, a, v, 1, 1L << 40);
        else if (strcmp(a, "--batch") == 0)
            rc = parse_int(&o->batch, a, v, 1, 1 << 20);
        else if (strcmp(a, "--micro") == 0)
            rc = parse_int(&o->micro, a, v, 1, 1 << 20);
        else if (strcmp(a, "--lr") == 0)
            rc = parse_float(&o->lr, a, v, 0, 10);
        else if (strcmp(a, "--warmup") == 0)
            rc = parse_long(&o->warmup, a, v, 0, 1L << 40);
        else if (strcmp(a, "--min-lr-frac") == 0)
            rc = parse_float(&o->min_lr_frac, a, v, 0, 1);
        else if (strcmp(a, "--wd") == 0)
            rc = parse_float(&o->weight_decay, a, v, 0, 10);
        else if (strcmp(a, "--beta1") == 0)
            rc = parse_float(&o->beta1, a, v, 0, 0.999999);
        else if (strcmp(a, "--beta2") == 0)
            rc = parse_float(&o->beta2, a, v, 0, 0.999999);
        else if (strcmp(a, "--eps") == 0)
            rc = parse_float(&o->eps, a, v, 1e-30, 1);
        else if (strcmp(a, "--clip") == 0)
            rc = parse_float(&o->clip, a, v, 0, 1e30);
        else if (strcmp(a, "--seed") == 0) {
            long seed;
            rc      = parse_long(&seed, a, v, 0, (long)(~0UL >> 1));
            o->seed = (unsigned long long)seed;
        } else if (strcmp(a, "--bucket-mb") == 0) {
            rc              = parse_float(&f, a, v, 1.0 / 1024, 4096);
            o->bucket_bytes = (size_t)((double)f * (1 << 20));
        } else if (strcmp(a, "--check-every") == 0)
            rc = parse_long(&o->check_every, a, v, 0, 1L << 40);
        else if (strcmp(a, "--threads") == 0)
            rc = parse_int(&o->threads, a, v, 1, 1024);
        else if (strcmp(a, "--save") == 0)
            o->save_dir = v;
        else if (strcmp(a, "--save-every") == 0)
            rc = parse_long(&o->save_every, a, v, 0, 1L << 40);
        else if (strcmp(a, "--resume") == 0)
            o->resume_dir = v;
        else if (strcmp(a, "--log") == 0)
            o->log_path = v;
        else if (strcmp(a, "--plot") == 0)
            o->plot_path = v;
        else if (strcmp(a, "--log-every") == 0)
            rc = parse_long(&o->log_every, a, v, 1, 1L << 40);
        else if (strcmp(a, "--scaling") == 0)
            rc = parse_list(o, v);
        else if (strcmp(a, "--rounds") == 0)
            rc = parse_int(&o->rounds, a, v, 1, 1000);
        else if (strcmp(a, "--inject-divergence") == 0)
            rc = parse_long(&o->diverge_step, a, v, 1, 1L << 40);
        else
            return bad("option", a, "unknown");
    }
    if (rc != 0)
        return rc;
    if (o->data_path == NULL)
        return bad("--data", "", "required: a text file or a directory");
    if (preset != NULL && config != NULL)
        return bad("--config", config, "give --preset or --config, not both");
    braid_status_t st =
        config != NULL
            ? braid_gpt_config_json(&o->cfg, config)
            : braid_gpt_config_preset(&o->cfg, preset ? preset : "tiny");
    if (st != BRAID_OK) {
        fprintf(stderr, "braid-train: %s\n", braid_eng_error());
        return 2;
    }
    o->model_given = preset != NULL || config != NULL;
    snprintf(o->model_name, sizeof(o->model_name), "%s",
             config != NULL ? config
             : preset       ? preset
                            : "tiny");
    o->seq_given = o->seq != 0;
    if (o->seq == 0)
        o->seq = o->cfg.block_size;
    /* a resumed model's block size is known only later (main.c) */
    if (o->seq > o->cfg.block_size && (o->model_given || !o->resume_dir)) {
        char val[32];
        snprintf(val, sizeof(val), "%d", o->seq);
        return bad("--seq", val, "longer than the model's block_size");
    }
    if (o->warmup < 0)
        o->warmup = o->steps / 10;
    if (o->save_every > 0 && o->save_dir == NULL)
        return bad("--save-every", "", "needs --save DIR");
    return 0;
}
