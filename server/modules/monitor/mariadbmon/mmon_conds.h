/* SPDX-License-Identifier: Apache-2.0 */
/*
 * master_conditions and slave_conditions (MaxScale 24.02): what a primary
 * candidate and a replica must satisfy, beyond the topology, to be
 * published Master and Slave. Pure functions over the tick's views (the
 * unit test compiles mmon_conds.c with mmon_decide.c).
 */
#ifndef SLUICE_MMON_CONDS_H
#define SLUICE_MMON_CONDS_H

#include <stdbool.h>
#include <stddef.h>

#include "mmon.h"

/* The enum values, in MaxScale's order (bit i = value i). */
extern const char *const mmon_master_cond_names[];
extern const char *const mmon_slave_cond_names[];

enum {
    MMON_MC_NONE = 1u << 0,
    MMON_MC_CONNECTING_SLAVE = 1u << 1,
    MMON_MC_CONNECTED_SLAVE = 1u << 2,
    MMON_MC_RUNNING_SLAVE = 1u << 3,
    MMON_MC_PRIMARY_MONITOR_MASTER = 1u << 4,
    MMON_MC_DISK_SPACE_OK = 1u << 5,
};

enum {
    MMON_SC_NONE = 1u << 0,
    MMON_SC_LINKED_MASTER = 1u << 1,
    MMON_SC_RUNNING_MASTER = 1u << 2,
    MMON_SC_WRITABLE_MASTER = 1u << 3,
    MMON_SC_PRIMARY_MONITOR_MASTER = 1u << 4,
    MMON_SC_DISK_SPACE_OK = 1u << 5,
};

/*
 * May the primary candidate `primary` be published Master? `last[j]` is
 * server j's replication connection as of its last successful probe (for
 * a running server, v[j].slave), so a replica that is down counts as it
 * was last seen. `coop_ok`: cooperative monitoring is off, or this is the
 * primary monitor, or the primary monitor holds its primary lock on the
 * candidate. why[] says which condition failed.
 * disk_space_ok fails when the candidate is low on disk space (v[].disk_low,
 * only ever set while mariadbmon checks disk space, as in MaxScale).
 */
bool mmon_master_conds_ok(const struct mmon_view *v,
                          const struct mmon_slave_conn *last, int n,
                          int primary, unsigned conds, bool coop_ok,
                          char *why, size_t whylen);

/*
 * May replica i (mmon_is_replica) be published Slave, given the primary
 * candidate `primary` (-1 none) and whether it is published Master?
 */
bool mmon_slave_conds_ok(const struct mmon_view *v, int n, int i,
                         int primary, bool primary_is_master,
                         unsigned conds, bool coop_ok);

#endif
