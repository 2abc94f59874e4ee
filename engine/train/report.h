/* What braid-train prints: a progress bar on a terminal or a line per step
 * otherwise, the run's summary, the scaling table, a per-step CSV and a
 * loss plot (gnuplot). */
#ifndef BRAID_TRAIN_REPORT_H
#define BRAID_TRAIN_REPORT_H

#include <stdio.h>

#include "train.h"

/* Median of v[n] (reorders v); 0 for n == 0. */
double braid_train_median(double *v, size_t n);

/* One step: tty redraws a bar in place, otherwise prints a line. */
void braid_train_report_step(const braid_train_step_t *s, long last,
                             long tokens_per_step, int tty);
/* A validation result, as a line of its own (after a bar: below it). */
void braid_train_report_val(long step, float val, int tty);
void braid_train_report_summary(const braid_train_result_t *r, int tty);

/* Rows = trials (rank count, overlap or not), columns = tokens/s, speedup
 * and scaling efficiency against the 1-rank row (or the smallest count). */
void braid_train_report_table(const braid_train_result_t *rows,
                              const int *overlap, int n);

/* Per-step CSV; the file is opened by the caller. */
void braid_train_log_header(FILE *f);
void braid_train_log_step(FILE *f, const braid_train_step_t *s);

/* Draws the loss curve (and validation points) into a PNG with gnuplot. */
braid_status_t braid_train_plot(const char *png, const braid_train_step_t *s,
                                long n, const char *title);

#endif
