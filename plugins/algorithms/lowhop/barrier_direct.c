/* barrier "direct": one stage of flags.
 *
 * Every rank put_signals an empty message -- the flag alone -- into its slot
 * of every peer's receive area, then waits for the n-1 flags of this call.
 * One stage where dissemination needs ceil(log2 n) rounds of messages, each
 * of which on an oversubscribed host costs a scheduling round.
 *
 * The banks make it safe without more: a rank leaves barrier k only once
 * every peer has entered it, so no rank can reach barrier k+2 (which reuses
 * bank k's slots) while a peer still looks for barrier k's flags
 * (recv_area.h). */
#include "exchange.h"
#include "lowhop.h"

static braid_status_t barrier_start(braid_task_t *task, braid_wait_t *wait)
{
    (void)wait;
    /* No data: the exchange carries flags only (slot of the minimum size). */
    return braid_lowhop_xchg_start(task, 0, 0, "direct barrier");
}

static braid_status_t barrier_progress(braid_task_t *task, braid_wait_t *wait)
{
    braid_lowhop_xchg_t *s = task->priv;
    braid_status_t       st;

    if (s->area == NULL)
        return BRAID_OK; /* one rank */
    /* &s->flag: a valid source address for transports that look at it. */
    if ((st = braid_lowhop_xchg_drive(task, s, &s->flag, 0, 0)) != BRAID_OK)
        return st;
    int got = braid_lowhop_xchg_arrived(task, s, wait);
    if (got < 0)
        return braid_lowhop_mismatch(task, s->area, s->bank, s->odd, s->flag);
    return got > 0 && s->sent ? BRAID_OK : braid_lowhop_xchg_more(task, s);
}

static double barrier_estimate(const braid_algo_t    *self,
                               const braid_cost_in_t *in)
{
    (void)self;
    return braid_lowhop_cost_barrier_direct(in);
}

const braid_algo_t braid_lowhop_barrier_direct_algo = {
    .struct_size     = sizeof(braid_algo_t),
    .mem_types       = BRAID_MEM_BIT(BRAID_MEM_HOST),
    .name            = "direct",
    .coll            = BRAID_COLL_BARRIER,
    .needs_caps      = BRAID_CAP_PUT_SIGNAL,
    .transport       = NULL,
    .estimate        = barrier_estimate,
    .start           = barrier_start,
    .progress        = barrier_progress,
    .finish          = braid_lowhop_xchg_finish,
    .comm_state_free = braid_lowhop_area_free,
};
