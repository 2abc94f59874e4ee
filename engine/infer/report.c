/* braid-infer's report: every rank's figures gathered, rank 0 prints them
 * as text or one JSON object (see run.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/common/err.h"
#include "engine/common/json.h"
#include "engine/common/util.h"
#include "engine/infer/run.h"

enum {
    F_PREFILL,
    F_DECODE,
    F_AR_PREFILL,
    F_AR_DECODE,
    F_OT_PREFILL,
    F_OT_DECODE,
    F_RSS,
    F_PEAK,
    F_WEIGHTS,
    F_LOAD,
    F_N
};

typedef struct {
    double *v; /* [size][F_N] every rank's figures */
    double  max[F_N], sum[F_N];
    int64_t steps; /* decode forward passes */
} figures_t;

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

/* The all-reduce sizes of both phases, with calls and the chosen
 * candidate (braid_comm_choice: a pure query, the same on every rank). */
static void add_sizes(cJSON *arr, const braid_infer_run_t *r,
                      const braid_infer_stats_t *p, const char *phase,
                      int text)
{
    for (int i = 0; i < p->n_sizes; i++) {
        char cand[128] = "?", why[128] = "?";
        braid_comm_choice(r->comm, BRAID_COLL_ALLREDUCE, p->size_bytes[i],
                          cand, sizeof(cand), why, sizeof(why));
        if (text) {
            printf("all-reduce %s: %llu B x %lld -> %s (%s)\n", phase,
                   (unsigned long long)p->size_bytes[i],
                   (long long)p->size_calls[i], cand, why);
            continue;
        }
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "phase", phase);
        cJSON_AddNumberToObject(e, "bytes", (double)p->size_bytes[i]);
        cJSON_AddNumberToObject(e, "calls", (double)p->size_calls[i]);
        cJSON_AddStringToObject(e, "candidate", cand);
        cJSON_AddStringToObject(e, "why", why);
        cJSON_AddItemToArray(arr, e);
    }
}

static void print_text(const braid_infer_run_t *r, const figures_t *f,
                       const braid_infer_stats_t phase[2])
{
    const braid_infer_config_t *c = &r->cfg;
    const char *dt = braid_dtype_name(braid_infer_weights_dtype(&r->w));
    printf("braid-infer: %s, %lld layers, hidden %lld, heads %lld/%lld, "
           "vocab %lld, %s weights; %d rank%s x %d thread%s\n",
           c->name, (long long)c->layers, (long long)c->hidden,
           (long long)c->heads, (long long)c->kv_heads, (long long)c->vocab,
           dt, r->size, r->size > 1 ? "s" : "", r->threads,
           r->threads > 1 ? "s" : "");
    printf("weights: %.1f MiB per rank, ready in %.2f s\n",
           f->max[F_WEIGHTS] / 1048576.0, f->max[F_LOAD]);
    if (r->tok) {
        char  *text = NULL;
        size_t len  = 0;
        if (braid_eng_tok_decode(r->tok, r->out, (size_t)r->n_out, &text,
                                 &len) == BRAID_OK) {
            printf("output: ");
            fwrite(text, 1, len, stdout);
            printf("\n");
        }
        free(text);
    }
    printf("ids:");
    for (int64_t i = 0; i < r->n_out; i++)
        printf("%s%d", i ? "," : " ", r->out[i]);
    printf("\n");
    printf("prefill: %zu tokens in %.1f ms = %.1f tok/s (all-reduce %.1f%%, "
           "other collectives %.1f%%)\n",
           r->n_prompt, 1e3 * f->max[F_PREFILL],
           ratio((double)r->n_prompt, f->max[F_PREFILL]),
           100 * ratio(f->sum[F_AR_PREFILL], f->sum[F_PREFILL]),
           100 * ratio(f->sum[F_OT_PREFILL], f->sum[F_PREFILL]));
    printf("decode: %lld tokens in %.1f ms = %.2f tok/s, %.2f ms/token "
           "(all-reduce %.1f%%, %lld per token; other collectives %.1f%%)\n",
           (long long)f->steps, 1e3 * f->max[F_DECODE],
           ratio((double)f->steps, f->max[F_DECODE]),
           1e3 * ratio(f->max[F_DECODE], (double)f->steps),
           100 * ratio(f->sum[F_AR_DECODE], f->sum[F_DECODE]),
           (long long)ratio((double)phase[1].allreduces, (double)f->steps),
           100 * ratio(f->sum[F_OT_DECODE], f->sum[F_DECODE]));
    add_sizes(NULL, r, &phase[0], "prefill", 1);
    add_sizes(NULL, r, &phase[1], "decode", 1);
    printf("memory:");
    for (int i = 0; i < r->size; i++)
        printf(" rank %d RSS %.1f MiB (peak %.1f)%s", i,
               f->v[i * F_N + F_RSS] / 1048576.0,
               f->v[i * F_N + F_PEAK] / 1048576.0, i + 1 < r->size ? "," : "");
    printf("\n");
}

