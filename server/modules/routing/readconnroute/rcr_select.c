/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readconnroute's server selection (see rcr_select.h for the rules).
 *
 * Pure functions over a snapshot: no globals, no locks, no allocation. The
 * router takes the snapshot in new_session; two workers choosing at the
 * same moment may both see the same counts and pick the same server, which
 * only skews the balance by one session and is corrected by the next
 * choice.
 */
#include "rcr_select.h"

#include <sluice/server.h>

bool
rcr_eligible(uint32_t status, uint32_t options)
{
    if (!sl_server_is_usable(status) || (status & SL_SRV_DRAINING)) {
        return false;
    }
    if (options & RCR_OPT_RUNNING) {
        return true;
    }
    if ((options & RCR_OPT_MASTER) && (status & SL_SRV_MASTER)) {
        return true;
    }
    /* A server that is both (a relay that is also the primary's peer) is
     * the primary for our purposes: a replica-only service skips it. */
    if ((options & RCR_OPT_SLAVE) && (status & SL_SRV_SLAVE) &&
        !(status & SL_SRV_MASTER)) {
        return true;
    }
    return (options & RCR_OPT_SYNCED) && (status & SL_SRV_SYNCED);
}

/*
 * True when a is a strictly better choice than b: a positive weight beats
 * weight 0; otherwise compare (sessions + 1) / weight by cross
 * multiplication (integers, no rounding). Strict, so ties keep the earlier
 * server.
 */
static bool
better(const struct rcr_candidate *a, const struct rcr_candidate *b)
{
    int64_t wa = a->weight > 0 ? a->weight : 0;
    int64_t wb = b->weight > 0 ? b->weight : 0;

    if ((wa > 0) != (wb > 0)) {
        return wa > 0;
    }
    if (wa == 0) {
        return a->sessions < b->sessions;
    }
    return (a->sessions + 1) * wb < (b->sessions + 1) * wa;
}

/* max_replication_lag: a replica of unknown lag or lagging more is not
 * chosen; the primary's own lag is irrelevant. */
static bool
lag_ok(const struct rcr_candidate *c, int64_t max_lag_s)
{
    return max_lag_s <= 0 || (c->status & SL_SRV_MASTER) ||
           (c->lag >= 0 && c->lag <= max_lag_s);
}

/* The least loaded of the eligible servers of the best (lowest) rank:
 * a secondary server only while no primary-rank one is eligible. */
static int
least_loaded(const struct rcr_candidate *c, size_t n, uint32_t options,
             int64_t max_lag_s)
{
    int best = -1;

    for (size_t i = 0; i < n; i++) {
        if (!rcr_eligible(c[i].status, options) ||
            !lag_ok(&c[i], max_lag_s)) {
            continue;
        }
        if (best < 0 || c[i].rank < c[best].rank ||
            (c[i].rank == c[best].rank && better(&c[i], &c[best]))) {
            best = (int)i;
        }
    }
    return best;
}

int
rcr_select(const struct rcr_candidate *c, size_t n, uint32_t options,
           int64_t max_lag_s)
{
    int best = least_loaded(c, n, options, max_lag_s);

    if (best < 0 && options != RCR_OPT_MASTER) {
        best = least_loaded(c, n, RCR_OPT_MASTER, 0);
    }
    return best;
}
