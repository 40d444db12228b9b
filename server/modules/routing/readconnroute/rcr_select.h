/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readconnroute's server selection, as a pure function so the unit test can
 * exercise it without servers, sessions or a running core.
 *
 * The router copies what it needs of each of its service's servers (status
 * bits, weight, its own count of sessions on that server) into an array of
 * struct rcr_candidate in configuration order and asks rcr_select() which
 * one a new session should use.
 */
#ifndef RCR_SELECT_H
#define RCR_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bits of the router_options mask, in the order of the enum_values table
 * ("master", "slave", "running", "synced"). */
enum rcr_option {
    RCR_OPT_MASTER = 1u << 0,
    RCR_OPT_SLAVE = 1u << 1,
    RCR_OPT_RUNNING = 1u << 2,
    RCR_OPT_SYNCED = 1u << 3,
};

struct rcr_candidate {
    uint32_t status;   /* enum sl_server_status bits, one atomic snapshot */
    int weight;        /* sl_server_weight(); <= 0 means "last resort" */
    int64_t sessions;  /* this router's sessions on the server now */
    int64_t lag;       /* replication lag in seconds as the monitor measured
                        * it; SL_SERVER_LAG_UNKNOWN (-1) when unknown */
    int rank;          /* sl_server_rank(): 0 primary, 1 secondary */
};

/*
 * Pick the server for a new session.
 *
 * Eligible: usable (Running, not Maintenance), not Draining, and matching
 * any role in `options`: master = has Master; slave = has Slave and not
 * Master; running = any; synced = has Synced. Only the eligible servers of
 * the best rank count (a secondary-rank server only while no primary-rank
 * one is eligible: MaxScale's rule for readconnroute). Among those, the one
 * with the fewest (sessions + 1) / weight wins; servers of weight 0 are
 * chosen only when no eligible server has a positive weight; ties go to
 * the first in configuration order. With max_lag_s > 0 a server that is
 * not Master is eligible only if its lag is known and at most max_lag_s
 * (max_replication_lag). When nothing is eligible, a usable,
 * non-draining Master is chosen by the same rules (rank first) (MaxScale's fallback: a
 * replica service keeps working on the primary alone).
 *
 * Returns the index into c[0..n), or -1 when no server can be used.
 * Pure; any thread.
 */
int rcr_select(const struct rcr_candidate *c, size_t n, uint32_t options,
               int64_t max_lag_s);

/* True when status matches `options` for a new session (the eligibility
 * rule above, without the master fallback). */
bool rcr_eligible(uint32_t status, uint32_t options);

#endif
