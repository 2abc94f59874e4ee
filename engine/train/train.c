/* The training loop of braid-train: one session on one communicator. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adamw.h"
#include "ckpt.h"
#include "dp.h"
#include "engine/common/err.h"
#include "gpt.h"
#include "report.h"
#include "train.h"
#include "util.h"

typedef struct session {
    const braid_train_opts_t *o;
    const braid_train_data_t *data;
    braid_comm_t             *comm;
    int                       rank, size;
    int                       quiet; /* a scaling trial: figures only */
    int                       tty;   /* rank 0 draws a progress bar */
    int                       batch, micro, accum, T;
    long                      tokens_per_step;
    braid_gpt_t              *model;
    braid_adamw_t             opt;
    braid_train_dp_t          dp;
    int                      *inputs, *targets; /* (micro, T) */
    long                      step;             /* updates done */
    uint64_t                  data_hash;
    FILE                     *log;
} session_t;

/* CPU seconds of this process: on a shared host a step's wall time
 * depends on what else runs, its CPU time much less. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int is_root(const session_t *s) { return s->rank == 0; }

/* ----------------------------------------------------------------------------
 * collectives of the loop (besides the gradients) */

/* The same buffer everywhere, from rank 0: after initialisation (as DDP
 * does, so that ranks agree whatever their seeds) and after a resume. */
static braid_status_t share(session_t *s, float *buf, size_t n)
{
    braid_status_t st = braid_broadcast(buf, n, BRAID_F32, 0, s->comm);
    return st == BRAID_OK ? st : braid_eng_fail_braid(st, "broadcast");
}

/* Whether every rank reached st == BRAID_OK (a failure on one rank, such
 * as a checkpoint that could not be written, must stop them all). */
static braid_status_t agree(session_t *s, braid_status_t st)
{
    int32_t        bad = st != BRAID_OK, any = 0;
    braid_status_t cst =
        braid_allreduce(&bad, &any, 1, BRAID_I32, BRAID_MAX, s->comm);
    if (cst != BRAID_OK)
        return braid_eng_fail_braid(cst, "agreeing on a status");
    if (any && st == BRAID_OK)
        return braid_eng_fail(BRAID_ERR_PEER, "another rank failed (see its "
                                              "message)");
    return st;
}

/* Fingerprints of the parameters and optimizer state of every rank; they
 * must be identical (braid's results are bitwise identical on all ranks,
 * and every rank then runs the same update). */
static braid_status_t check_replicas(session_t *s)
{
    size_t   bytes = s->model->nparams * sizeof(float);
    uint64_t h     = braid_train_hash(s->model->params, bytes, 1);
    h              = braid_train_hash(s->opt.m, bytes, h);
    h              = braid_train_hash(s->opt.v, bytes, h);
    int64_t *all   = malloc((size_t)s->size * sizeof(*all));
    int64_t  mine  = (int64_t)h;
    if (all == NULL)
        return braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    braid_status_t st = braid_allgather(&mine, all, 1, BRAID_I64, s->comm);
    if (st != BRAID_OK) {
        free(all);
        return braid_eng_fail_braid(st, "comparing parameters");
    }
    int differ = 0;
    for (int r = 1; r < s->size; r++)
        differ |= all[r] != all[0];
    if (differ) {
        char   list[512];
        size_t k = 0;
        for (int r = 0; r < s->size && k < sizeof(list) - 40; r++)
            k += (size_t)snprintf(list + k, sizeof(list) - k,
                                  "%s rank %d "
                                  "%016llx",
                                  r ? "," : "", r, (unsigned long long)all[r]);
        st = braid_eng_fail(BRAID_ERR_MISMATCH,
                            "parameters or optimizer "
                            "state differ across ranks after step %ld "
                            "(fingerprints:%s): the replicas have diverged",
                            s->step, list);
    }
    free(all);
    return st;
}

/* ----------------------------------------------------------------------------
 * set-up */

