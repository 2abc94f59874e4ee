/* braid-infer: tensor-parallel inference of a Qwen3-style model, or of a
 * GPT-2 that braid-train trained, on braid.
 *
 *   braidrun -n 2 braid-infer --model DIR --prompt "text" -g 32
 *   braidrun -n 2 braid-infer --preset tiny --prompt-ids 1,2,3 -g 16
 *   braidrun -n 2 braid-infer --model TRAINED_CKPT --prompt "text" -g 64
 *
 * Every rank loads its shard of the weights, prefills the prompt, then
 * decodes one token at a time; rank 0 prints the text (or ids), prefill and
 * decode speed, the share of time inside braid collectives and the
 * candidate that served each all-reduce size.  See docs/engines.md. */
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <braid/braid.h>
#include <cjson/cJSON.h>

#include "engine/common/dtype.h"
#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/linalg.h"
#include "engine/common/pool.h"
#include "engine/common/safetensors.h"
#include "engine/common/tokenizer.h"
#include "engine/common/util.h"
#include "engine/infer/config.h"
#include "engine/infer/gpt.h"
#include "engine/infer/model.h"
#include "engine/infer/run.h"
#include "engine/infer/sampler.h"
#include "engine/infer/weights.h"

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: braid-infer (--model DIR | --preset NAME) [options]\n"
        "  --model DIR          Hugging Face checkpoint: config.json, "
        "model.safetensors\n"
        "                       (or model.safetensors.index.json and its "
        "shards),\n"
        "                       tokenizer.json for --prompt; Qwen3, or GPT-2 "
        "as\n"
        "                       braid-train --save writes it (bytes for "
        "tokens)\n"
        "  --preset NAME        tiny | qwen3-0.6b: weights generated from "
        "--seed\n"
        "  --prompt TEXT        prompt text (needs a tokenizer.json, but for\n"
        "                       braid-train's byte-level GPT-2)\n"
        "  --prompt-ids LIST    prompt token ids: 1,2,3\n"
        "  -p, --prompt-len N   a generated prompt of N token ids "
        "(benchmarks)\n"
        "  -g, --gen N          tokens to generate (default 16)\n"
        "  --temperature T      0 = greedy (default); > 0 samples\n"
        "  --top-p P            nucleus sampling mass in (0, 1] (default 1)\n"
        "  --seed S             preset weights, sampling, generated prompt "
        "(default 1)\n"
        "  --dtype T            keep weight matrices as f32, bf16 or f16 "
        "(default: as\n"
        "                       stored; presets: their torch_dtype)\n"
        "  --threads N          threads per rank (default: this rank's CPUs / "
        "ranks\n"
        "                       on this host, at least 1)\n"
        "  --ctx N              KV cache positions (default: prompt + "
        "generated)\n"
        "  --chunk N            prompt tokens per prefill step (default 256)\n"
        "  --ignore-eos         go on past an end-of-sequence token\n"
        "  --tokenizer FILE     tokenizer.json other than the model's\n"
        "  --json[=FILE]        one JSON object on stdout (or in FILE), rank "
        "0\n"
        "  --save DIR           write the preset as a checkpoint to DIR and "
        "exit\n"
        "  --shards K           with --save: K safetensors files and an "
        "index\n"
        "  --dump-logits FILE   f32 logits of every prompt position and "
        "decode step\n"
        "  -h, --help           this text\n");
}

enum {
    O_MODEL = 256,
    O_PRESET,
    O_PROMPT,
    O_IDS,
    O_TEMP,
    O_TOPP,
    O_SEED,
    O_DTYPE,
    O_THREADS,
    O_CTX,
    O_CHUNK,
    O_EOS,
    O_TOK,
    O_JSON,
    O_SAVE,
    O_SHARDS,
    O_DUMP
};

