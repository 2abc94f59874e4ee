/* braid-train's output (see report.h). */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "engine/common/err.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double braid_train_median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double tok_s(const braid_train_step_t *s, long tokens_per_step)
{
    return s->ms > 0 ? (double)tokens_per_step / (s->ms * 1e-3) : 0.0;
}

void braid_train_report_step(const braid_train_step_t *s, long last,
                             long tokens_per_step, int tty)
{
    double comm = s->ms > 0 ? 100.0 * s->wait_ms / s->ms : 0.0;
    if (!tty) {
        printf("step %5ld/%ld | loss %.4f | lr %.2e | norm %6.3f | %8.1f ms "
               "| %8.0f tok/s | all-reduce wait %6.1f ms (%4.1f%%), in "
               "backward %5.1f ms\n",
               s->step, last, s->loss, s->lr, s->norm, s->ms,
               tok_s(s, tokens_per_step), s->wait_ms, comm, s->poll_ms);
        fflush(stdout);
        return;
    }
    enum { WIDTH = 24 };
    int  fill = last > 0 ? (int)(WIDTH * s->step / last) : WIDTH;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    printf("\r[%s] %ld/%ld  loss %.4f  %.0f tok/s  %.1f ms/step  wait "
           "%.1f ms (%.1f%%)\033[K",
           bar, s->step, last, s->loss, tok_s(s, tokens_per_step), s->ms,
           s->wait_ms, comm);
    if (s->step == last)
        printf("\n");
    fflush(stdout);
}

void braid_train_report_val(long step, float val, int tty)
{
    printf("%sstep %5ld | validation loss %.4f\n", tty ? "\r\033[K" : "", step,
           val);
    fflush(stdout);
}

void braid_train_report_summary(const braid_train_result_t *r, int tty)
{
    (void)tty;
    if (r->nsteps == 0)
        return;
    const braid_train_step_t *last = &r->steps[r->nsteps - 1];
    printf("done: %ld steps on %d rank%s, %ld tokens/step | median %.1f "
           "ms/step, %.0f tok/s | waiting for all-reduces %.1f ms (%.1f%% "
           "of the step), posting and testing them during backward %.1f ms "
           "| loss "
           "%.4f",
           r->nsteps, r->ranks, r->ranks == 1 ? "" : "s", r->tokens_per_step,
           r->med_ms, r->tok_s, r->med_wait_ms,
           r->med_ms > 0 ? 100.0 * r->med_wait_ms / r->med_ms : 0.0,
           r->med_poll_ms, last->loss);
    if (!isnan(r->final_val))
        printf(", validation %.4f", r->final_val);
    printf("\n");
    fflush(stdout);
}

void braid_train_report_table(const braid_train_result_t *rows,
                              const int *overlap, int n)
{
    /* the baseline: the fewest ranks (1 if it ran) */
    int base = 0;
    for (int i = 1; i < n; i++)
        if (rows[i].ranks < rows[base].ranks)
            base = i;
    double b        = rows[base].tok_s / rows[base].ranks; /* per rank */
    double cpu_base = rows[base].med_cpu_ms;
    printf("\n%6s  %-10s %10s %8s %10s %9s %8s %6s %9s %8s %8s\n", "ranks",
           "mode", "tokens/s", "speedup", "efficiency", "ms/step", "wait ms",
           "wait%", "in-bwd ms", "CPU ms", "CPU eff");
    for (int i = 0; i < n; i++) {
        const braid_train_result_t *r = &rows[i];
        double speedup = b > 0 ? r->tok_s / (b * rows[base].ranks) : 0.0;
        double eff     = b > 0 ? r->tok_s / (b * r->ranks) : 0.0;
        printf("%6d  %-10s %10.0f %7.2fx %9.1f%% %9.1f %8.1f %5.1f%% %9.1f "
               "%8.1f %7.1f%%\n",
               r->ranks,
               r->ranks == 1 ? "-"
               : overlap[i]  ? "overlap"
                             : "no-overlap",
               r->tok_s, speedup, 100.0 * eff, r->med_ms, r->med_wait_ms,
               r->med_ms > 0 ? 100.0 * r->med_wait_ms / r->med_ms : 0.0,
               r->med_poll_ms, r->med_cpu_ms,
               r->med_cpu_ms > 0 ? 100.0 * cpu_base / r->med_cpu_ms : 0.0);
    }
    printf("(speedup: tokens/s over the %d-rank row; efficiency: tokens/s "
           "per rank over the %d-rank row's; wait: blocked on the gradient "
           "all-reduce after the backward pass; in-bwd: in braid calls "
           "during it; CPU: the step's CPU time per rank, CPU eff the "
           "%d-rank row's over it, which a loaded host disturbs less than "
           "wall time; medians)\n",
           rows[base].ranks, rows[base].ranks, rows[base].ranks);
    fflush(stdout);
}

void braid_train_log_header(FILE *f)
{
    fprintf(f, "step,loss,val_loss,lr,grad_norm,ms,wait_ms,poll_ms,cpu_ms\n");
}

void braid_train_log_step(FILE *f, const braid_train_step_t *s)
{
    char val[32] = "";
    if (!isnan(s->val))
        snprintf(val, sizeof(val), "%.6f", s->val);
    fprintf(f, "%ld,%.6f,%s,%.6e,%.6f,%.3f,%.3f,%.3f,%.3f\n", s->step, s->loss,
            val, s->lr, s->norm, s->ms, s->wait_ms, s->poll_ms, s->cpu_ms);
    fflush(f);
}

braid_status_t braid_train_plot(const char *png, const braid_train_step_t *s,
                                long n, const char *title)
{
    /* gnuplot reads the script and the data (inline data blocks) from a
     * pipe; it is Debian's gnuplot-nox, with the pngcairo or png terminal */
    FILE *g = popen("gnuplot 2>&1", "w");
    if (g == NULL)
        return braid_eng_fail(BRAID_ERR_UNAVAILABLE,
                              "--plot: cannot run "
                              "gnuplot: %s",
                              strerror(errno));
    int nval = 0;
    for (long i = 0; i < n; i++)
        nval += !isnan(s[i].val);
    fprintf(g, "set terminal png size 900,540\nset output '%s'\n", png);
    fprintf(g,
            "set title \"%s\" noenhanced\nset xlabel 'step'\n"
            "set ylabel 'loss (nats per byte)'\nset grid\n",
            title);
    fprintf(g, "$train << EOD\n");
    for (long i = 0; i < n; i++)
        fprintf(g, "%ld %.6f\n", s[i].step, s[i].loss);
    fprintf(g, "EOD\n$val << EOD\n");
    for (long i = 0; i < n; i++)
        if (!isnan(s[i].val))
            fprintf(g, "%ld %.6f\n", s[i].step, s[i].val);
    fprintf(g, "EOD\nplot $train with lines lw 2 title 'train'");
    if (nval > 0)
        fprintf(g, ", $val with linespoints pt 7 lw 2 title 'validation'");
    fprintf(g, "\n");
    int rc = pclose(g);
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        return braid_eng_fail(
            BRAID_ERR_UNAVAILABLE,
            "--plot %s: gnuplot "
            "failed (exit status %d; is gnuplot-nox "
            "installed?)",
            png, rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc));
    return BRAID_OK;
}