static braid_status_t session_open(session_t *s, const braid_train_opts_t *o,
                                   const braid_train_data_t *data,
                                   braid_comm_t *comm, int quiet)
{
    braid_status_t st;
    *s       = (session_t){.o     = o,
                           .data  = data,
                           .comm  = comm,
                           .quiet = quiet,
                           .T     = o->seq,
                           .batch = o->batch};
    s->rank  = braid_comm_rank(comm);
    s->size  = braid_comm_size(comm);
    s->tty   = is_root(s) && !quiet && !o->quiet && isatty(STDOUT_FILENO);
    s->micro = o->micro > 0 ? o->micro : s->batch / s->size;
    if (s->micro < 1 || s->batch % (s->size * s->micro) != 0)
        return braid_eng_fail(BRAID_ERR_INVALID_ARG,
                              "a global batch of %d "
                              "sequences does not split into %d rank(s) x "
                              "micro-batches of %d: make --batch a multiple "
                              "of ranks x --micro",
                              s->batch, s->size, s->micro);
    s->accum           = s->batch / (s->size * s->micro);
    s->tokens_per_step = (long)s->batch * s->T;
    s->data_hash       = braid_train_hash(data->bytes, data->n, 0);

    st = braid_gpt_create(&s->model, &o->cfg, s->micro, s->T);
    if (st == BRAID_OK)
        st = braid_adamw_create(&s->opt, s->model->nparams, o->beta1, o->beta2,
                                o->eps, o->weight_decay);
    if (st == BRAID_OK)
        st = braid_train_dp_create(&s->dp, comm, s->model->grads,
                                   s->model->nparams, o->bucket_bytes,
                                   o->overlap);
    size_t n   = (size_t)s->micro * s->T;
    s->inputs  = malloc(n * sizeof(int));
    s->targets = malloc(n * sizeof(int));
    if (st == BRAID_OK && (s->inputs == NULL || s->targets == NULL))
        st = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    st = agree(s, st);
    if (st != BRAID_OK)
        return st;

    /* parameters: initialised, or from a checkpoint (read by rank 0) */
    braid_train_ckpt_state_t cs = {0};
    if (o->resume_dir != NULL && !quiet) {
        if (is_root(s))
            st = braid_train_ckpt_load(s->model, &s->opt, &cs, o->resume_dir);
        st          = agree(s, st);
        double v[2] = {(double)cs.step, (double)cs.adam_t};
        if (st == BRAID_OK)
            st = braid_broadcast(v, 2, BRAID_F64, 0, comm) == BRAID_OK
                     ? BRAID_OK
                     : braid_eng_fail_braid(BRAID_ERR_PEER, "broadcast");
        s->step  = (long)v[0];
        s->opt.t = (long)v[1];
        if (st == BRAID_OK)
            st = share(s, s->opt.m, s->model->nparams);
        if (st == BRAID_OK)
            st = share(s, s->opt.v, s->model->nparams);
        if (st == BRAID_OK && is_root(s) &&
            (cs.data_bytes != data->n || cs.data_hash != s->data_hash ||
             cs.seed != o->seed || cs.batch != s->batch || cs.seq != s->T))
            fprintf(stderr,
                    "braid-train: warning: %s was trained with "
                    "other data, seed, batch or sequence length (%llu "
                    "bytes, seed %llu, batch %d x %d): the loss curve will "
                    "not continue the same\n",
                    o->resume_dir, (unsigned long long)cs.data_bytes, cs.seed,
                    cs.batch, cs.seq);
    } else {
        braid_gpt_init_weights(s->model, o->seed);
    }
    if (st == BRAID_OK)
        st = share(s, s->model->params, s->model->nparams);
    if (st == BRAID_OK && o->log_path != NULL && is_root(s) && !quiet) {
        s->log = fopen(o->log_path, s->step > 0 ? "a" : "w");
        if (s->log == NULL)
            st = braid_eng_fail(BRAID_ERR_IO, "--log %s: cannot open",
                                o->log_path);
        else if (s->step == 0)
            braid_train_log_header(s->log);
    }
    return agree(s, st);
}

static void session_close(session_t *s)
{
    if (s->log != NULL)
        fclose(s->log);
    braid_train_dp_free(&s->dp);
    braid_adamw_free(&s->opt);
    braid_gpt_free(s->model);
    free(s->inputs);
    free(s->targets);
}

static void print_header(const session_t *s)
{
    const braid_train_opts_t *o = s->o;
    const braid_gpt_config_t *c = &o->cfg;
    printf("braid-train: model %s (%d layers, %d heads, %d channels, "
           "vocabulary %d), %.2fM parameters\n",
           o->model_name, c->n_layer, c->n_head, c->n_embd, c->vocab_size,
           s->model->nparams / 1e6);
    printf("data: %s, %zu bytes in %d file(s): %zu train, %zu validation\n",
           o->data_path, s->data->n, s->data->nfiles, s->data->ntrain,
           s->data->n - s->data->ntrain);
    printf("batch: %d sequences x %d tokens = %ld tokens/step on %d "
           "rank(s): %d per rank in %d micro-batch(es) of %d\n",
           s->batch, s->T, s->tokens_per_step, s->size, s->batch / s->size,
           s->accum, s->micro);
    if (s->size > 1) {
        printf("gradients: %.1f MiB in %d bucket(s)%s\n",
               s->model->nparams * 4.0 / (1 << 20), s->dp.nbuckets,
               s->dp.overlap ? ", all-reduced during the backward pass"
                             : ", all-reduced after the backward pass");
        braid_train_dp_print_choices(s->comm, s->model->nparams,
                                     o->bucket_bytes, o->overlap, "  ");
    }
    fflush(stdout);
}