static int parse_opts(braid_infer_opts_t *o, int argc, char **argv)
{
    static const struct option lo[] = {{"model", 1, 0, O_MODEL},
                                       {"preset", 1, 0, O_PRESET},
                                       {"prompt", 1, 0, O_PROMPT},
                                       {"prompt-ids", 1, 0, O_IDS},
                                       {"prompt-len", 1, 0, 'p'},
                                       {"gen", 1, 0, 'g'},
                                       {"temperature", 1, 0, O_TEMP},
                                       {"top-p", 1, 0, O_TOPP},
                                       {"seed", 1, 0, O_SEED},
                                       {"dtype", 1, 0, O_DTYPE},
                                       {"threads", 1, 0, O_THREADS},
                                       {"ctx", 1, 0, O_CTX},
                                       {"chunk", 1, 0, O_CHUNK},
                                       {"ignore-eos", 0, 0, O_EOS},
                                       {"tokenizer", 1, 0, O_TOK},
                                       {"json", 2, 0, O_JSON},
                                       {"save", 1, 0, O_SAVE},
                                       {"shards", 1, 0, O_SHARDS},
                                       {"dump-logits", 1, 0, O_DUMP},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    memset(o, 0, sizeof(*o));
    o->gen = 16, o->chunk = 256, o->top_p = 1.0, o->seed = 1, o->shards = 1;
    o->prompt_len = -1;
    o->dtype      = BRAID_DTYPE_COUNT;
    int            c;
    int64_t        v;
    braid_status_t s = BRAID_OK;
    opterr           = 0;
    while (s == BRAID_OK &&
           (c = getopt_long(argc, argv, "p:g:h", lo, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_PRESET: o->preset = optarg; break;
        case O_PROMPT: o->prompt = optarg; break;
        case O_IDS: o->prompt_ids = optarg; break;
        case O_TOK: o->tokenizer = optarg; break;
        case O_SAVE: o->save = optarg; break;
        case O_DUMP: o->dump_logits = optarg; break;
        case O_EOS: o->ignore_eos = 1; break;
        case O_JSON: o->json = 1, o->json_path = optarg; break;
        case 'p':
            s = braid_eng_parse_int(&o->prompt_len, optarg, 1, 1 << 24, 1,
                                    "--prompt-len");
            break;
        case 'g':
            s = braid_eng_parse_int(&o->gen, optarg, 0, 1 << 24, 1, "--gen");
            break;
        case O_CTX:
            s = braid_eng_parse_int(&o->ctx, optarg, 1, 1 << 26, 1, "--ctx");
            break;
        case O_CHUNK:
            s = braid_eng_parse_int(&o->chunk, optarg, 1, 1 << 16, 1,
                                    "--chunk");
            break;
        case O_THREADS:
            s = braid_eng_parse_int(&o->threads, optarg, 1, 1024, 0,
                                    "--threads");
            break;
        case O_SHARDS:
            s = braid_eng_parse_int(&o->shards, optarg, 1, 9999, 0,
                                    "--shards");
            break;
        case O_SEED:
            s = braid_eng_parse_int(&v, optarg, 0, INT64_MAX, 0, "--seed");
            o->seed = (uint64_t)v;
            break;
        case O_TEMP:
            s = braid_eng_parse_double(&o->temperature, optarg, 0, 100,
                                       "--temperature");
            break;
        case O_TOPP:
            s = braid_eng_parse_double(&o->top_p, optarg, 1e-9, 1, "--top-p");
            break;
        case O_DTYPE:
            if (braid_eng_dtype_parse(optarg, &o->dtype) != 0)
                s = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                   "--dtype: '%s' is not f32, bf16 or f16",
                                   optarg);
            break;
        case 'h': usage(stdout); exit(0);
        default:
            s = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                               "unknown or incomplete "
                               "option '%s'",
                               argv[optind - 1]);
        }
    }
    if (s == BRAID_OK && optind < argc)
        s = braid_eng_fail(BRAID_ERR_INVALID_ARG, "unexpected argument '%s'",
                           argv[optind]);
    if (s == BRAID_OK && !o->model == !o->preset)
        s = braid_eng_fail(BRAID_ERR_INVALID_ARG,
                           "give one of --model DIR and --preset NAME");
    if (s == BRAID_OK && !o->save &&
        (o->prompt != NULL) + (o->prompt_ids != NULL) + (o->prompt_len > 0) !=
            1)
        s = braid_eng_fail(
            BRAID_ERR_INVALID_ARG,
            "give one of --prompt, --prompt-ids and --prompt-len");
    if (s == BRAID_OK && o->save && !o->preset)
        s = braid_eng_fail(BRAID_ERR_INVALID_ARG, "--save writes a --preset");
    if (s != BRAID_OK) {
        fprintf(stderr, "braid-infer: %s\n", braid_eng_error());
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- setup */

/* Ranks sharing this host (same host name), for the default thread count. */
static braid_status_t count_local_ranks(braid_infer_run_t *r)
{
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    int64_t  mine = (int64_t)braid_eng_hash_str(host);
    int64_t *all  = malloc((size_t)r->size * sizeof(int64_t));
    if (!all)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t s = braid_allgather(&mine, all, 1, BRAID_I64, r->comm);
    r->local_ranks   = 0;
    for (int i = 0; s == BRAID_OK && i < r->size; i++)
        r->local_ranks += all[i] == mine;
    free(all);
    return s == BRAID_OK ? BRAID_OK
                         : braid_eng_fail_braid(s, "allgather of host names");
}

static braid_status_t setup_threads(braid_infer_run_t *r)
{
    cpu_set_t set;
    int       cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                         ? CPU_COUNT(&set)
                         : (int)sysconf(_SC_NPROCESSORS_ONLN);
    r->threads     = (int)r->o.threads;
    if (!r->threads) {
        r->threads = cpus / (r->local_ranks > 0 ? r->local_ranks : 1);
        if (r->threads < 1)
            r->threads = 1;
    }
    /* Explicit, so that OPENBLAS_NUM_THREADS or the core count does not
     * decide for us: sgemm runs on exactly the rank's threads. */
    braid_eng_blas_threads(r->threads);
    return braid_eng_pool_new(&r->pool, r->threads);
}

static braid_status_t setup_model(braid_infer_run_t *r)
{
    braid_status_t s;
    char           path[4096];
    if (r->o.model) {
        if ((s = braid_eng_path_join(path, sizeof(path), r->o.model,
                                     "config.json")) ||
            (s = braid_infer_config_load(&r->cfg, path)))
            return s;
        snprintf(r->cfg.name, sizeof(r->cfg.name), "%s", r->o.model);
        if ((s = braid_eng_path_join(path, sizeof(path), r->o.model,
                                     "generation_config.json")) ||
            (access(path, R_OK) == 0 &&
             (s = braid_infer_config_add_eos(&r->cfg, path))))
            return s;
    } else if ((s = braid_infer_config_preset(&r->cfg, r->o.preset)) !=
               BRAID_OK) {
        return s;
    }
    if ((s = braid_infer_split(&r->sp, &r->cfg, r->rank, r->size)) != BRAID_OK)
        return s;
    int gpt = r->cfg.arch == BRAID_INFER_GPT2;
    if (gpt && r->o.dtype != BRAID_DTYPE_COUNT && r->o.dtype != BRAID_F32)
        return braid_eng_fail(BRAID_ERR_NOT_SUPPORTED,
                              "--dtype %s: a GPT-2 runs in f32 (braid-train's "
                              "layers)",
                              braid_dtype_name(r->o.dtype));
    double t0 = braid_eng_now();
    if (r->o.model) {
        braid_eng_st_t *st;
        if ((s = braid_eng_st_open(&st, r->o.model)) != BRAID_OK)
            return s;
        s = gpt ? braid_infer_gpt_load(&r->w, &r->cfg, &r->sp, st)
                : braid_infer_weights_load(&r->w, &r->cfg, &r->sp, st,
                                           r->o.dtype);
        braid_eng_st_close(st);
    } else {
        s = braid_infer_weights_generate(
            &r->w, &r->cfg, &r->sp, r->o.seed,
            r->o.dtype == BRAID_DTYPE_COUNT ? r->cfg.dtype : r->o.dtype);
    }
    r->load_s = braid_eng_now() - t0;
    r->have_w = s == BRAID_OK;
    return s;
}

/* braid-train's GPT-2 checkpoints carry no tokenizer.json: their tokens
 * are bytes.  A GPT-2 without one gets the byte tokenizer, unless its
 * vocabulary is larger than bytes and its config does not say "tokenizer":
 * "bytes" (real GPT-2 weights: their tokenizer.json is needed). */
static braid_status_t byte_tokens(braid_infer_run_t *r)
{
    char           path[4096];
    braid_status_t s;
    if (r->cfg.arch != BRAID_INFER_GPT2 || r->o.tokenizer)
        return BRAID_OK;
    if ((s = braid_eng_path_join(path, sizeof(path), r->o.model,
                                 "tokenizer.json")) != BRAID_OK ||
        access(path, F_OK) == 0)
        return s;
    if (r->cfg.vocab > 256 && !r->cfg.byte_tokens)
        return r->o.prompt
                   ? braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                    "--prompt: %s has no tokenizer.json, "
                                    "and its vocabulary of %lld is not "
                                    "bytes",
                                    r->o.model, (long long)r->cfg.vocab)
                   : BRAID_OK;
    return braid_eng_tok_bytes(&r->tok);
}

static braid_status_t setup_prompt(braid_infer_run_t *r)
{
    braid_status_t            s;
    const braid_infer_opts_t *o = &r->o;
    if ((s = byte_tokens(r)) != BRAID_OK)
        return s;
    if (o->prompt) {
        char        path[4096];
        const char *tp = o->tokenizer;
        if (!tp && !o->model && !r->tok)
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "--prompt needs a tokenizer: --model DIR "
                                  "with tokenizer.json, or --tokenizer FILE");
        if (!tp && !r->tok) {
            if ((s = braid_eng_path_join(path, sizeof(path), o->model,
                                         "tokenizer.json")) != BRAID_OK)
                return s;
            tp = path;
        }
        if ((!r->tok && (s = braid_eng_tok_load(&r->tok, tp)) != BRAID_OK) ||
            (s = braid_eng_tok_encode(r->tok, o->prompt, strlen(o->prompt),
                                      &r->prompt, &r->n_prompt)) != BRAID_OK)
            return s;
        if (r->n_prompt == 0)
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "--prompt encodes to no tokens");
        for (size_t i = 0; i < r->n_prompt; i++)
            if (r->prompt[i] >= r->cfg.vocab)
                return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                      "the tokenizer gives id %d, outside "
                                      "the model's vocabulary of %lld",
                                      r->prompt[i], (long long)r->cfg.vocab);
    } else if (o->prompt_ids) {
        if ((s = braid_eng_parse_ids(&r->prompt, &r->n_prompt, o->prompt_ids,
                                     r->cfg.vocab - 1, "--prompt-ids")) !=
            BRAID_OK)
            return s;
    } else {
        r->n_prompt = (size_t)o->prompt_len;
        if (!(r->prompt = malloc(r->n_prompt * sizeof(int32_t))))
            return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
        for (size_t i = 0; i < r->n_prompt; i++)
            r->prompt[i] = (int32_t)(braid_eng_mix64(o->seed * 7919 + i) %
                                     (uint64_t)r->cfg.vocab);
    }
    if (o->tokenizer && !r->tok &&
        (s = braid_eng_tok_load(&r->tok, o->tokenizer)) != BRAID_OK)
        return s;
    if (!r->tok && o->model) { /* optional: to print text for --prompt-ids */
        char path[4096];
        if (braid_eng_path_join(path, sizeof(path), o->model,
                                "tokenizer.json") == BRAID_OK &&
            access(path, R_OK) == 0 &&
            (s = braid_eng_tok_load(&r->tok, path)) != BRAID_OK)
            return s;
    }
    return BRAID_OK;
}

