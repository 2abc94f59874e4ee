/* braid-train: data-parallel GPT pretraining on braid.
 *
 *     braidrun -n 2 braid-train --preset tiny --data README.md --steps 20
 *
 * Every rank holds the whole model and trains on its own slice of each
 * global batch; gradients are averaged with braid's all-reduce while the
 * backward pass runs.  See train.c for the loop, dp.c for the buckets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <braid/braid.h>

#include "ckpt.h"
#include "data.h"
#include "dp.h"
#include "engine/common/err.h"
#include "engine/common/linalg.h"
#include "report.h"
#include "train.h"

/* The model of a resumed run is the checkpoint's; a --preset or --config
 * given as well must agree with it.  Rank 0 reads config.json and tells
 * the others (only rank 0 needs the checkpoint directory). */
static braid_status_t resume_config(braid_train_opts_t *o, braid_comm_t *comm)
{
    braid_gpt_config_t c  = {0};
    braid_status_t     st = BRAID_OK;
    if (braid_comm_rank(comm) == 0)
        st = braid_train_ckpt_config(&c, o->resume_dir);
    int32_t        v[6] = {st != BRAID_OK, c.n_layer,    c.n_head,
                           c.n_embd,       c.block_size, c.vocab_size};
    braid_status_t bst  = braid_broadcast(v, 6, BRAID_I32, 0, comm);
    if (bst != BRAID_OK)
        return braid_eng_fail_braid(bst, "broadcast");
    if (st != BRAID_OK)
        return braid_eng_wrap(st, "--resume %s", o->resume_dir);
    if (v[0])
        return braid_eng_fail(BRAID_ERR_PEER,
                              "--resume %s: rank 0 could not "
                              "read the checkpoint (see its message)",
                              o->resume_dir);
    c = (braid_gpt_config_t){.n_layer    = v[1],
                             .n_head     = v[2],
                             .n_embd     = v[3],
                             .block_size = v[4],
                             .vocab_size = v[5]};
    if (o->model_given && memcmp(&c, &o->cfg, sizeof(c)) != 0)
        return braid_eng_fail(BRAID_ERR_MISMATCH,
                              "--resume %s holds a model "
                              "of %d layers, %d heads, %d channels, block %d, "
                              "vocabulary %d; %s is another",
                              o->resume_dir, c.n_layer, c.n_head, c.n_embd,
                              c.block_size, c.vocab_size, o->model_name);
    if (!o->model_given) {
        if (o->seq_given && o->seq > c.block_size)
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "--seq %d: longer "
                                  "than the block size of the model in %s "
                                  "(%d)",
                                  o->seq, o->resume_dir, c.block_size);
        if (!o->seq_given)
            o->seq = c.block_size;
        o->cfg = c;
        snprintf(o->model_name, sizeof(o->model_name), "%s", o->resume_dir);
    }
    return BRAID_OK;
}

static braid_status_t plot(const braid_train_opts_t   *o,
                           const braid_train_result_t *r)
{
    char title[256];
    snprintf(title, sizeof(title), "braid-train %s on %s, %d rank(s)",
             o->model_name, o->data_path, r->ranks);
    braid_status_t st =
        braid_train_plot(o->plot_path, r->steps, r->nsteps, title);
    if (st == BRAID_OK)
        printf("plot: %s\n", o->plot_path);
    return st;
}

/* --scaling: every listed rank count trains --steps steps on the first n
 * ranks, in alternating rounds; the others wait (braid_train_idle). */