static braid_status_t print_json(const braid_infer_run_t  *r,
                                 const figures_t          *f,
                                 const braid_infer_stats_t phase[2])
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", r->cfg.name);
    cJSON_AddStringToObject(
        j, "dtype", braid_dtype_name(braid_infer_weights_dtype(&r->w)));
    cJSON_AddNumberToObject(j, "ranks", r->size);
    cJSON_AddNumberToObject(j, "threads", r->threads);
    cJSON_AddNumberToObject(j, "prompt_tokens", (double)r->n_prompt);
    cJSON_AddNumberToObject(j, "generated_tokens", (double)r->n_out);
    cJSON *ids = cJSON_AddArrayToObject(j, "ids");
    for (int64_t i = 0; i < r->n_out; i++)
        cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->out[i]));
    if (r->tok) {
        char  *text = NULL;
        size_t len  = 0;
        if (braid_eng_tok_decode(r->tok, r->out, (size_t)r->n_out, &text,
                                 &len) == BRAID_OK)
            cJSON_AddStringToObject(j, "text", text); /* up to a NUL byte */
        free(text);
    }
    cJSON_AddNumberToObject(j, "prefill_s", f->max[F_PREFILL]);
    cJSON_AddNumberToObject(j, "prefill_tok_s",
                            ratio((double)r->n_prompt, f->max[F_PREFILL]));
    cJSON_AddNumberToObject(j, "decode_steps", (double)f->steps);
    cJSON_AddNumberToObject(j, "decode_s", f->max[F_DECODE]);
    cJSON_AddNumberToObject(j, "decode_tok_s",
                            ratio((double)f->steps, f->max[F_DECODE]));
    cJSON_AddNumberToObject(j, "ms_per_token",
                            1e3 * ratio(f->max[F_DECODE], (double)f->steps));
    cJSON_AddNumberToObject(j, "allreduce_share_prefill",
                            ratio(f->sum[F_AR_PREFILL], f->sum[F_PREFILL]));
    cJSON_AddNumberToObject(j, "allreduce_share_decode",
                            ratio(f->sum[F_AR_DECODE], f->sum[F_DECODE]));
    cJSON_AddNumberToObject(j, "other_collectives_share_prefill",
                            ratio(f->sum[F_OT_PREFILL], f->sum[F_PREFILL]));
    cJSON_AddNumberToObject(j, "other_collectives_share_decode",
                            ratio(f->sum[F_OT_DECODE], f->sum[F_DECODE]));
    cJSON_AddNumberToObject(
        j, "allreduces_per_token",
        ratio((double)phase[1].allreduces, (double)f->steps));
    cJSON_AddNumberToObject(j, "weight_bytes_per_rank", f->max[F_WEIGHTS]);
    cJSON_AddNumberToObject(
        j, "bytes_per_token",
        (double)braid_infer_bytes_per_token(&r->cfg, &r->sp,
                                            braid_infer_weights_dtype(&r->w)));
    cJSON_AddNumberToObject(j, "load_s", f->max[F_LOAD]);
    cJSON *rss  = cJSON_AddArrayToObject(j, "rss_bytes");
    cJSON *peak = cJSON_AddArrayToObject(j, "peak_rss_bytes");
    for (int i = 0; i < r->size; i++) {
        cJSON_AddItemToArray(rss, cJSON_CreateNumber(f->v[i * F_N + F_RSS]));
        cJSON_AddItemToArray(peak, cJSON_CreateNumber(f->v[i * F_N + F_PEAK]));
    }
    cJSON *ar = cJSON_AddArrayToObject(j, "allreduce");
    add_sizes(ar, r, &phase[0], "prefill", 0);
    add_sizes(ar, r, &phase[1], "decode", 0);
    braid_status_t s = BRAID_OK;
    if (r->o.json_path) {
        s = braid_eng_json_save(r->o.json_path, j, 0);
    } else {
        char *text = cJSON_PrintUnformatted(j);
        if (!text)
            s = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
        else
            printf("%s\n", text);
        free(text);
    }
    cJSON_Delete(j);
    return s;
}

braid_status_t braid_infer_report(braid_infer_run_t *r, const double t[2],
                                  const braid_infer_stats_t phase[2])
{
    figures_t f = {0};
    double    mine[F_N];
    uint64_t  rss, peak;
    braid_eng_rss(&rss, &peak);
    mine[F_PREFILL] = t[0], mine[F_DECODE] = t[1];
    mine[F_AR_PREFILL] = phase[0].allreduce_s,
    mine[F_AR_DECODE]  = phase[1].allreduce_s;
    mine[F_OT_PREFILL] = phase[0].other_s,
    mine[F_OT_DECODE]  = phase[1].other_s;
    mine[F_RSS] = (double)rss, mine[F_PEAK] = (double)peak;
    mine[F_WEIGHTS] = (double)r->w.bytes, mine[F_LOAD] = r->load_s;
    if (!(f.v = malloc((size_t)r->size * F_N * sizeof(double))))
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t s = braid_allgather(mine, f.v, F_N, BRAID_F64, r->comm);
    if (s != BRAID_OK) {
        free(f.v);
        return braid_eng_fail_braid(s, "allgather of the figures");
    }
    for (int k = 0; k < F_N; k++)
        for (int i = 0; i < r->size; i++) {
            f.max[k] = fmax(f.max[k], f.v[i * F_N + k]);
            f.sum[k] += f.v[i * F_N + k];
        }
    f.steps = r->n_out > 0 ? r->n_out - 1 : 0;
    if (r->rank == 0) {
        if (r->o.json)
            s = print_json(r, &f, phase);
        else
            print_text(r, &f, phase);
        fflush(stdout);
    }
    free(f.v);
    return s;
}