/* ---------------------------------------------------------------- running */

static int is_eos(const braid_infer_run_t *r, int32_t id)
{
    for (int i = 0; i < r->cfg.n_eos; i++)
        if (r->cfg.eos[i] == id)
            return 1;
    return 0;
}

/* The next token from this rank's logits (identical on every rank). */
static braid_status_t pick(braid_infer_run_t *r, const float *local,
                           int32_t *id)
{
    braid_status_t s = BRAID_OK;
    if (r->o.temperature > 0 || r->dumping) {
        s = braid_infer_gather_logits(&r->m, local, r->full);
        if (s == BRAID_OK && r->dump &&
            fwrite(r->full, sizeof(float), (size_t)r->cfg.vocab, r->dump) !=
                (size_t)r->cfg.vocab)
            return braid_eng_fail(BRAID_ERR_IO, "--dump-logits: write error");
    }
    if (s != BRAID_OK)
        return s;
    if (r->o.temperature > 0)
        *id = braid_infer_sample(&r->smp, r->full);
    else
        s = braid_infer_argmax(&r->m, local, id);
    return s;
}

/* Prefill the prompt in chunks, then decode; fills the phase timings. */
static braid_status_t generate(braid_infer_run_t *r, double t[2],
                               braid_infer_stats_t phase[2])
{
    braid_infer_model_t *m  = &r->m;
    int64_t              vc = r->sp.vocab_chunk, P = (int64_t)r->n_prompt;
    int                  all = r->dumping;
    float               *logits =
        malloc((size_t)(vc * (all ? m->chunk : 1)) * sizeof(float));
    if (!logits)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t s    = BRAID_OK;
    int32_t        next = 0;

    memset(&m->stats, 0, sizeof(m->stats));
    double t0 = braid_eng_now();
    for (int64_t at = 0; at < P && s == BRAID_OK; at += m->chunk) {
        int64_t n = P - at < m->chunk ? P - at : m->chunk;
        s         = braid_infer_forward(m, r->prompt + at, n, all, logits);
        /* with --dump-logits every position's row goes out; the last one
         * picks the first generated token either way */
        for (int64_t i = all ? 0 : n - 1; s == BRAID_OK && i < n; i++)
            s = pick(r, logits + (all ? i : 0) * vc, &next);
    }
    t[0]     = braid_eng_now() - t0;
    phase[0] = m->stats;

    memset(&m->stats, 0, sizeof(m->stats));
    t0       = braid_eng_now();
    r->n_out = 0;
    if (s == BRAID_OK && r->o.gen > 0)
        r->out[r->n_out++] = next;
    while (s == BRAID_OK && r->n_out < r->o.gen &&
           (r->o.ignore_eos || !is_eos(r, next))) {
        s = braid_infer_forward(m, &next, 1, 0, logits);
        if (s == BRAID_OK)
            s = pick(r, logits, &next);
        if (s == BRAID_OK)
            r->out[r->n_out++] = next;
    }
    t[1]     = braid_eng_now() - t0;
    phase[1] = m->stats;
    free(logits);
    return s;
}

