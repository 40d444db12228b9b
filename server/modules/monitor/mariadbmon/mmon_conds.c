/* SPDX-License-Identifier: Apache-2.0 */
/*
 * master_conditions / slave_conditions: see mmon_conds.h. No connection,
 * no global: the unit test feeds views.
 */
#include <stdio.h>

#include "mmon_conds.h"

const char *const mmon_master_cond_names[] = {
    "none", "connecting_slave", "connected_slave", "running_slave",
    "primary_monitor_master", "disk_space_ok", NULL,
};

const char *const mmon_slave_cond_names[] = {
    "none", "linked_master", "running_master", "writable_master",
    "primary_monitor_master", "disk_space_ok", NULL,
};

/* Does replica j (as last seen) satisfy every replica condition asked? */
static bool
replica_qualifies(const struct mmon_view *v,
                  const struct mmon_slave_conn *c, int j, unsigned conds)
{
    bool connecting = c->sql_running && (c->io_running || c->io_connecting);

    if ((conds & (MMON_MC_CONNECTING_SLAVE | MMON_MC_RUNNING_SLAVE)) &&
        !connecting) {
        return false;
    }
    if ((conds & MMON_MC_CONNECTED_SLAVE) &&
        !(c->sql_running && c->io_running)) {
        return false;
    }
    return !(conds & MMON_MC_RUNNING_SLAVE) || v[j].running;
}

bool
mmon_master_conds_ok(const struct mmon_view *v,
                     const struct mmon_slave_conn *last, int n, int primary,
                     unsigned conds, bool coop_ok, char *why, size_t whylen)
{
    unsigned replica_conds = conds & (MMON_MC_CONNECTING_SLAVE |
                                      MMON_MC_CONNECTED_SLAVE |
                                      MMON_MC_RUNNING_SLAVE);

    if (primary < 0) {
        return false;
    }
    if ((conds & MMON_MC_PRIMARY_MONITOR_MASTER) && !coop_ok) {
        snprintf(why, whylen, "the primary monitor has not chosen it "
                 "(master_conditions=primary_monitor_master)");
        return false;
    }
    if ((conds & MMON_MC_DISK_SPACE_OK) && v[primary].disk_low) {
        snprintf(why, whylen, "it is low on disk space "
                 "(master_conditions=disk_space_ok)");
        return false;
    }
    if (replica_conds == 0) {
        return true;
    }
    for (int j = 0; j < n; j++) {
        const struct mmon_slave_conn *c = &last[j];

        if (j != primary && c->present && c->master == primary &&
            replica_qualifies(v, c, j, replica_conds)) {
            return true;
        }
    }
    snprintf(why, whylen, "no replica is %s%s%s (master_conditions)",
             (replica_conds & MMON_MC_CONNECTED_SLAVE) ? "connected"
                                                       : "replicating",
             (replica_conds & MMON_MC_RUNNING_SLAVE) ? " and running" : "",
             "");
    return false;
}

bool
mmon_slave_conds_ok(const struct mmon_view *v, int n, int i, int primary,
                    bool primary_is_master, unsigned conds, bool coop_ok)
{
    if ((conds & (MMON_SC_LINKED_MASTER | MMON_SC_RUNNING_MASTER |
                  MMON_SC_WRITABLE_MASTER)) &&
        (primary < 0 || !v[primary].running)) {
        return false;
    }
    if ((conds & MMON_SC_WRITABLE_MASTER) && !primary_is_master) {
        return false;
    }
    if ((conds & MMON_SC_PRIMARY_MONITOR_MASTER) && !coop_ok) {
        return false;
    }
    if ((conds & MMON_SC_DISK_SPACE_OK) && v[i].disk_low) {
        return false;
    }
    if (conds & MMON_SC_LINKED_MASTER) {
        /* Up the chain to the primary: every link replicating with both
         * threads running, every server on it running. */
        int j = i;

        for (int steps = 0; j != primary; steps++) {
            const struct mmon_slave_conn *c = &v[j].slave;

            if (steps >= n || !v[j].running || !c->present ||
                c->master < 0 || c->master >= n || !c->io_running ||
                !c->sql_running) {
                return false;
            }
            j = c->master;
        }
    }
    return true;
}
