/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mariadbmon: the replication-aware MariaDB monitor, with MaxScale's
 * parameter names (auto_failover, failcount, verify_master_failure,
 * servers_no_promotion, auto_rejoin, enforce_read_only_slaves,
 * replication_user, replication_password, switchover_timeout,
 * failover_timeout).
 *
 * Every tick, over one persistent connection per server (monitor user,
 * backend_connect_timeout / backend_read_timeout / backend_connect_attempts):
 *
 *     SELECT @@read_only, @@server_id, @@version, @@gtid_current_pos,
 *            @@gtid_binlog_pos, @@gtid_slave_pos
 *     SHOW ALL SLAVES STATUS
 *
 * then (mmon_decide.c) the topology: a replica's Master_Host:Master_Port
 * names a monitored server; the primary is the running, writable server at
 * the top of it (most replicas, then config order; the current primary
 * keeps the role while it qualifies). Status is published per server:
 *
 *   probe -> Running | Down (+ Auth Error)
 *         -> Master (the primary) | Slave (+ Relay) | plain Running
 *         -> kept: Maintenance, Draining (administrators own them)
 *
 * Primary failure handling, per tick:
 *
 *   primary up ----(not reachable)----> LOST (lost_ticks = 1, 2, ...)
 *   LOST --(reachable again, still the top)--> primary up
 *   LOST --(lost_ticks >= failcount, auto_failover,
 *           no replica's IO thread still connected to it)--> failover
 *   failover --> new primary up; old one rejoins (auto_rejoin) when it
 *                returns with a GTID history the new primary contains
 *
 * Commands (registered in process_init; run under the instance lock, so
 * they never overlap a tick): switchover, failover, rejoin.
 *
 * Context: create/destroy main thread; start/tick/stop monitor thread;
 * commands the caller's thread; diagnostics any thread (snapshot).
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "mariadbmon"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/modcmd.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/worker.h>

#include "mmon_int.h"

#define MMON_ER_ACCESS_DENIED 1045
#define MMON_ER_ACCESS_DENIED_NO_PASSWORD 1698
#define MMON_CR_MIN 2000
#define MMON_ADMIN_BITS (SL_SRV_MAINT | SL_SRV_DRAINING)
/* MaxScale's lock name, so Sluice and MaxScale instances on one cluster
 * also exclude each other. */
#define MMON_LOCK_NAME "maxscale_mariadbmon"
/* release-locks: no GET_LOCK for this long, so another instance takes the
 * primary monitor role. */
#define MMON_RELEASE_HOLD_MS 60000u

/* Every live instance, so a command naming a monitor finds its state. */
static pthread_mutex_t instances_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mmon_instance *instances[64];
static size_t ninstances;

static void
close_conn(struct mmon_server *ms)
{
    if (ms->conn != NULL) {
        mysql_close(ms->conn);
        ms->conn = NULL;
    }
}


static void bound_idle_time(struct mmon_instance *inst,
                            struct mmon_server *ms);

static bool
open_conn(struct mmon_instance *inst, struct mmon_server *ms)
{
    uint64_t attempts = sl_params_count(sl_monitor_params(inst->mon),
                                        "backend_connect_attempts");
    unsigned err = 0;
    char msg[256];

    ms->auth_error = false;
    for (uint64_t i = 0; i < (attempts ? attempts : 1); i++) {
        ms->conn = sl_monitor_connect(inst->mon, ms->srv, &err, msg,
                                      sizeof(msg));
        if (ms->conn != NULL) {
            ms->logged_errno = 0;
            bound_idle_time(inst, ms);
            return true;
        }
        if (err == MMON_ER_ACCESS_DENIED ||
            err == MMON_ER_ACCESS_DENIED_NO_PASSWORD) {
            ms->auth_error = true;
            break;
        }
    }
    snprintf(ms->last_error, sizeof(ms->last_error), "%s", msg);
    if (ms->logged_errno != err) {
        ms->logged_errno = err;
        sl_log_warn("Monitor '%s' cannot connect to server '%s': %s", sl_monitor_name(inst->mon), sl_server_name(ms->srv), msg);
    }
    return false;
}

int
mmon_exec(struct mmon_instance *inst, int i, const char *sql, char *err,
          size_t errlen)
{
    struct mmon_server *ms = &inst->servers[i];
    char shown[3000];
    char why[1024];

    if (ms->conn == NULL && !open_conn(inst, ms)) {
        snprintf(err, errlen, "server '%s': cannot connect: %s",
                 SRVNAME(inst, i), ms->last_error);
        return -1;
    }
    /* What is shown (the log, a command's error that the REST API
     * returns) never holds the replication password: CHANGE MASTER TO
     * carries it, and a server's error message may quote it. */
    sl_log_mask_passwords(sql, inst->repl_password, shown, sizeof(shown));
    sl_log_info("Monitor '%s' on '%s': %s", MONNAME(inst), SRVNAME(inst, i), shown);
    if (mysql_query(ms->conn, sql) != 0) {
        sl_log_mask_passwords(mysql_error(ms->conn), inst->repl_password,
                              why, sizeof(why));
        snprintf(err, errlen, "server '%s': '%s' failed: %s",
                 SRVNAME(inst, i), shown, why);
        sl_log_warn("Monitor '%s': %s", MONNAME(inst), err);
        if (mysql_errno(ms->conn) >= MMON_CR_MIN) {
            close_conn(ms);
        }
        return -1;
    }
    /* Drain any result so the connection is ready for the next one. */
    do {
        MYSQL_RES *res = mysql_store_result(ms->conn);
        mysql_free_result(res);
    } while (mysql_next_result(ms->conn) == 0);
    return 0;
}

/* Does a replica's Master_Host:Master_Port name monitored server j? */
static bool
same_endpoint(const char *host, int port, struct sl_server *srv)
{
    const char *a = sl_server_address(srv);
    bool loop_a = strcmp(a, "127.0.0.1") == 0 || strcmp(a, "localhost") == 0;
    bool loop_h = strcmp(host, "127.0.0.1") == 0 ||
                  strcmp(host, "localhost") == 0;

    if (port != sl_server_port(srv)) {
        return false;
    }
    return strcasecmp(a, host) == 0 || (loop_a && loop_h);
}

static int
field_index(MYSQL_FIELD *f, unsigned n, const char *name)
{
    for (unsigned i = 0; i < n; i++) {
        if (strcasecmp(f[i].name, name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static const char *
col(MYSQL_ROW row, int idx)
{
    return idx >= 0 && row[idx] != NULL ? row[idx] : "";
}

/* Fill v->slave from one SHOW ALL SLAVES STATUS row. */
static void
parse_slave_row(struct mmon_instance *inst, MYSQL_RES *res, MYSQL_ROW row,
                struct mmon_slave_conn *c)
{
    MYSQL_FIELD *f = mysql_fetch_fields(res);
    unsigned n = mysql_num_fields(res);
    const char *host = col(row, field_index(f, n, "Master_Host"));
    int port = atoi(col(row, field_index(f, n, "Master_Port")));
    const char *io = col(row, field_index(f, n, "Slave_IO_Running"));
    int lag_idx = field_index(f, n, "Seconds_Behind_Master");

    c->present = true;
    c->master = -1;
    for (int j = 0; j < inst->n; j++) {
        if (same_endpoint(host, port, inst->servers[j].srv)) {
            c->master = j;
            break;
        }
    }
    c->io_running = strcasecmp(io, "Yes") == 0;
    c->io_connecting = strcasecmp(io, "Connecting") == 0;
    c->sql_running = strcasecmp(
        col(row, field_index(f, n, "Slave_SQL_Running")), "Yes") == 0;
    c->lag = (lag_idx >= 0 && row[lag_idx] != NULL)
                 ? strtoll(row[lag_idx], NULL, 10) : -1;
    mmon_gtid_parse(col(row, field_index(f, n, "Gtid_IO_Pos")), &c->io_pos);
}

/* SHOW ALL SLAVES STATUS: the default connection, else the first. */
static unsigned
query_slaves(struct mmon_instance *inst, int i)
{
    MYSQL *c = inst->servers[i].conn;
    MYSQL_RES *res;
    MYSQL_ROW row;
    int name_idx;

    if (mysql_query(c, "SHOW ALL SLAVES STATUS") != 0 ||
        (res = mysql_store_result(c)) == NULL) {
        unsigned err = mysql_errno(c);
        if (err < MMON_CR_MIN) {
            sl_log_warn_once("Cannot read replication status of server '%s': %s", SRVNAME(inst, i), mysql_error(c));
            return 0;
        }
        return err;
    }
    name_idx = field_index(mysql_fetch_fields(res), mysql_num_fields(res),
                           "Connection_name");
    while ((row = mysql_fetch_row(res)) != NULL) {
        bool is_default = col(row, name_idx)[0] == '\0';

        if (!inst->views[i].slave.present || is_default) {
            parse_slave_row(inst, res, row, &inst->views[i].slave);
        }
        if (is_default) {
            break;
        }
    }
    mysql_free_result(res);
    return 0;
}

/* The variables query. Returns the client error (>= 2000) or 0. */
static unsigned
query_vars(struct mmon_instance *inst, int i)
{
    MYSQL *c = inst->servers[i].conn;
    struct mmon_view *v = &inst->views[i];
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mysql_query(c, "SELECT @@read_only, @@server_id, @@version, "
                       "@@gtid_current_pos, @@gtid_binlog_pos, "
                       "@@gtid_slave_pos") != 0 ||
        (res = mysql_store_result(c)) == NULL) {
        unsigned err = mysql_errno(c);
        return err >= MMON_CR_MIN ? err : 0;
    }
    row = mysql_fetch_row(res);
    if (row != NULL && mysql_num_fields(res) == 6) {
        v->read_only = atoi(col(row, 0)) != 0;
        v->server_id = strtoll(col(row, 1), NULL, 10);
        sl_server_set_server_id(inst->servers[i].srv, v->server_id);
        sl_server_set_version(inst->servers[i].srv,
                              mysql_get_server_version(c), col(row, 2));
        mmon_gtid_parse(col(row, 3), &v->current_pos);
        sl_server_set_gtid_pos(inst->servers[i].srv, col(row, 3));
        mmon_gtid_parse(col(row, 4), &v->binlog_pos);
        mmon_gtid_parse(col(row, 5), &v->slave_pos);
    }
    mysql_free_result(res);
    return 0;
}

/* Forget last tick's probe; keep what configuration and admins set. */
static void
reset_view(struct mmon_view *v)
{
    bool maint = v->maint;
    bool nopromo = v->no_promotion;

    memset(v, 0, sizeof(*v));
    v->maint = maint;
    v->no_promotion = nopromo;
    v->slave.master = -1;
}

static bool
probe_once(struct mmon_instance *inst, int i)
{
    reset_view(&inst->views[i]);
    return query_vars(inst, i) == 0 && query_slaves(inst, i) == 0;
}

static void
probe_server(struct mmon_instance *inst, int i)
{
    struct mmon_server *ms = &inst->servers[i];

    inst->views[i].maint = (sl_server_status(ms->srv) & SL_SRV_MAINT) != 0;
    if (ms->conn == NULL && !open_conn(inst, ms)) {
        reset_view(&inst->views[i]);
        sl_monitor_count_error(inst->mon);
        return;
    }
    if (!probe_once(inst, i)) {
        /* A kept connection died: one fresh attempt before Down. */
        close_conn(ms);
        if (!open_conn(inst, ms) || !probe_once(inst, i)) {
            if (ms->conn != NULL) {
                snprintf(ms->last_error, sizeof(ms->last_error), "%s",
                         mysql_error(ms->conn));
            }
            close_conn(ms);
            inst->views[i].running = false;
            sl_monitor_count_error(inst->mon);
            return;
        }
    }
    inst->views[i].running = true;
}

void
mmon_probe_all(struct mmon_instance *inst)
{
    for (int i = 0; i < inst->n; i++) {
        probe_server(inst, i);
    }
}

static const char *
status_text(uint32_t st, char *buf, size_t len)
{
    const char *s = sl_server_status_str(st, buf, len);

    return (s == NULL || s[0] == '\0') ? "Down" : s;
}

static uint32_t
role_bits(struct mmon_instance *inst, int i)
{
    const struct mmon_view *v = inst->views;
    uint32_t bits;

    if (!v[i].running) {
        return inst->servers[i].auth_error ? SL_SRV_AUTH_ERROR : 0;
    }
    bits = SL_SRV_RUNNING;
    if (i == inst->primary) {
        bits |= SL_SRV_MASTER;
    } else if (mmon_is_replica(v, inst->n, i)) {
        bits |= SL_SRV_SLAVE;
        if (mmon_count_replicas(v, inst->n, i) > 0) {
            bits |= SL_SRV_RELAY;
        }
    }
    return bits;
}

static void
publish(struct mmon_instance *inst)
{
    for (int i = 0; i < inst->n; i++) {
        struct sl_server *srv = inst->servers[i].srv;
        uint32_t bits = role_bits(inst, i);
        uint32_t old = sl_server_status(srv);
        uint32_t now = (old & MMON_ADMIN_BITS) | bits;
        char a[128], b[128];

        if (bits & SL_SRV_MASTER) {
            sl_server_set_replication_lag(srv, 0);
        } else if (bits & SL_SRV_SLAVE) {
            sl_server_set_replication_lag(srv, inst->views[i].slave.lag);
        } else {
            sl_server_set_replication_lag(srv, SL_SERVER_LAG_UNKNOWN);
        }
        if (now != old) {
            sl_server_set_status(srv, now);
            sl_log_notice("Server '%s' changed state: %s -> %s", sl_server_name(srv), status_text(old, a, sizeof(a)), status_text(now, b, sizeof(b)));
        }
    }
}

/* ---- cooperative_monitoring_locks ---- */

static const char *const coop_names[] = {"none", "majority_of_all",
                                         "majority_of_running", NULL};

static const char *
lock_name(enum mmon_lock l)
{
    switch (l) {
    case MMON_LOCK_HELD:
        return "held";
    case MMON_LOCK_TAKEN:
        return "taken";
    case MMON_LOCK_FREE:
        return "free";
    case MMON_LOCK_DOWN:
        break;
    }
    return "down";
}

/* One row, one column, as an integer; -1 when NULL, -2 on error (a client
 * error closes the connection: the lock went with it). */
static long long
query_int(struct mmon_instance *inst, int i, const char *sql)
{
    struct mmon_server *ms = &inst->servers[i];
    MYSQL_RES *res;
    MYSQL_ROW row;
    long long v = -2;

    if (ms->conn == NULL) {
        return -2;
    }
    if (mysql_query(ms->conn, sql) != 0 ||
        (res = mysql_store_result(ms->conn)) == NULL) {
        sl_log_warn_once("Monitor '%s': '%s' failed on server '%s': %s", MONNAME(inst), sql, SRVNAME(inst, i), mysql_error(ms->conn));
        if (mysql_errno(ms->conn) >= MMON_CR_MIN) {
            close_conn(ms);
        }
        return -2;
    }
    row = mysql_fetch_row(res);
    if (row != NULL && mysql_num_fields(res) == 1) {
        v = row[0] != NULL ? strtoll(row[0], NULL, 10) : -1;
    }
    mysql_free_result(res);
    return v;
}

/*
 * With cooperative locks, the server drops a monitor connection idle for
 * longer than the longest thing a healthy monitor does without using it
 * (a failover or switchover, plus two ticks and a margin), and its lock
 * with it: a primary monitor that is frozen or silently cut off from the
 * servers loses its locks after that time even though no TCP reset ever
 * reaches the server.
 */
static void
bound_idle_time(struct mmon_instance *inst, struct mmon_server *ms)
{
    uint64_t op = inst->failover_timeout_ms > inst->switchover_timeout_ms
                      ? inst->failover_timeout_ms
                      : inst->switchover_timeout_ms;
    char sql[96];

    if (inst->coop == MMON_COOP_NONE) {
        return;
    }
    snprintf(sql, sizeof(sql), "SET SESSION wait_timeout=%llu",
             (unsigned long long)mmon_idle_limit_s(
                 op, sl_monitor_interval_ms(inst->mon)));
    if (mysql_query(ms->conn, sql) != 0) {
        sl_log_warn_once("Monitor '%s': '%s' failed on server '%s': %s", MONNAME(inst), sql, sl_server_name(ms->srv), mysql_error(ms->conn));
    }
}

/* Release the lock on every server where this monitor holds it. */
static void
release_locks(struct mmon_instance *inst)
{
    for (int i = 0; i < inst->n; i++) {
        if (inst->servers[i].lock == MMON_LOCK_HELD) {
            query_int(inst, i, "SELECT RELEASE_LOCK('" MMON_LOCK_NAME "')");
            inst->servers[i].lock = MMON_LOCK_FREE;
        }
    }
    inst->locks_held = 0;
}

/*
 * After the probe: take (or confirm) the lock on every reachable server,
 * on the monitor connection itself, so the lock ends with the connection
 * (the instance dies, the network goes: the server frees it). The monitor
 * is the primary monitor while it holds a majority: of all monitored
 * servers (majority_of_all) or of the reachable ones (majority_of_running).
 * A monitor that holds some locks but no majority releases them and waits
 * one or two ticks at random, so monitors that split the locks between
 * them do not stay split. Passive mode takes no locks: a passive instance
 * never blocks an active one.
 */
static void
update_locks(struct mmon_instance *inst)
{
    bool was = inst->primary_monitor;
    bool passive = sl_monitor_passive();
    bool hold = inst->locks_released_at != 0 &&
                sl_monotonic_ms() - inst->locks_released_at <
                    MMON_RELEASE_HOLD_MS;
    int running = 0;
    int held = 0;

    if (inst->coop == MMON_COOP_NONE) {
        inst->primary_monitor = !passive;
        return;
    }
    if (!hold) {
        inst->locks_released_at = 0;
    }
    for (int i = 0; i < inst->n; i++) {
        struct mmon_server *ms = &inst->servers[i];
        long long r;

        if (!inst->views[i].running || ms->conn == NULL) {
            ms->lock = MMON_LOCK_DOWN;
            continue;
        }
        running++;
        if (passive || hold || inst->lock_backoff > 0) {
            /* Only look: ours (a release that failed), someone's, free. */
            r = query_int(inst, i, "SELECT IF(IS_USED_LOCK('" MMON_LOCK_NAME
                          "') = CONNECTION_ID(), 1, IF(IS_FREE_LOCK('"
                          MMON_LOCK_NAME "'), 2, 0))");
        } else {
            r = query_int(inst, i, "SELECT IF(IS_USED_LOCK('" MMON_LOCK_NAME
                          "') = CONNECTION_ID(), 1, GET_LOCK('"
                          MMON_LOCK_NAME "', 0))");
        }
        ms->lock = r == 1 ? MMON_LOCK_HELD : r == 2 ? MMON_LOCK_FREE
                 : r == -2 ? MMON_LOCK_DOWN : MMON_LOCK_TAKEN;
        if (ms->lock == MMON_LOCK_DOWN) {
            running--;
        }
        held += ms->lock == MMON_LOCK_HELD;
    }
    if (inst->lock_backoff > 0) {
        inst->lock_backoff--;
    }
    inst->locks_running = running;
    inst->locks_needed = mmon_locks_needed(
        inst->coop == MMON_COOP_MAJORITY_OF_ALL, inst->n, running);
    inst->locks_held = held;
    inst->primary_monitor = !passive && held >= inst->locks_needed;
    if (!inst->primary_monitor && held > 0) {
        release_locks(inst);
        if (!passive && !hold) {
            inst->lock_backoff = 1 + (uint64_t)(rand_r(&inst->rand_state) % 2);
        }
    }
    if (inst->primary_monitor != was) {
        if (inst->primary_monitor) {
            sl_log_notice("Monitor '%s' is now the primary monitor: it holds the lock '" MMON_LOCK_NAME "' on %d of %d servers (%s)", MONNAME(inst), held, inst->n, coop_names[inst->coop]);
        } else {
            sl_log_notice("Monitor '%s' is no longer the primary monitor: %d of the %d needed locks (%s); it keeps monitoring but does not change the cluster", MONNAME(inst), held, inst->locks_needed, coop_names[inst->coop]);
        }
    }
}

/* Primary bookkeeping: who is it now, and how long has the last one been
 * gone. */
static void
update_primary(struct mmon_instance *inst)
{
    int prev = inst->primary;
    int now;

    if (prev >= 0 && !inst->views[prev].running) {
        inst->lost = prev;
        inst->lost_ticks = 0;
        sl_log_warn("Monitor '%s': primary '%s' is unreachable", MONNAME(inst), SRVNAME(inst, prev));
    }
    if (inst->lost >= 0 && !inst->views[inst->lost].running) {
        inst->lost_ticks++;
    }
    now = mmon_pick_primary(inst->views, inst->n, prev);
    if (now != prev && now >= 0) {
        sl_log_notice("Monitor '%s': primary is now '%s' (writable, %d replica(s))%s%s", MONNAME(inst), SRVNAME(inst, now), mmon_count_replicas(inst->views, inst->n, now), prev >= 0 ? ", was " : "", prev >= 0 ? SRVNAME(inst, prev) : "");
    } else if (now < 0 && prev >= 0 && inst->views[prev].running) {
        sl_log_warn("Monitor '%s': no usable primary ('%s' is read-only, in maintenance or replicating); writes are not routed", MONNAME(inst), SRVNAME(inst, prev));
    }
    if (now >= 0) {
        inst->lost = -1;
        inst->lost_ticks = 0;
        inst->verify_logged = false;
        inst->no_candidate_logged = false;
    }
    inst->primary = now;
}

/* auto_failover: decide, with the reason logged either way. */
static void
maybe_failover(struct mmon_instance *inst)
{
    char reason[256];
    char err[512];
    int alive;

    if (!inst->auto_failover || !inst->primary_monitor || inst->lost < 0 ||
        inst->primary >= 0 || inst->lost_ticks < inst->failcount) {
        return;
    }
    alive = mmon_primary_still_replicating(inst->views, inst->n, inst->lost);
    if (inst->verify_master_failure && alive >= 0) {
        if (!inst->verify_logged) {
            inst->verify_logged = true;
            sl_log_warn("Monitor '%s': not failing over: primary '%s' is unreachable from Sluice but replica '%s' is still connected to it (verify_master_failure)", MONNAME(inst), SRVNAME(inst, inst->lost), SRVNAME(inst, alive));
        }
        return;
    }
    snprintf(reason, sizeof(reason), "primary '%s' down for %llu monitor "
             "intervals (failcount=%llu)%s", SRVNAME(inst, inst->lost),
             (unsigned long long)inst->lost_ticks,
             (unsigned long long)inst->failcount,
             inst->verify_master_failure ? ", no replica connected to it"
                                         : "");
    if (mmon_failover(inst, inst->lost, reason, err, sizeof(err)) < 0) {
        if (!inst->no_candidate_logged) {
            inst->no_candidate_logged = true;
            sl_log_error("Monitor '%s': automatic failover failed: %s", MONNAME(inst), err);
        }
        return;
    }
    mmon_probe_all(inst);
    update_primary(inst);
}

static void
maybe_rejoin(struct mmon_instance *inst)
{
    char why[512];

    if (!inst->auto_rejoin || !inst->primary_monitor || inst->primary < 0) {
        return;
    }
    for (int i = 0; i < inst->n; i++) {
        const struct mmon_view *v = &inst->views[i];
        struct mmon_server *ms = &inst->servers[i];
        int m = v->slave.master;

        if (i == inst->primary || !v->running || v->maint) {
            continue;
        }
        if (v->slave.present && (m < 0 || m == inst->primary ||
                                 inst->views[m].running)) {
            ms->diverged_logged = false;
            continue;   /* replicating from something alive: leave it */
        }
        if (!mmon_rejoin_allowed(inst, i, why, sizeof(why))) {
            if (!ms->diverged_logged) {
                ms->diverged_logged = true;
                sl_log_warn("Monitor '%s': not rejoining server '%s' to primary '%s': %s; it has diverged and needs manual repair", MONNAME(inst), SRVNAME(inst, i), SRVNAME(inst, inst->primary), why);
            }
            continue;
        }
        if (mmon_rejoin(inst, i, why, sizeof(why)) < 0) {
            sl_log_error("Monitor '%s': automatic rejoin of '%s' failed: %s", MONNAME(inst), SRVNAME(inst, i), why);
        }
        probe_server(inst, i);   /* publish it as a replica at once */
    }
}

/* enforce_read_only_slaves: a replica found writable gets read_only=1. */
static void
enforce_read_only(struct mmon_instance *inst)
{
    char err[512];

    if (!inst->enforce_read_only_slaves || !inst->primary_monitor) {
        return;
    }
    for (int i = 0; i < inst->n; i++) {
        struct mmon_view *v = &inst->views[i];

        if (i == inst->primary || v->maint || v->read_only ||
            !mmon_is_replica(inst->views, inst->n, i)) {
            continue;
        }
        sl_log_notice("Monitor '%s': replica '%s' is writable, setting read_only=1 (enforce_read_only_slaves)", MONNAME(inst), SRVNAME(inst, i));
        if (mmon_exec(inst, i, "SET GLOBAL read_only=1", err,
                      sizeof(err)) == 0) {
            v->read_only = true;
        }
    }
}

/* MaxScale's slave_connections: the default (or first) connection, the
 * only one the monitor reads; [] when the server does not replicate. */
static json_t *
slave_connections(const struct mmon_instance *inst, int i)
{
    const struct mmon_view *v = &inst->views[i];
    const struct mmon_slave_conn *sc = &v->slave;
    int m = sc->master;
    char pos[512];

    if (!sc->present) {
        return json_array();
    }
    return json_pack("[{s:s, s:s?, s:o, s:o, s:s, s:s, s:o, s:s}]",
        "connection_name", "",
        "master_host", m >= 0 ? sl_server_address(inst->servers[m].srv)
                              : NULL,
        "master_port", m >= 0 ? json_integer(sl_server_port(
                                    inst->servers[m].srv)) : json_null(),
        "master_server_id", m >= 0 && inst->views[m].server_id > 0
                                ? json_integer(inst->views[m].server_id)
                                : json_null(),
        "slave_io_running", sc->io_running ? "Yes" :
                            sc->io_connecting ? "Connecting" : "No",
        "slave_sql_running", sc->sql_running ? "Yes" : "No",
        "seconds_behind_master", sc->lag >= 0 ? json_integer(sc->lag)
                                              : json_null(),
        "gtid_io_pos", mmon_gtid_format(&sc->io_pos, pos, sizeof(pos)));
}

/* lock_held as MaxScale shows it: null without cooperative locks or when
 * the server could not be asked, else whether this monitor holds it. */
static json_t *
lock_held(const struct mmon_instance *inst, int i)
{
    enum mmon_lock l = inst->servers[i].lock;

    if (inst->coop == MMON_COOP_NONE || l == MMON_LOCK_DOWN) {
        return json_null();
    }
    return json_boolean(l == MMON_LOCK_HELD);
}

/* monitor_diagnostics in MaxScale's shape (master, primary, server_info
 * with lock_held and slave_connections) plus Sluice's own fields
 * (passive, cooperative_monitoring_locks, lock_overview, and per server
 * running, master and last_error). */
static void
update_snapshot(struct mmon_instance *inst)
{
    json_t *arr = json_array();
    json_t *locks = json_object();
    json_t *doc;
    char a[512], b[512];

    for (int i = 0; i < inst->n; i++) {
        const struct mmon_view *v = &inst->views[i];
        int m = v->slave.master;

        json_array_append_new(arr, json_pack(
            "{s:s, s:I, s:b, s:s, s:s, s:n, s:o, s:o, s:n, s:b, s:s?, s:s}",
            "name", SRVNAME(inst, i), "server_id", (json_int_t)v->server_id,
            "read_only", v->read_only, "gtid_current_pos",
            mmon_gtid_format(&v->current_pos, a, sizeof(a)),
            "gtid_binlog_pos", mmon_gtid_format(&v->binlog_pos, b, sizeof(b)),
            "master_group", "lock_held", lock_held(inst, i),
            "slave_connections", slave_connections(inst, i),
            "state_details", "running", v->running,
            "master", v->slave.present && m >= 0 ? SRVNAME(inst, m) : NULL,
            "last_error", inst->servers[i].last_error));
        if (inst->coop != MMON_COOP_NONE) {
            json_object_set_new(locks, SRVNAME(inst, i), json_string(
                lock_name(inst->servers[i].lock)));
        }
    }
    /* "master" is the primary server; "primary" whether this monitor is
     * the primary monitor, null when cooperative locks are off. */
    doc = json_pack("{s:s?, s:o, s:b, s:s, s:o}", "master",
                    inst->primary >= 0 ? SRVNAME(inst, inst->primary) : NULL,
                    "primary", inst->coop == MMON_COOP_NONE
                                   ? json_null()
                                   : json_boolean(inst->primary_monitor),
                    "passive", sl_monitor_passive(),
                    "cooperative_monitoring_locks", coop_names[inst->coop],
                    "server_info", arr);
    if (inst->coop != MMON_COOP_NONE) {
        json_object_set_new(doc, "lock_overview", json_pack(
            "{s:i, s:i, s:i, s:b, s:o}", "held_locks", inst->locks_held,
            "required_locks", inst->locks_needed,
            "running_servers", inst->locks_running,
            "released", inst->locks_released_at != 0, "servers", locks));
    } else {
        json_decref(locks);
    }
    pthread_mutex_lock(&inst->snap_lock);
    json_decref(inst->snapshot);
    inst->snapshot = doc;
    pthread_mutex_unlock(&inst->snap_lock);
}

static void
mmon_tick(void *instance)
{
    struct mmon_instance *inst = instance;

    pthread_mutex_lock(&inst->lock);
    mmon_probe_all(inst);
    update_locks(inst);
    update_primary(inst);
    maybe_failover(inst);
    maybe_rejoin(inst);
    enforce_read_only(inst);
    publish(inst);
    update_snapshot(inst);
    pthread_mutex_unlock(&inst->lock);
}

/* servers_no_promotion: mark the listed servers. */
static void
parse_no_promotion(struct mmon_instance *inst, const struct sl_params *p)
{
    const char *list = sl_params_get(p, "servers_no_promotion");
    char *copy = strdup(list ? list : "");
    char *save = NULL;

    for (char *w = strtok_r(copy, ", \t", &save); w != NULL;
         w = strtok_r(NULL, ", \t", &save)) {
        for (int i = 0; i < inst->n; i++) {
            if (strcmp(SRVNAME(inst, i), w) == 0) {
                inst->views[i].no_promotion = true;
            }
        }
    }
    free(copy);
}

static void
read_params(struct mmon_instance *inst, const struct sl_params *p)
{
    const char *u = sl_params_get(p, "replication_user");
    const char *pw = sl_params_get(p, "replication_password");

    inst->auto_failover = sl_params_bool(p, "auto_failover");
    inst->auto_rejoin = sl_params_bool(p, "auto_rejoin");
    inst->verify_master_failure = sl_params_bool(p, "verify_master_failure");
    inst->enforce_read_only_slaves =
        sl_params_bool(p, "enforce_read_only_slaves");
    inst->failcount = sl_params_count(p, "failcount");
    inst->switchover_timeout_ms = sl_params_duration_ms(p,
                                                        "switchover_timeout");
    inst->failover_timeout_ms = sl_params_duration_ms(p, "failover_timeout");
    inst->coop = (enum mmon_coop)sl_params_enum(p,
                                                "cooperative_monitoring_locks");
    /* MaxScale: without replication_user the monitor's own account is
     * used in CHANGE MASTER TO. */
    snprintf(inst->repl_user, sizeof(inst->repl_user), "%s",
             u && u[0] ? u : sl_monitor_user(inst->mon));
    snprintf(inst->repl_password, sizeof(inst->repl_password), "%s",
             u && u[0] ? (pw ? pw : "") : sl_monitor_password(inst->mon));
    parse_no_promotion(inst, p);
}

static void *
mmon_create_instance(struct sl_monitor *mon, const struct sl_params *p)
{
    struct mmon_instance *inst = calloc(1, sizeof(*inst));
    struct sl_server *const *servers;
    size_t n;

    if (inst == NULL) {
        return NULL;
    }
    inst->mon = mon;
    servers = sl_monitor_servers(mon, &n);
    inst->n = (int)n;
    inst->servers = calloc(n ? n : 1, sizeof(*inst->servers));
    inst->views = calloc(n ? n : 1, sizeof(*inst->views));
    if (inst->servers == NULL || inst->views == NULL) {
        free(inst->servers);
        free(inst->views);
        free(inst);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        inst->servers[i].srv = servers[i];
    }
    inst->primary = -1;
    inst->lost = -1;
    inst->rand_state = (unsigned)sl_monotonic_us() ^ (unsigned)getpid();
    read_params(inst, p);
    pthread_mutex_init(&inst->lock, NULL);
    pthread_mutex_init(&inst->snap_lock, NULL);
    pthread_mutex_lock(&instances_lock);
    if (ninstances < sizeof(instances) / sizeof(instances[0])) {
        instances[ninstances++] = inst;
    }
    pthread_mutex_unlock(&instances_lock);
    return inst;
}

static void
mmon_destroy_instance(void *instance)
{
    struct mmon_instance *inst = instance;

    if (inst == NULL) {
        return;
    }
    pthread_mutex_lock(&instances_lock);
    for (size_t i = 0; i < ninstances; i++) {
        if (instances[i] == inst) {
            instances[i] = instances[--ninstances];
            break;
        }
    }
    pthread_mutex_unlock(&instances_lock);
    for (int i = 0; i < inst->n; i++) {
        close_conn(&inst->servers[i]);
    }
    json_decref(inst->snapshot);
    pthread_mutex_destroy(&inst->lock);
    pthread_mutex_destroy(&inst->snap_lock);
    free(inst->servers);
    free(inst->views);
    free(inst);
}

static void
mmon_start(void *instance)
{
    (void)instance;
    mysql_thread_init();
}

static void
mmon_stop(void *instance)
{
    struct mmon_instance *inst = instance;

    pthread_mutex_lock(&inst->lock);
    for (int i = 0; i < inst->n; i++) {
        close_conn(&inst->servers[i]);
    }
    pthread_mutex_unlock(&inst->lock);
    mysql_thread_end();
}

static void *
mmon_diagnostics(void *instance)
{
    struct mmon_instance *inst = instance;
    json_t *copy;

    pthread_mutex_lock(&inst->snap_lock);
    copy = inst->snapshot ? json_deep_copy(inst->snapshot) : json_object();
    pthread_mutex_unlock(&inst->snap_lock);
    return copy;
}

/* ---- module commands ---- */

static struct mmon_instance *
find_instance(struct sl_monitor *mon)
{
    struct mmon_instance *found = NULL;

    pthread_mutex_lock(&instances_lock);
    for (size_t i = 0; i < ninstances; i++) {
        if (instances[i]->mon == mon) {
            found = instances[i];
        }
    }
    pthread_mutex_unlock(&instances_lock);
    return found;
}

static int
server_index(struct mmon_instance *inst, struct sl_server *srv)
{
    for (int i = 0; i < inst->n; i++) {
        if (inst->servers[i].srv == srv) {
            return i;
        }
    }
    return -1;
}

enum cmd_kind { CMD_SWITCHOVER, CMD_FAILOVER, CMD_REJOIN, CMD_RELEASE };

/* May this instance change the cluster now? err[] says why not. */
static bool
may_change_cluster(struct mmon_instance *inst, char *err, size_t errlen)
{
    if (sl_monitor_passive()) {
        snprintf(err, errlen, "Sluice is in passive mode (passive=true): "
                 "it does not change the cluster; run the command on the "
                 "active instance or 'maxctrl alter maxscale passive false'");
        return false;
    }
    if (!inst->primary_monitor) {
        snprintf(err, errlen, "monitor '%s' is not the primary monitor: it "
                 "holds the lock '" MMON_LOCK_NAME "' on %d server(s), %d "
                 "needed (cooperative_monitoring_locks=%s%s); run the "
                 "command on the instance whose monitor is primary, or "
                 "'release-locks' there first", MONNAME(inst),
                 inst->locks_held, inst->locks_needed, coop_names[inst->coop],
                 inst->locks_released_at ? ", locks released by release-locks"
                                         : "");
        return false;
    }
    return true;
}

/* Body of a command with the instance locked and the views fresh. */
static int
run_locked(struct mmon_instance *inst, enum cmd_kind kind, int a, int b,
           char *err, size_t errlen)
{
    if (kind == CMD_RELEASE) {
        int held = inst->locks_held;

        if (inst->coop == MMON_COOP_NONE) {
            snprintf(err, errlen, "monitor '%s' has "
                     "cooperative_monitoring_locks=none: it holds no locks",
                     MONNAME(inst));
            return -1;
        }
        release_locks(inst);
        inst->locks_released_at = sl_monotonic_ms();
        inst->primary_monitor = false;
        sl_log_notice("Monitor '%s': released its locks on %d server(s) (release-locks); it takes none for %u s", MONNAME(inst), held, MMON_RELEASE_HOLD_MS / 1000);
        return 0;
    }
    if (!may_change_cluster(inst, err, errlen)) {
        return -1;
    }
    switch (kind) {
    case CMD_RELEASE:
        break;
    case CMD_SWITCHOVER:
        return mmon_switchover(inst, a, b, err, errlen);
    case CMD_FAILOVER:
        if (inst->lost < 0 && inst->primary >= 0) {
            snprintf(err, errlen, "primary '%s' is running: use switchover",
                     SRVNAME(inst, inst->primary));
            return -1;
        }
        if (inst->lost < 0) {
            snprintf(err, errlen, "no failed primary known to monitor '%s'",
                     MONNAME(inst));
            return -1;
        }
        return mmon_failover(inst, inst->lost, "manual failover command",
                             err, errlen);
    case CMD_REJOIN:
        if (!mmon_rejoin_allowed(inst, a, err, errlen)) {
            return -1;
        }
        return mmon_rejoin(inst, a, err, errlen);
    }
    return -1;
}

static int
run_command(enum cmd_kind kind, const struct sl_modcmd_arg *args, int nargs,
            void **output, char **error)
{
    struct mmon_instance *inst = find_instance(args[0].v.monitor);
    char err[1024] = "";
    int idx[2] = {-1, -1};
    int rc;

    if (inst == NULL) {
        *error = strdup("the monitor is not a mariadbmon monitor");
        return -EINVAL;
    }
    for (int k = 1; k < nargs && k < 3; k++) {
        if (args[k].string == NULL) {
            continue;
        }
        idx[k - 1] = server_index(inst, args[k].v.server);
        if (idx[k - 1] < 0) {
            if (asprintf(error, "server '%s' is not monitored by '%s'",
                         args[k].string, MONNAME(inst)) < 0) {
                *error = NULL;
            }
            return -EINVAL;
        }
    }
    pthread_mutex_lock(&inst->lock);
    mmon_probe_all(inst);
    update_locks(inst);
    update_primary(inst);
    rc = run_locked(inst, kind, idx[0], idx[1], err, sizeof(err));
    mmon_probe_all(inst);
    if (kind != CMD_RELEASE) {
        update_locks(inst);
    }
    update_primary(inst);
    publish(inst);
    update_snapshot(inst);
    pthread_mutex_unlock(&inst->lock);
    if (rc < 0) {
        *error = strdup(err);
        return -EIO;
    }
    *output = json_pack("{s:s?}", "primary", inst->primary >= 0 ?
                        SRVNAME(inst, inst->primary) : NULL);
    return 0;
}

static int
cmd_switchover(const struct sl_modcmd_arg *args, int nargs, void **output,
               char **error)
{
    return run_command(CMD_SWITCHOVER, args, nargs, output, error);
}

static int
cmd_failover(const struct sl_modcmd_arg *args, int nargs, void **output,
             char **error)
{
    return run_command(CMD_FAILOVER, args, nargs, output, error);
}

static int
cmd_rejoin(const struct sl_modcmd_arg *args, int nargs, void **output,
           char **error)
{
    return run_command(CMD_REJOIN, args, nargs, output, error);
}

static int
cmd_release_locks(const struct sl_modcmd_arg *args, int nargs,
                  void **output, char **error)
{
    return run_command(CMD_RELEASE, args, nargs, output, error);
}

static const struct sl_modcmd_arg_spec switchover_args[] = {
    {SL_MODCMD_ARG_MONITOR, false, "Monitor name"},
    {SL_MODCMD_ARG_SERVER, true, "New primary (default: best replica)"},
    {SL_MODCMD_ARG_SERVER, true, "Current primary (default: detected)"},
};
static const struct sl_modcmd_arg_spec failover_args[] = {
    {SL_MODCMD_ARG_MONITOR, false, "Monitor name"},
};
static const struct sl_modcmd_arg_spec release_args[] = {
    {SL_MODCMD_ARG_MONITOR, false, "Monitor name"},
};
static const struct sl_modcmd_arg_spec rejoin_args[] = {
    {SL_MODCMD_ARG_MONITOR, false, "Monitor name"},
    {SL_MODCMD_ARG_SERVER, false, "Server to rejoin"},
};

static int
mmon_process_init(void)
{
    int rc;

    if (mysql_library_init(0, NULL, NULL) != 0) {
        return -EIO;
    }
    rc = sl_modcmd_register("mariadbmon", "switchover", SL_MODCMD_ACTIVE,
                            cmd_switchover, switchover_args, 3,
                            "Swap the primary with a replica, no data lost");
    if (rc == 0 || rc == -EEXIST) {
        rc = sl_modcmd_register("mariadbmon", "failover", SL_MODCMD_ACTIVE,
                                cmd_failover, failover_args, 1,
                                "Promote the best replica of a failed "
                                "primary");
    }
    if (rc == 0 || rc == -EEXIST) {
        rc = sl_modcmd_register("mariadbmon", "rejoin", SL_MODCMD_ACTIVE,
                                cmd_rejoin, rejoin_args, 2,
                                "Make a server replicate from the primary");
    }
    if (rc == 0 || rc == -EEXIST) {
        rc = sl_modcmd_register("mariadbmon", "release-locks",
                                SL_MODCMD_ACTIVE, cmd_release_locks,
                                release_args, 1,
                                "Release the cooperative monitoring locks "
                                "(another instance becomes primary monitor)");
    }
    return rc == -EEXIST ? 0 : rc;
}

static const struct sl_param_spec mmon_params[] = {
    {"auto_failover", SL_PARAM_BOOL, "false", 0, NULL,
     "Fail over automatically when the primary is down"},
    {"auto_rejoin", SL_PARAM_BOOL, "false", 0, NULL,
     "Make returning servers replicate from the primary"},
    {"failcount", SL_PARAM_COUNT, "5", 0, NULL,
     "Monitor intervals the primary must be down before failover"},
    {"verify_master_failure", SL_PARAM_BOOL, "true", 0, NULL,
     "No failover while a replica is still connected to the primary"},
    {"master_failure_timeout", SL_PARAM_DURATION, "10s",
     SL_PARAM_F_SECONDS | SL_PARAM_F_IGNORED, NULL,
     "removed in MaxScale 2.3: failcount decides when to fail over"},
    {"enforce_read_only_slaves", SL_PARAM_BOOL, "false", 0, NULL,
     "Set read_only=1 on replicas that are writable"},
    {"replication_user", SL_PARAM_STRING, NULL, 0, NULL,
     "User for CHANGE MASTER TO (default: the monitor user)"},
    {"replication_password", SL_PARAM_PASSWORD, NULL, 0, NULL,
     "Its password"},
    {"switchover_timeout", SL_PARAM_DURATION, "90s", SL_PARAM_F_SECONDS,
     NULL, "Time limit of a switchover"},
    {"failover_timeout", SL_PARAM_DURATION, "90s", SL_PARAM_F_SECONDS, NULL,
     "Time limit of a failover"},
    {"servers_no_promotion", SL_PARAM_SERVERS, NULL, 0, NULL,
     "Servers never promoted to primary"},
    {"enforce_simple_topology", SL_PARAM_BOOL, "false", SL_PARAM_F_REFUSED,
     NULL, "enforce_simple_topology is not implemented"},
    {"assume_unique_hostnames", SL_PARAM_BOOL, "true", SL_PARAM_F_REFUSED,
     NULL, "servers are always matched by host name and port"},
    {"handle_events", SL_PARAM_BOOL, "false", SL_PARAM_F_REFUSED, NULL,
     "scheduled events are not enabled or disabled on promotion "
     "(only false is accepted)"},
    {"enforce_writable_master", SL_PARAM_BOOL, "false", SL_PARAM_F_REFUSED,
     NULL, "enforce_writable_master is not implemented"},
    {"switchover_on_low_disk_space", SL_PARAM_BOOL, "false",
     SL_PARAM_F_REFUSED, NULL, "disk space monitoring is not implemented"},
    {"maintenance_on_low_disk_space", SL_PARAM_BOOL, "true",
     SL_PARAM_F_IGNORED, NULL, "disk space monitoring is not implemented"},
    {"cooperative_monitoring_locks", SL_PARAM_ENUM, "none", 0, coop_names,
     "Several Sluice (or MaxScale) instances on one cluster: only the one "
     "holding GET_LOCK('maxscale_mariadbmon') on a majority of all, or of "
     "the running, servers changes the cluster"},
    {"promotion_sql_file", SL_PARAM_PATH, NULL, SL_PARAM_F_REFUSED, NULL,
     "promotion SQL files are not implemented"},
    {"demotion_sql_file", SL_PARAM_PATH, NULL, SL_PARAM_F_REFUSED, NULL,
     "demotion SQL files are not implemented"},
    {"master_conditions", SL_PARAM_STRING, NULL, SL_PARAM_F_REFUSED, NULL,
     "master_conditions is not implemented"},
    {"slave_conditions", SL_PARAM_STRING, NULL, SL_PARAM_F_REFUSED, NULL,
     "slave_conditions is not implemented"},
    SL_PARAM_END,
};

static const struct sl_monitor_ops mmon_ops = {
    .size = sizeof(struct sl_monitor_ops),
    .create_instance = mmon_create_instance,
    .destroy_instance = mmon_destroy_instance,
    .start = mmon_start,
    .stop = mmon_stop,
    .tick = mmon_tick,
    .diagnostics = mmon_diagnostics,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_MONITOR,
    .status = SL_MODULE_BETA,
    .name = "mariadbmon",
    .version = "1.0.0",
    .description = "MariaDB replication monitor with failover, switchover "
                   "and rejoin",
    .aliases = NULL,
    .params = mmon_params,
    .process_init = mmon_process_init,
    .ops = &mmon_ops,
})