/* ---------------------------------------------------------------- main */

static braid_status_t run(braid_infer_run_t *r)
{
    braid_status_t s;
    if ((s = count_local_ranks(r)) || (s = setup_threads(r)) ||
        (s = setup_model(r)) || (s = setup_prompt(r)))
        return s;
    const braid_infer_opts_t *o = &r->o;
    int64_t                   ctx =
        o->ctx ? o->ctx : (int64_t)r->n_prompt + (o->gen > 0 ? o->gen : 1);
    if (ctx < (int64_t)r->n_prompt + o->gen - 1)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "--ctx %lld holds fewer positions than the "
                              "prompt (%zu) and the generated tokens (%lld) "
                              "need",
                              (long long)ctx, r->n_prompt, (long long)o->gen);
    if (ctx > r->cfg.max_pos)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "prompt (%zu) + generated (%lld) tokens exceed "
                              "max_position_embeddings %lld",
                              r->n_prompt, (long long)o->gen,
                              (long long)r->cfg.max_pos);
    if ((s = braid_infer_model_init(&r->m, &r->cfg, &r->sp, &r->w, r->comm,
                                    r->pool, ctx, o->chunk)) != BRAID_OK)
        return s;
    r->have_m = 1;
    if ((s = braid_infer_sampler_init(&r->smp, r->cfg.vocab, o->temperature,
                                      o->top_p, o->seed)) != BRAID_OK)
        return s;
    r->out  = malloc((size_t)(o->gen + 1) * sizeof(int32_t));
    r->full = malloc((size_t)(r->sp.vocab_chunk * r->size) * sizeof(float));
    if (!r->out || !r->full)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    r->dumping = o->dump_logits != NULL;
    if (r->dumping && r->rank == 0 && !(r->dump = fopen(o->dump_logits, "wb")))
        return braid_eng_fail(BRAID_ERR_IO, "%s: cannot write",
                              o->dump_logits);
    if ((s = braid_barrier(r->comm)) != BRAID_OK)
        return braid_eng_fail_braid(s, "barrier");
    double              t[2] = {0, 0};
    braid_infer_stats_t phase[2];
    memset(phase, 0, sizeof(phase));
    if ((s = generate(r, t, phase)) != BRAID_OK)
        return s;
    if (r->dump && fclose(r->dump) != 0) {
        r->dump = NULL;
        return braid_eng_fail(BRAID_ERR_IO, "%s: write error", o->dump_logits);
    }
    r->dump = NULL;
    return braid_infer_report(r, t, phase);
}

