/* The ucp context, one per process, created lazily and refcounted.
 *
 * Why shared rather than one per communicator: ucp_init opens every device
 * and memory domain UCX finds (IB contexts, shared-memory segments, TCP
 * interfaces) and installs its memory hooks; doing that for each of the
 * communicators a program splits off costs milliseconds and device resources
 * for nothing, since a worker per communicator already isolates progress and
 * tag matching.  Workers of different communicators may then be driven by
 * different threads at the same time, so the context is created with
 * mt_workers_shared = 1 (it guards its registration state itself). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <ucs/debug/log_def.h>

#include "tl_ucx.h"

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static ucp_context_h   ctx_handle;
static long            ctx_refs;

/* UCX logs through handlers that the last pushed sees first; ours is there
 * while the context lives (pushed with it, popped before ucp_cleanup), so
 * that it never outlives this plugin. */
typedef void (*log_fn_t)(braid_log_level_t, const char *, const char *, ...);
static _Thread_local int log_quiet;
static log_fn_t          log_fn; /* the core's, set with the context */

static ucs_log_func_rc_t log_handler(const char *file, unsigned line,
                                     const char     *function,
                                     ucs_log_level_t level,
                                     const ucs_log_component_config_t *comp,
                                     const char *message, va_list ap)
{
    char text[256];
    (void)file, (void)line, (void)function, (void)comp;
    if (!log_quiet || level <= UCS_LOG_LEVEL_FATAL || log_fn == NULL)
        return UCS_LOG_FUNC_RC_CONTINUE;
    vsnprintf(text, sizeof(text), message, ap);
    log_fn(BRAID_LOG_DEBUG, BRAID_UCX_COMPONENT, "UCX (during teardown): %s",
           text);
    return UCS_LOG_FUNC_RC_STOP;
}

void braid_ucx_log_quiet(int on) { log_quiet = on; }

braid_status_t braid_ucx_context_acquire(ucp_context_h          *context,
                                         const braid_services_t *svc,
                                         ucs_status_t           *ucs_status)
{
    ucp_config_t  *config = NULL;
    ucp_params_t   params;
    ucs_status_t   st     = UCS_OK;
    braid_status_t status = BRAID_OK;

    pthread_mutex_lock(&ctx_lock);
    if (ctx_refs > 0) {
        ctx_refs++;
        *context = ctx_handle;
        goto out;
    }

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        status = BRAID_ERR_UNAVAILABLE;
        goto out;
    }
    memset(&params, 0, sizeof(params));
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE |
        UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    /* Tagged messages, and active messages for put_signal (rma.c says
     * why not RMA). */
    params.features          = UCP_FEATURE_TAG | UCP_FEATURE_AM;
    params.request_size      = sizeof(braid_ucx_op_t);
    params.mt_workers_shared = 1;
    params.name              = "braid";
    st                       = ucp_init(&params, config, &ctx_handle);
    ucp_config_release(config);
    if (st != UCS_OK) {
        ctx_handle = NULL;
        status     = BRAID_ERR_UNAVAILABLE;
        goto out;
    }
    ctx_refs = 1;
    *context = ctx_handle;
    log_fn   = svc != NULL ? svc->log : NULL;
    ucs_log_push_handler(log_handler);
out:
    pthread_mutex_unlock(&ctx_lock);
    if (ucs_status) {
        *ucs_status = st;
    }
    return status;
}

void braid_ucx_context_release(void)
{
    pthread_mutex_lock(&ctx_lock);
    if (ctx_refs > 0 && --ctx_refs == 0) {
        ucs_log_pop_handler();
        ucp_cleanup(ctx_handle);
        ctx_handle = NULL;
    }
    pthread_mutex_unlock(&ctx_lock);
}
