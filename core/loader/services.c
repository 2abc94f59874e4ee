/* The services the core hands to plugins: logging, errors, kernels, clock. */
#include "kernels/reduce.h"
#include "loader/loader.h"
#include "util/env.h"
#include "util/log.h"

static braid_status_t services_error(braid_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    braid_verror(status, fmt, ap);
    va_end(ap);
    return status;
}

static void services_log(braid_log_level_t level, const char *component,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    braid_vlog(level, component, fmt, ap);
    va_end(ap);
}

static const braid_services_v3_t services = {
    .log        = services_log,
    .error      = services_error,
    .reduce     = braid_kernel_reduce,
    .reduce2    = braid_kernel_reduce2,
    .finish_avg = braid_kernel_finish_avg,
    .timeout_s  = braid_timeout_s,
    .now        = braid_now_s,
};

const braid_services_v3_t *braid_core_services(void) { return &services; }