int main(int argc, char **argv)
{
    braid_infer_run_t r;
    memset(&r, 0, sizeof(r));
    if (parse_opts(&r.o, argc, argv) != 0)
        return 2;
    if (r.o.save) { /* one process writes the whole checkpoint */
        braid_status_t s = braid_infer_config_preset(&r.cfg, r.o.preset);
        if (s == BRAID_OK)
            s = braid_infer_save_generated(
                r.o.save, &r.cfg, r.o.seed,
                r.o.dtype == BRAID_DTYPE_COUNT ? r.cfg.dtype : r.o.dtype,
                (int)r.o.shards);
        if (s != BRAID_OK) {
            fprintf(stderr, "braid-infer: %s\n", braid_eng_error());
            return 1;
        }
        printf("braid-infer: wrote %s to %s\n", r.o.preset, r.o.save);
        return 0;
    }
    braid_status_t s = braid_init(&r.comm);
    if (s != BRAID_OK) {
        fprintf(stderr, "braid-infer: braid_init: %s\n", braid_last_error());
        return 1;
    }
    r.rank = braid_comm_rank(r.comm);
    r.size = braid_comm_size(r.comm);
    s      = run(&r);
    if (s != BRAID_OK)
        fprintf(stderr, "braid-infer: rank %d: %s\n", r.rank,
                braid_eng_error());
    if (r.dump)
        fclose(r.dump);
    if (r.have_m)
        braid_infer_model_free(&r.m);
    if (r.have_w)
        braid_infer_weights_free(&r.w, &r.cfg);
    braid_infer_sampler_free(&r.smp);
    braid_eng_tok_free(r.tok);
    if (r.pool)
        braid_eng_pool_free(r.pool);
    free(r.prompt);
    free(r.out);
    free(r.full);
    braid_status_t fs = braid_finalize(r.comm);
    return s == BRAID_OK && fs == BRAID_OK ? 0 : 1;
}
