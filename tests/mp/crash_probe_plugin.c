/* A plugin whose probe crashes, for the loader's crash isolation
 * (test_crashprobe.c).  The environment says where and how:
 *
 *   BRAID_TEST_CRASH_IN  plugin (default) or transport: the plugin's probe
 *                        or its transport's ('crashtl')
 *   BRAID_TEST_CRASH     segv (default), bus, fpe, ill, abort, stack, none
 *
 * The crashes are real faults, not raise(): a store through NULL, a read of
 * a mapped page past the end of its file, an integer division by zero, a
 * trap instruction, abort(), and unbounded recursion.  They are kept out of
 * UBSan's sight, which would otherwise report the NULL store and the
 * division first (the point here is the crash, not the diagnosis).
 *
 * The transport is complete enough to pass any descriptor check, and the
 * plugin brings no algorithm, so that nothing it has can be chosen for a
 * collective: after a crash the job must run on the other plugins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <braid/plugin.h>

#define EXPORT   __attribute__((visibility("default")))
#define NO_UBSAN __attribute__((no_sanitize("undefined"), noinline))

/* volatile: the compiler must not see the faults coming (nor turn 1 / x
 * into a comparison). */
static volatile int zero, one = 1;

static NO_UBSAN void crash_segv(void)
{
    volatile int *volatile p = NULL;
    *p                       = 1;
}

static NO_UBSAN void crash_bus(void)
{
    /* A page of an empty file: mapping it is fine, touching it is SIGBUS. */
    FILE *f = tmpfile();
    if (f == NULL)
        return;
    volatile char *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fileno(f), 0);
    if (m != MAP_FAILED)
        (void)m[0];
    fclose(f);
}

static NO_UBSAN void crash_fpe(void)
{
    volatile int x = one / zero;
    (void)x;
}

static NO_UBSAN int crash_stack(int depth)
{
    /* Large frames, so that the stack runs out within a few thousand calls
     * (a sanitizer's own per-call bookkeeping stays small). */
    volatile char frame[16384];
    frame[0]                 = (char)depth;
    frame[sizeof(frame) - 1] = (char)depth;
    if (zero != 0) /* never: but the compiler cannot call it infinite */
        return depth;
    return crash_stack(depth + 1) + frame[0] + frame[sizeof(frame) - 1];
}

/* Crashes as BRAID_TEST_CRASH says, if `where` is the place asked for. */
static braid_status_t maybe_crash(const char *where, char *why, size_t why_len)
{
    const char *in  = getenv("BRAID_TEST_CRASH_IN");
    const char *how = getenv("BRAID_TEST_CRASH");
    if (strcmp(in ? in : "plugin", where) != 0)
        return BRAID_OK;
    how = how ? how : "segv";
    if (strcmp(how, "segv") == 0)
        crash_segv();
    else if (strcmp(how, "bus") == 0)
        crash_bus();
    else if (strcmp(how, "fpe") == 0)
        crash_fpe();
    else if (strcmp(how, "ill") == 0)
        __builtin_trap();
    else if (strcmp(how, "abort") == 0)
        abort();
    else if (strcmp(how, "stack") == 0)
        (void)crash_stack(0);
    else if (strcmp(how, "none") == 0)
        return BRAID_OK;
    /* Still here: the crash did not happen, which the test must notice. */
    if (why_len > 0) {
        strncpy(why, "asked to crash but did not", why_len - 1);
        why[why_len - 1] = '\0';
    }
    return BRAID_ERR_UNAVAILABLE;
}

static braid_status_t plugin_probe(const braid_plugin_t   *self,
                                   const braid_services_t *svc, char *why,
                                   size_t why_len)
{
    (void)self, (void)svc;
    return maybe_crash("plugin", why, why_len);
}

static braid_status_t tl_probe(const braid_transport_t *self,
                               const braid_services_t *svc, char *why,
                               size_t why_len)
{
    (void)self, (void)svc;
    return maybe_crash("transport", why, why_len);
}

/* Never reached after a crash; with BRAID_TEST_CRASH=none, every
 * communicator declines it. */
static braid_status_t tl_comm_create(const braid_transport_t *self,
                                     const braid_services_t  *svc,
                                     const braid_oob_t       *oob,
                                     const braid_topo_t *topo, void **tcomm)
{
    (void)self, (void)oob;
    (void)topo;
    *tcomm = NULL;
    return svc->error(BRAID_ERR_UNAVAILABLE, "crashtl: a test transport");
}

static void tl_comm_destroy(void *tcomm) { (void)tcomm; }

static void tl_link(void *tcomm, braid_link_t *link)
{
    (void)tcomm, (void)link; /* the core zero-filled it */
}

static braid_status_t tl_isend(void *tcomm, int peer, uint64_t tag,
                               const void *buf, size_t len, braid_treq_t *req)
{
    (void)tcomm, (void)peer, (void)tag, (void)buf, (void)len, (void)req;
    return BRAID_ERR_UNAVAILABLE;
}

static braid_status_t tl_irecv(void *tcomm, int peer, uint64_t tag, void *buf,
                               size_t len, braid_treq_t *req)
{
    (void)tcomm, (void)peer, (void)tag, (void)buf, (void)len, (void)req;
    return BRAID_ERR_UNAVAILABLE;
}

static braid_status_t tl_test(void *tcomm, braid_treq_t *req)
{
    (void)tcomm, (void)req;
    return BRAID_ERR_UNAVAILABLE;
}

static braid_status_t tl_progress(void *tcomm)
{
    (void)tcomm;
    return BRAID_OK;
}

static void tl_cancel(void *tcomm, braid_treq_t *req)
{
    (void)tcomm;
    req->active = 0;
}

static const braid_transport_t crash_tl = {
    .struct_size  = sizeof(braid_transport_t),
    .name         = "crashtl",
    .caps         = BRAID_CAP_SENDRECV,
    .probe        = tl_probe,
    .comm_create  = tl_comm_create,
    .comm_destroy = tl_comm_destroy,
    .link         = tl_link,
    .isend        = tl_isend,
    .irecv        = tl_irecv,
    .test         = tl_test,
    .progress     = tl_progress,
    .cancel       = tl_cancel,
};

static const braid_transport_t *const transports[] = {&crash_tl};

EXPORT const braid_plugin_t braid_plugin_v4 = {
    .abi_version  = BRAID_PLUGIN_ABI_VERSION,
    .struct_size  = sizeof(braid_plugin_t),
    .name         = "crashprobe",
    .version      = "0",
    .probe        = plugin_probe,
    .n_transports = 1,
    .transports   = transports,
    .n_algos      = 0,
    .algos        = NULL,
};