/* ----------------------------------------------------------------------------
 * one step */

static braid_status_t train_step(session_t *s, braid_train_step_t *rec)
{
    const braid_train_opts_t *o  = s->o;
    braid_gpt_t              *m  = s->model;
    double                    t0 = braid_eng_now(), c0 = cpu_now();
    float                     lr =
        braid_train_lr(s->step, o->warmup, o->steps, o->lr, o->min_lr_frac);
    float  dloss = 1.0f / ((float)s->micro * s->T * s->accum);
    double loss  = 0.0;

    braid_gpt_zero_grad(m);
    for (int k = 0; k < s->accum; k++) {
        /* this rank's micro-batch k: a contiguous run of the global batch */
        long first = (long)s->rank * (s->batch / s->size) + (long)k * s->micro;
        braid_train_data_batch(s->data, s->inputs, s->targets, o->seed,
                               s->step, first, s->micro, s->T);
        loss += braid_gpt_forward(m, s->inputs, s->targets);
        if (k == s->accum - 1) {
            /* the last pass completes the gradients: buckets go out now */
            braid_train_dp_begin(&s->dp);
            braid_gpt_backward(m, dloss, braid_train_dp_ready, &s->dp);
        } else {
            braid_gpt_backward(m, dloss, NULL, NULL);
        }
    }
    braid_status_t st = braid_train_dp_finish(&s->dp);
    if (st != BRAID_OK)
        return st;
    float norm = braid_train_clip(m->grads, m->nparams, o->clip);
    braid_adamw_update(&s->opt, m, lr);
    s->step++;
    if (s->step == o->diverge_step && s->rank == s->size - 1 && s->size > 1)
        m->params[0] = nextafterf(m->params[0], INFINITY); /* one ulp */

    double mean = loss / s->accum, global;
    st = braid_allreduce(&mean, &global, 1, BRAID_F64, BRAID_AVG, s->comm);
    if (st != BRAID_OK)
        return braid_eng_fail_braid(st, "loss all-reduce");
    *rec = (braid_train_step_t){.step    = s->step,
                                .loss    = (float)global,
                                .val     = NAN,
                                .lr      = lr,
                                .norm    = norm,
                                .ms      = (braid_eng_now() - t0) * 1e3,
                                .wait_ms = s->dp.t_wait * 1e3,
                                .poll_ms = s->dp.t_poll * 1e3,
                                .cpu_ms  = (cpu_now() - c0) * 1e3};
    return BRAID_OK;
}

/* Mean loss over --val-batches global batches of held-out windows. */
static braid_status_t validate(session_t *s, float *val)
{
    const braid_train_opts_t *o     = s->o;
    long                      total = (long)o->val_batches * s->batch;
    long                      mine = total / s->size; /* a multiple of micro */
    double                    sums[2] = {0, 0}, all[2];
    for (long first = 0; first < mine; first += s->micro) {
        braid_train_data_val(s->data, s->inputs, s->targets,
                             s->rank * mine + first, s->micro, total, s->T);
        braid_gpt_forward(s->model, s->inputs, s->targets);
        for (int i = 0; i < s->micro * s->T; i++)
            sums[0] += s->model->acts.losses[i];
        sums[1] += (double)s->micro * s->T;
    }
    braid_status_t st =
        braid_allreduce(sums, all, 2, BRAID_F64, BRAID_SUM, s->comm);
    if (st != BRAID_OK)
        return braid_eng_fail_braid(st, "validation all-reduce");
    *val = (float)(all[0] / all[1]);
    return BRAID_OK;
}

static braid_status_t save(session_t *s, float loss)
{
    braid_status_t st = BRAID_OK;
    if (is_root(s)) {
        braid_train_ckpt_state_t cs = {.step       = s->step,
                                       .adam_t     = s->opt.t,
                                       .seed       = s->o->seed,
                                       .batch      = s->batch,
                                       .seq        = s->T,
                                       .data_bytes = s->data->n,
                                       .data_hash  = s->data_hash,
                                       .loss       = loss};
        st = braid_train_ckpt_save(s->o->save_dir, s->model, &s->opt, &cs);
        if (st == BRAID_OK && !s->o->quiet)
            printf("%scheckpoint: %s (step %ld)\n", s->tty ? "\r\033[K" : "",
                   s->o->save_dir, s->step);
    }
    return agree(s, st);
}

static int every(long step, long k, long last)
{
    return step == last || (k > 0 && step % k == 0);
}

/* ----------------------------------------------------------------------------
 * the run */

