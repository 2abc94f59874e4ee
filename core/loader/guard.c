/* Runs a plugin's or transport's probe so that a probe that crashes is
 * reported and skipped instead of taking the process down.
 *
 * Why on the calling thread, with temporary handlers and siglongjmp, and not
 * in a forked child first: braid_init may run in a process that already has
 * threads (the application's, UCX's), and a child forked from it may
 * deadlock on a lock one of them held; probes also set up state the plugin
 * keeps (a UCX context, a device list), so a child's probe would have to be
 * repeated in the parent, doubling the slowest part of start-up, and would
 * not even be the same probe.  So the probe runs where it always did, with
 * handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (abort, assert)
 * installed only for its duration; a handler that runs on the probing
 * thread jumps back out of the probe with the signal's number.
 *
 * What that cannot undo, and how the loader lives with it:
 * - The crashed plugin's code may have left its own state half made, so the
 *   loader never calls a plugin whose probe crashed again (one whose
 *   transport's probe crashed loses that transport only), and unloads
 *   neither: dlclose would run destructors that could crash in turn, so
 *   the library stays mapped until exit.
 * - A lock the probe held when it crashed stays held.  A later call that
 *   needs it would hang; nothing can be done about that from outside.
 * - The handlers are process-wide.  A fault on another thread during a probe
 *   is not the probe's: the handler gives that signal back to whatever was
 *   installed before (the default, or a sanitizer's handler) and lets it
 *   happen again there.
 * - A probe that overflows its stack faults with no stack left to run a
 *   handler on, so one is lent (sigaltstack) where the thread has none.
 *   Sanitizers install their own alternate stacks, which are left alone.
 * - AddressSanitizer and ThreadSanitizer install or intercept handlers of
 *   their own; the previous action of each signal is saved and restored
 *   exactly, so their handling resumes after the probe.
 *
 * Probes run one at a time (the loader holds its lock), so one set of
 * statics describes the probe in progress. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader/loader.h"

static const int guarded[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_GUARDED ((int)(sizeof(guarded) / sizeof(guarded[0])))

/* 64 KiB: TSan runs its own handler before ours on this stack. */
#define ALT_STACK_SIZE (64 * 1024)

static sigjmp_buf       guard_env;
static struct sigaction guard_old[N_GUARDED];
static pid_t            guard_tid; /* the probing thread; 0 between probes */

static void guard_handler(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (gettid() == __atomic_load_n(&guard_tid, __ATOMIC_ACQUIRE))
        siglongjmp(guard_env, sig);

    /* Another thread's signal: hand it back to the previous action. */
    int saved_errno = errno;
    for (int i = 0; i < N_GUARDED; i++)
        if (guarded[i] == sig)
            sigaction(sig, &guard_old[i], NULL);
    /* A fault happens again when the instruction re-runs on return; a sent
     * signal (si_code <= 0: kill, raise, abort) would be lost, so it is
     * sent again (still blocked here, it arrives once this returns). */
    if (info == NULL || info->si_code <= 0)
        raise(sig);
    errno = saved_errno;
}

const char *braid_loader_signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
    }
}

/* Lends the thread an alternate signal stack if it has none; *lent gets
 * the memory to take back (NULL when nothing was lent). */
static void lend_alt_stack(void **lent)
{
    stack_t cur;
    *lent = NULL;
    if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
        return;
    stack_t ss = {.ss_sp    = malloc(ALT_STACK_SIZE),
                  .ss_flags = 0,
                  .ss_size  = ALT_STACK_SIZE};
    if (ss.ss_sp == NULL)
        return; /* no overflow protection; every other crash still is */
    if (sigaltstack(&ss, NULL) != 0) {
        free(ss.ss_sp);
        return;
    }
    *lent = ss.ss_sp;
}

static void take_back_alt_stack(void *lent)
{
    if (lent == NULL)
        return;
    stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
    sigaltstack(&off, NULL);
    free(lent);
}

/* Kept apart (and out of line) so that no local of the caller lives across
 * the jump.  savemask = 1: the jump also restores the signal mask of this
 * point, which the kernel changed on entry to the handler. */
static __attribute__((noinline)) int run_probe(braid_probe_call_t probe,
                                               void *ctx, char *why,
                                               size_t          why_len,
                                               braid_status_t *st)
{
    int crashed = sigsetjmp(guard_env, 1);
    if (crashed == 0)
        *st = probe(ctx, why, why_len);
    return crashed;
}

int braid_loader_probe_guarded(braid_probe_call_t probe, void *ctx, char *why,
                               size_t why_len, braid_status_t *st)
{
    struct sigaction act;
    void            *alt;
    int              installed = 0;

    memset(&act, 0, sizeof(act));
    act.sa_sigaction = guard_handler;
    act.sa_flags     = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&act.sa_mask);

    lend_alt_stack(&alt);
    for (; installed < N_GUARDED; installed++)
        if (sigaction(guarded[installed], &act, &guard_old[installed]) != 0)
            break;
    __atomic_store_n(&guard_tid, gettid(), __ATOMIC_RELEASE);

    int crashed = run_probe(probe, ctx, why, why_len, st);

    __atomic_store_n(&guard_tid, 0, __ATOMIC_RELEASE);
    for (int i = installed - 1; i >= 0; i--) {
        /* A probe may install handlers of its own (UCX does, for its error
         * reports): those stay; only ours is taken down. */
        struct sigaction cur;
        if (sigaction(guarded[i], NULL, &cur) == 0 &&
            (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == guard_handler)
            sigaction(guarded[i], &guard_old[i], NULL);
    }
    take_back_alt_stack(alt);
    return crashed;
}