static braid_status_t scaling(const braid_train_opts_t *o,
                              const braid_train_data_t *data,
                              braid_comm_t             *world)
{
    int           rank = braid_comm_rank(world), size = braid_comm_size(world);
    int           micro                        = o->micro > 0 ? o->micro : 4;
    braid_comm_t *sub[BRAID_TRAIN_MAX_SCALING] = {0};
    braid_status_t st                          = BRAID_OK;

    for (int i = 0; i < o->nscaling; i++)
        if (o->scaling[i] > size)
            return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                                  "--scaling %d needs "
                                  "at least that many ranks; this run has "
                                  "%d",
                                  o->scaling[i], size);
    for (int i = 0; i < o->nscaling && st == BRAID_OK; i++) {
        int in = rank < o->scaling[i];
        st = braid_comm_split(world, in ? 0 : BRAID_UNDEFINED, rank, &sub[i]);
        if (st != BRAID_OK)
            st = braid_eng_fail_braid(st, "--scaling: splitting the ranks");
    }
    /* trials: (count, overlap) pairs; no-overlap only means something on
     * several ranks */
    int ntrials = 0, count[2 * BRAID_TRAIN_MAX_SCALING];
    int overlap[2 * BRAID_TRAIN_MAX_SCALING];
    for (int i = 0; i < o->nscaling; i++) {
        count[ntrials] = i, overlap[ntrials++] = o->overlap;
        if (o->compare_overlap && o->scaling[i] > 1)
            count[ntrials] = i, overlap[ntrials++] = !o->overlap;
    }
    double *ms = calloc((size_t)ntrials * o->rounds * 4, sizeof(double));
    braid_train_result_t *rows = calloc((size_t)ntrials, sizeof(*rows));
    if (st == BRAID_OK && (ms == NULL || rows == NULL))
        st = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    if (st == BRAID_OK && rank == 0) {
        printf("braid-train --scaling: model %s, %d x %d tokens per rank and "
               "step (weak scaling), %ld steps per trial (the first not "
               "timed), %d round(s), trials alternate\n",
               o->model_name, micro, o->seq, o->steps, o->rounds);
        size_t n = braid_gpt_nparams(&o->cfg);
        printf("gradients: %.1f MiB; the all-reduce candidates:\n",
               n * 4.0 / (1 << 20));
        for (int i = 0; i < o->nscaling; i++) {
            if (o->scaling[i] < 2)
                continue;
            braid_train_dp_print_choices(sub[i], n, o->bucket_bytes, 1, "  ");
            if (o->compare_overlap || !o->overlap)
                braid_train_dp_print_choices(sub[i], n, o->bucket_bytes, 0,
                                             "  ");
            /* and what other --bucket-mb values would get */
            printf("  per bucket size on %d ranks:", o->scaling[i]);
            for (size_t mb = 1; mb <= 256; mb *= 4) {
                char cand[64], why[64];
                if (braid_comm_choice(sub[i], BRAID_COLL_ALLREDUCE, mb << 20,
                                      cand, sizeof(cand), why,
                                      sizeof(why)) == BRAID_OK)
                    printf("%s %zu MiB %s", mb > 1 ? "," : "", mb, cand);
            }
            printf("\n");
        }
        fflush(stdout);
    }
    for (int r = 0; r < o->rounds && st == BRAID_OK; r++) {
        for (int t = 0; t < ntrials && st == BRAID_OK; t++) {
            int                k      = o->scaling[count[t]];
            braid_train_opts_t to     = *o;
            to.micro                  = micro;
            to.batch                  = micro * k;
            to.overlap                = overlap[t];
            braid_comm_t        *idle = k < size ? world : NULL;
            braid_train_result_t res;
            if (sub[count[t]] != NULL) {
                st = braid_train_run(&res, &to, data, sub[count[t]], 1, idle);
                double *v = ms + ((size_t)t * o->rounds + r) * 4;
                v[0] = res.med_ms, v[1] = res.med_wait_ms;
                v[2] = res.med_poll_ms, v[3] = res.med_cpu_ms;
                rows[t]       = res;
                rows[t].steps = NULL;
                braid_train_result_free(&res);
            } else if (idle != NULL) {
                st = braid_train_idle(world);
            }
            if (rank == 0 && st == BRAID_OK)
                printf("round %d: %d rank(s)%s: %.1f ms/step (CPU %.1f ms), "
                       "%.0f tok/s\n",
                       r + 1, k,
                       k == 1       ? ""
                       : overlap[t] ? " overlap"
                                    : " no-overlap",
                       rows[t].med_ms, rows[t].med_cpu_ms, rows[t].tok_s);
            fflush(stdout);
        }
    }
    if (st == BRAID_OK && rank == 0) {
        /* medians over the rounds */
        double *col = malloc((size_t)o->rounds * sizeof(double));
        for (int t = 0; col != NULL && t < ntrials; t++) {
            double *fig[4] = {&rows[t].med_ms, &rows[t].med_wait_ms,
                              &rows[t].med_poll_ms, &rows[t].med_cpu_ms};
            for (int c = 0; c < 4; c++) {
                for (int r = 0; r < o->rounds; r++)
                    col[r] = ms[((size_t)t * o->rounds + r) * 4 + c];
                *fig[c] = braid_train_median(col, (size_t)o->rounds);
            }
            rows[t].ranks = o->scaling[count[t]];
            rows[t].tok_s = (double)micro * rows[t].ranks * o->seq /
                            (rows[t].med_ms * 1e-3);
        }
        free(col);
        braid_train_report_table(rows, overlap, ntrials);
    }
    free(ms);
    free(rows);
    for (int i = 0; i < o->nscaling; i++)
        if (sub[i] != NULL)
            braid_finalize(sub[i]);
    return st;
}

int main(int argc, char **argv)
{
    braid_train_opts_t   o;
    braid_train_data_t   data = {0};
    braid_train_result_t res  = {0};
    braid_comm_t        *comm = NULL;

    int rc = braid_train_opts_parse(&o, argc, argv);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    braid_status_t st = braid_init(&comm);
    if (st != BRAID_OK) {
        fprintf(stderr, "braid-train: braid_init: %s\n", braid_last_error());
        return 1;
    }
    int rank = braid_comm_rank(comm);
    braid_eng_blas_threads(o.threads);
    if (o.resume_dir != NULL)
        st = resume_config(&o, comm);
    if (st == BRAID_OK)
        st = braid_train_data_open(&data, o.data_path, o.val_frac, o.seq);
    if (st == BRAID_OK && o.nscaling > 0)
        st = scaling(&o, &data, comm);
    else if (st == BRAID_OK)
        st = braid_train_run(&res, &o, &data, comm, 0, NULL);
    if (st == BRAID_OK && rank == 0 && o.plot_path != NULL && o.nscaling == 0)
        st = plot(&o, &res);
    if (st != BRAID_OK)
        fprintf(stderr, "braid-train: rank %d: %s\n", rank, braid_eng_error());
    braid_train_result_free(&res);
    braid_train_data_close(&data);
    braid_status_t fst = braid_finalize(comm);
    if (st == BRAID_OK && fst != BRAID_OK)
        fprintf(stderr, "braid-train: braid_finalize: %s\n",
                braid_last_error());
    return st == BRAID_OK && fst == BRAID_OK ? 0 : 1;
}