static void summarise(braid_train_result_t *res, long n)
{
    double *v = malloc((size_t)(n > 0 ? n : 1) * 4 * sizeof(double));
    if (v == NULL)
        return;
    /* the first step of a session pays for first touches of memory */
    long first = n > 1 ? 1 : 0, k = n - first;
    for (long i = 0; i < k; i++) {
        v[i]         = res->steps[first + i].ms;
        v[k + i]     = res->steps[first + i].wait_ms;
        v[2 * k + i] = res->steps[first + i].poll_ms;
        v[3 * k + i] = res->steps[first + i].cpu_ms;
    }
    res->med_ms      = braid_train_median(v, (size_t)k);
    res->med_wait_ms = braid_train_median(v + k, (size_t)k);
    res->med_poll_ms = braid_train_median(v + 2 * k, (size_t)k);
    res->med_cpu_ms  = braid_train_median(v + 3 * k, (size_t)k);
    res->tok_s       = res->med_ms > 0
                           ? (double)res->tokens_per_step / (res->med_ms * 1e-3)
                           : 0.0;
    free(v);
}

/* One tick of a scaling trial on the world communicator: MAX of `over`
 * over every rank (1 once the trial's ranks are done).  Idle ranks test
 * and sleep; the trial's ranks block, outside their timed steps. */
static braid_status_t tick(braid_comm_t *world, int32_t over, int32_t *all,
                           int sleepy)
{
    braid_request_t *req;
    braid_status_t   st =
        braid_iallreduce(&over, all, 1, BRAID_I32, BRAID_MAX, world, &req);
    if (st == BRAID_OK && !sleepy)
        st = braid_wait(req);
    for (int done = 0; st == BRAID_OK && sleepy && !done;) {
        st = braid_test(req, &done);
        if (st == BRAID_OK && !done)
            usleep(1000);
    }
    return st == BRAID_OK ? st : braid_eng_fail_braid(st, "scaling trial");
}

braid_status_t braid_train_idle(braid_comm_t *world)
{
    int32_t        all = 0;
    braid_status_t st  = BRAID_OK;
    while (st == BRAID_OK && all == 0)
        st = tick(world, 0, &all, 1);
    return st;
}

braid_status_t braid_train_run(braid_train_result_t     *res,
                               const braid_train_opts_t *o,
                               const braid_train_data_t *data,
                               braid_comm_t *comm, int trial,
                               braid_comm_t *idle)
{
    session_t s;
    int       quiet = trial;
    int32_t   all;
    *res              = (braid_train_result_t){.ranks     = braid_comm_size(comm),
                                               .final_val = NAN};
    braid_status_t st = session_open(&s, o, data, comm, quiet);
    long end = o->stop_at > 0 && o->stop_at < o->steps ? o->stop_at : o->steps;
    long todo            = st == BRAID_OK && end > s.step ? end - s.step : 0;
    res->tokens_per_step = s.tokens_per_step;
    res->steps = calloc((size_t)(todo > 0 ? todo : 1), sizeof(*res->steps));
    if (st == BRAID_OK && res->steps == NULL)
        st = braid_eng_fail(BRAID_ERR_NO_MEMORY, "out of memory");
    if (st == BRAID_OK && is_root(&s) && !quiet && !o->quiet) {
        print_header(&s);
        if (s.step > 0)
            printf("resuming from %s at step %ld\n", o->resume_dir, s.step);
    }
    while (st == BRAID_OK && s.step < end) {
        braid_train_step_t *rec = &res->steps[res->nsteps];
        st                      = train_step(&s, rec);
        if (st != BRAID_OK)
            break;
        res->nsteps++;
        int last = s.step == end;
        if (idle != NULL)
            st = tick(idle, last, &all, 0);
        if (!quiet && o->val_frac > 0 && every(s.step, o->val_every, end))
            st = validate(&s, &rec->val);
        if (st == BRAID_OK && every(s.step, o->check_every, end))
            st = check_replicas(&s);
        if (st == BRAID_OK && !quiet && o->save_dir != NULL &&
            every(s.step, o->save_every, end))
            st = save(&s, rec->loss);
        if (!is_root(&s) || quiet)
            continue;
        if (s.log != NULL)
            braid_train_log_step(s.log, rec);
        if (!o->quiet && (last || s.step % o->log_every == 0 || s.tty))
            braid_train_report_step(rec, end, s.tokens_per_step, s.tty);
        if (!o->quiet && !isnan(rec->val))
            braid_train_report_val(s.step, rec->val, s.tty);
    }
    /* a trial that failed early still ends the idle ranks' wait */
    if (idle != NULL && st != BRAID_OK && s.step < end)
        tick(idle, 1, &all, 0);
    if (res->nsteps > 0)
        res->final_val = res->steps[res->nsteps - 1].val;
    summarise(res, res->nsteps);
    if (st == BRAID_OK && is_root(&s) && !quiet && !o->quiet)
        braid_train_report_summary(res, s.tty);
    session_close(&s);
    return st;
}

void braid_train_result_free(braid_train_result_t *res)
{
    free(res->steps);
    res->steps = NULL;
}
