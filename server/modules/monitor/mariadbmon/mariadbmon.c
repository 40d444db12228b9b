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

#include <sluice/disk_space.h>
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

    const struct sl_params *sp = sl_server_params(srv);
    const char *priv = sp && sl_params_has(sp, "private_address")
                           ? sl_params_get(sp, "private_address") : NULL;

    if (port != sl_server_port(srv)) {
        return false;
    }
    /* replicas set up by the monitor name its private_address */
    return strcasecmp(a, host) == 0 || (loop_a && loop_h) ||
           (priv != NULL && strcasecmp(priv, host) == 0);
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
    int hb_idx;

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
    hb_idx = field_index(f, n, "Slave_received_heartbeats");
    c->heartbeats = (hb_idx >= 0 && row[hb_idx] != NULL)
                        ? strtoll(row[hb_idx], NULL, 10) : -1;
    hb_idx = field_index(f, n, "Slave_heartbeat_period");
    c->heartbeat_period_ms = (hb_idx >= 0 && row[hb_idx] != NULL)
                                 ? (int64_t)(strtod(row[hb_idx], NULL) *
                                             1000.0) : -1;
    c->event_age_ms = -1;
}

static bool
gtid_pos_equal(const struct mmon_gtid_pos *a, const struct mmon_gtid_pos *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (int k = 0; k < a->n; k++) {
        if (a->g[k].domain != b->g[k].domain ||
            a->g[k].server_id != b->g[k].server_id ||
            a->g[k].seq != b->g[k].seq) {
            return false;
        }
    }
    return true;
}

/*
 * master_failure_timeout: when did this replica's IO thread last receive
 * something from its master? An event is a new Gtid_IO_Pos or a new
 * heartbeat (Slave_received_heartbeats moved); an IO thread seen
 * connecting to (or newly connected to) a master counts as one too, so a
 * monitor that starts while the primary is unreachable gives the replicas
 * one master_failure_timeout. `old` is the previous good probe.
 */
static void
track_io_event(struct mmon_server *ms, struct mmon_slave_conn *c,
               const struct mmon_slave_conn *old)
{
    uint64_t now = sl_monotonic_ms();

    if (!c->present || !c->io_running) {
        ms->io_event_ms = 0;
    } else if (ms->io_event_ms == 0 || !old->present || !old->io_running ||
               old->master != c->master ||
               !gtid_pos_equal(&old->io_pos, &c->io_pos) ||
               old->heartbeats != c->heartbeats) {
        ms->io_event_ms = now;
    }
    c->event_age_ms = ms->io_event_ms == 0 ? -1
                                           : (int64_t)(now - ms->io_event_ms);
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
    inst->servers[i].nnamed = 0;
    while ((row = mysql_fetch_row(res)) != NULL) {
        bool is_default = col(row, name_idx)[0] == '\0';
        struct mmon_server *ms = &inst->servers[i];

        if (!is_default && ms->nnamed < MMON_MAX_NAMED) {
            /* enforce_simple_topology removes these */
            snprintf(ms->named[ms->nnamed++], sizeof(ms->named[0]), "%s",
                     col(row, name_idx));
        }
        if (!inst->views[i].slave.present || is_default) {
            parse_slave_row(inst, res, row, &inst->views[i].slave);
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
                       "@@gtid_slave_pos, (SELECT VARIABLE_VALUE FROM "
                       "information_schema.GLOBAL_STATUS WHERE "
                       "VARIABLE_NAME = 'UPTIME')") != 0 ||
        (res = mysql_store_result(c)) == NULL) {
        unsigned err = mysql_errno(c);
        return err >= MMON_CR_MIN ? err : 0;
    }
    row = mysql_fetch_row(res);
    if (row != NULL && mysql_num_fields(res) == 7) {
        v->read_only = atoi(col(row, 0)) != 0;
        v->server_id = strtoll(col(row, 1), NULL, 10);
        sl_server_set_server_id(inst->servers[i].srv, v->server_id);
        sl_server_set_version(inst->servers[i].srv,
                              mysql_get_server_version(c), col(row, 2));
        mmon_gtid_parse(col(row, 3), &v->current_pos);
        sl_server_set_gtid_pos(inst->servers[i].srv, col(row, 3));
        mmon_gtid_parse(col(row, 4), &v->binlog_pos);
        mmon_gtid_parse(col(row, 5), &v->slave_pos);
        v->uptime = row[6] ? strtoll(row[6], NULL, 10) : -1;
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

/* One probe on the open connection: 0, or the client error (>= 2000)
 * that broke it. */
static unsigned
probe_once(struct mmon_instance *inst, int i)
{
    unsigned err;

    reset_view(&inst->views[i]);
    err = query_vars(inst, i);
    return err != 0 ? err : query_slaves(inst, i);
}

static void
probe_server(struct mmon_instance *inst, int i)
{
    struct mmon_server *ms = &inst->servers[i];
    unsigned err;

    inst->views[i].maint = (sl_server_status(ms->srv) & SL_SRV_MAINT) != 0;
    if (ms->conn == NULL && !open_conn(inst, ms)) {
        reset_view(&inst->views[i]);
        sl_monitor_count_error(inst->mon);
        return;
    }
    if ((err = probe_once(inst, i)) != 0) {
        /* The connection broke (a kept one died, or was killed): with
         * query_retries, fresh connections and the whole probe (read-only)
         * again before Down. */
        uint64_t first = sl_monotonic_ms();
        uint64_t done = 0;

        snprintf(ms->last_error, sizeof(ms->last_error), "%s",
                 mysql_error(ms->conn));
        while (err != 0 && sl_query_retry_ok(err, done++, first, inst->query_retries,
                                 inst->query_retry_timeout_ms)) {
            sl_log_notice("Monitor '%s': probe of '%s' failed (%s); retry %llu of query_retries", MONNAME(inst), SRVNAME(inst, i), ms->last_error, (unsigned long long)done);
            close_conn(ms);
            if (!open_conn(inst, ms)) {
                break;      /* open_conn logged and kept the error */
            }
            if ((err = probe_once(inst, i)) != 0) {
                snprintf(ms->last_error, sizeof(ms->last_error), "%s",
                         mysql_error(ms->conn));
            }
        }
        if (err != 0 || ms->conn == NULL) {
            if (ms->conn != NULL) {
                sl_log_warn("Monitor '%s': probe of '%s' failed: %s (after %llu retries; query_retries=%llu)", MONNAME(inst), SRVNAME(inst, i), ms->last_error, (unsigned long long)(done - 1), (unsigned long long)inst->query_retries);
            }
            close_conn(ms);
            inst->views[i].running = false;
            sl_monitor_count_error(inst->mon);
            return;
        }
    }
    inst->views[i].running = true;
    inst->views[i].disk_low = ms->disk_low;
    track_io_event(ms, &inst->views[i].slave, &ms->last_slave);
    ms->last_slave = inst->views[i].slave;
    ms->seen_binlog = inst->views[i].binlog_pos;
    ms->seen_binlog_known = true;
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
    if (v[i].disk_low) {
        bits |= SL_SRV_DISK_EXHAUSTED;
    }
    if (i == inst->primary) {
        if (inst->master_ok) {
            bits |= SL_SRV_MASTER;
        }
    } else if (mmon_is_replica(v, inst->n, i) &&
               mmon_slave_conds_ok(v, inst->n, i, inst->primary,
                                   inst->master_ok, inst->slave_conds,
                                   inst->coop_ok)) {
        bits |= SL_SRV_SLAVE;
        if (mmon_count_replicas(v, inst->n, i) > 0) {
            bits |= SL_SRV_RELAY;
        }
    }
    return bits;
}

/* ---- master_conditions, slave_conditions (mmon_conds.c) ---- */

/* MaxScale's name: the primary monitor holds it on the primary server, so
 * secondary monitors (Sluice's or MaxScale's) publish the same primary. */
#define MMON_MASTER_LOCK "maxscale_mariadbmonitor_master"

static long long query_int(struct mmon_instance *inst, int i,
                           const char *sql);

/*
 * With cooperative locks: the primary monitor takes MMON_MASTER_LOCK on
 * the primary candidate's monitor connection (and gives it up anywhere
 * else); a secondary monitor holds none and looks whether another
 * connection holds it on its own candidate. True when the candidate is
 * the primary monitor's choice (always true without cooperative locks).
 */
static bool
update_master_lock(struct mmon_instance *inst)
{
    int p = inst->primary;
    bool take = inst->primary_monitor && p >= 0 && inst->views[p].running;
    bool ok;

    if (inst->coop == MMON_COOP_NONE) {
        return true;
    }
    for (int i = 0; i < inst->n; i++) {
        struct mmon_server *ms = &inst->servers[i];

        if (ms->conn == NULL) {
            ms->master_lock_held = false;   /* went with the connection */
        } else if (ms->master_lock_held && (!take || i != p)) {
            query_int(inst, i, "SELECT RELEASE_LOCK('" MMON_MASTER_LOCK "')");
            ms->master_lock_held = false;
        }
    }
    if (p < 0 || !inst->views[p].running) {
        return false;
    }
    if (take) {
        ok = query_int(inst, p, "SELECT IF(IS_USED_LOCK('" MMON_MASTER_LOCK
                       "') = CONNECTION_ID(), 1, GET_LOCK('" MMON_MASTER_LOCK
                       "', 0))") == 1;
        inst->servers[p].master_lock_held = ok;
        return true;   /* the primary monitor's own choice */
    }
    ok = query_int(inst, p, "SELECT IFNULL(IS_USED_LOCK('" MMON_MASTER_LOCK
                   "') <> CONNECTION_ID(), 0)") == 1;
    return ok;
}

/* Before each publish: may the candidate be Master, with the reason
 * logged once when it may not. */
static void
update_conditions(struct mmon_instance *inst)
{
    struct mmon_slave_conn last[inst->n > 0 ? inst->n : 1];
    char why[256] = "";
    bool was = inst->master_ok;

    for (int i = 0; i < inst->n; i++) {
        last[i] = inst->views[i].running ? inst->views[i].slave
                                         : inst->servers[i].last_slave;
    }
    inst->coop_ok = update_master_lock(inst);
    inst->master_ok = mmon_master_conds_ok(inst->views, last, inst->n,
                                           inst->primary, inst->master_conds,
                                           inst->coop_ok, why, sizeof(why));
    if (inst->primary >= 0 && !inst->master_ok &&
        (was || strcmp(why, inst->master_why) != 0)) {
        sl_log_warn("Monitor '%s': primary candidate '%s' is not published Master: %s", MONNAME(inst), SRVNAME(inst, inst->primary), why);
    }
    snprintf(inst->master_why, sizeof(inst->master_why), "%s",
             inst->master_ok ? "" : why);
}

/* ---- script, events (mmon_script.c) ---- */

/* "[address]:port" of server i appended to a comma list. */
static void
script_list_add(struct mmon_instance *inst, int i, char *buf, size_t len)
{
    size_t o = strlen(buf);
    struct sl_server *srv = inst->servers[i].srv;

    snprintf(buf + o, len - o, "%s[%s]:%d", o ? "," : "",
             sl_server_address(srv), sl_server_port(srv));
}

/*
 * Queue the script for server i's event, with every variable as it is
 * now (statuses published this tick): the run happens once the tick (or
 * the command) has released the instance lock, never under it.
 */
static void
script_queue(struct mmon_instance *inst, int i, enum mmon_event ev)
{
    char initiator[600] = "", parent[600] = "", children[4096] = "";
    char nodes[4096] = "", list[4096] = "", masters[4096] = "";
    char slaves[4096] = "", creds[600];
    struct mmon_script_vars vars;
    struct mmon_script_job *jobs;
    struct mmon_script_job job;
    size_t argc = 0;

    if (inst->script_argv == NULL ||
        !(inst->script_events & ((1ull << ev) | (1ull << MMON_EV_COUNT)))) {
        return;
    }
    script_list_add(inst, i, initiator, sizeof(initiator));
    if (inst->servers[i].parent >= 0) {
        script_list_add(inst, inst->servers[i].parent, parent, sizeof(parent));
    }
    for (int j = 0; j < inst->n; j++) {
        uint32_t st = sl_server_status(inst->servers[j].srv);

        if (j != i && inst->views[j].running &&
            inst->views[j].slave.present && inst->views[j].slave.master == i) {
            script_list_add(inst, j, children, sizeof(children));
        }
        script_list_add(inst, j, list, sizeof(list));
        if (st & SL_SRV_RUNNING) {
            script_list_add(inst, j, nodes, sizeof(nodes));
        }
        if ((st & (SL_SRV_RUNNING | SL_SRV_MASTER)) ==
            (SL_SRV_RUNNING | SL_SRV_MASTER)) {
            script_list_add(inst, j, masters, sizeof(masters));
        }
        if ((st & (SL_SRV_RUNNING | SL_SRV_SLAVE)) ==
            (SL_SRV_RUNNING | SL_SRV_SLAVE)) {
            script_list_add(inst, j, slaves, sizeof(slaves));
        }
    }
    snprintf(creds, sizeof(creds), "%s:%s", sl_monitor_user(inst->mon),
             sl_monitor_password(inst->mon));
    vars = (struct mmon_script_vars){
        .initiator = initiator, .parent = parent, .children = children,
        .event = mmon_event_names[ev], .credentials = creds,
        .nodelist = nodes, .list = list, .masterlist = masters,
        .slavelist = slaves, .syncedlist = "",
    };
    while (inst->script_argv[argc] != NULL) {
        argc++;
    }
    memset(&job, 0, sizeof(job));
    job.argv = calloc(argc + 1, sizeof(*job.argv));
    for (size_t k = 0; job.argv != NULL && k < argc; k++) {
        if ((job.argv[k] = mmon_script_subst(inst->script_argv[k],
                                             &vars)) == NULL) {
            mmon_script_free_argv(job.argv);
            job.argv = NULL;
        }
    }
    jobs = job.argv ? realloc(inst->jobs, (inst->njobs + 1) * sizeof(*jobs))
                    : NULL;
    if (jobs == NULL) {
        mmon_script_free_argv(job.argv);
        sl_log_error("Monitor '%s': out of memory: script for event %s of '%s' not run", MONNAME(inst), mmon_event_names[ev], SRVNAME(inst, i));
        return;
    }
    snprintf(job.who, sizeof(job.who), "Monitor '%s' script (%s of '%s')",
             MONNAME(inst), mmon_event_names[ev], SRVNAME(inst, i));
    inst->jobs = jobs;
    inst->jobs[inst->njobs++] = job;
}

/* Compare each server's status with what the events last saw. */
static void
script_events(struct mmon_instance *inst)
{
    for (int i = 0; i < inst->n; i++) {
        struct mmon_server *ms = &inst->servers[i];
        uint32_t now = sl_server_status(ms->srv);
        enum mmon_event ev;

        if (inst->views[i].running) {
            ms->parent = inst->views[i].slave.present
                             ? inst->views[i].slave.master : -1;
        }
        ev = mmon_event_of(ms->ev_status, now);
        ms->ev_status = now;
        if (ev != MMON_EV_NONE) {
            ms->last_ev = (int)ev;
            ms->last_ev_at = time(NULL);
            sl_log_notice("Monitor '%s': server '%s' event %s", MONNAME(inst), SRVNAME(inst, i), mmon_event_names[ev]);
            script_queue(inst, i, ev);
        }
    }
}

/* Run the queued scripts, one after the other; the lock is NOT held, so
 * commands and diagnostics go on meanwhile. Monitor thread. */
static void
script_run_queued(struct mmon_instance *inst)
{
    struct mmon_script_job *jobs;
    size_t n;

    pthread_mutex_lock(&inst->lock);
    jobs = inst->jobs;
    n = inst->njobs;
    inst->jobs = NULL;
    inst->njobs = 0;
    pthread_mutex_unlock(&inst->lock);
    for (size_t k = 0; k < n; k++) {
        mmon_script_run(jobs[k].argv, inst->script_timeout_ms, jobs[k].who,
                        sl_monitor_password(inst->mon));
        mmon_script_free_argv(jobs[k].argv);
    }
    free(jobs);
}

static void
publish(struct mmon_instance *inst)
{
    update_conditions(inst);
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
    script_events(inst);
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
        inst->failover_blocked[0] = '\0';
        inst->verify_logged = false;
        inst->no_candidate_logged = false;
    }
    inst->primary = now;
}

/*
 * auto_failover=safe (MaxScale's): fail over only when no transaction the
 * failed primary is known to have written is lost: the replica failover
 * would promote must have received (or applied) everything up to the
 * primary's gtid_binlog_pos as the last good probe saw it. Otherwise no
 * automatic failover: a warning says why (once per reason), the reason
 * is in monitor_diagnostics.auto_failover_blocked, and the manual
 * failover command stays possible. Writes the primary made after the
 * last probe cannot be known: the check is as good as the monitor's
 * view (MaxScale's rule has the same limit).
 */
/* The safety rule for failing over `old`: true, or false with why[]. */
static bool
failover_safe_now(struct mmon_instance *inst, int old, char *now,
                  size_t nowlen)
{
    const struct mmon_server *ms = &inst->servers[old];
    char why[384], b[512];
    int cand = mmon_pick_promotion(inst->views, inst->n, old, why,
                                   sizeof(why));

    if (cand < 0) {
        return true;   /* the failover reports it has no candidate */
    }
    if (!ms->seen_binlog_known) {
        snprintf(now, nowlen, "the binary log position of primary "
                 "'%s' was never seen (down since before Sluice started)",
                 SRVNAME(inst, old));
        return false;
    }
    if (!mmon_failover_safe(&ms->seen_binlog, &inst->views[cand], why,
                            sizeof(why))) {
        snprintf(now, nowlen, "promoting '%s' would lose transactions "
                 "of primary '%s' (last seen gtid_binlog_pos %s): %s",
                 SRVNAME(inst, cand), SRVNAME(inst, old),
                 mmon_gtid_format(&ms->seen_binlog, b, sizeof(b)), why);
        return false;
    }
    return true;
}

static bool
failover_is_safe(struct mmon_instance *inst)
{
    char now[sizeof(inst->failover_blocked)];

    if (failover_safe_now(inst, inst->lost, now, sizeof(now))) {
        inst->failover_blocked[0] = '\0';
        return true;
    }
    if (strcmp(now, inst->failover_blocked) != 0) {
        snprintf(inst->failover_blocked, sizeof(inst->failover_blocked),
                 "%s", now);
        sl_log_warn("Monitor '%s': not failing over (auto_failover=safe): %s; a manual failover is still possible", MONNAME(inst), now);
    }
    return false;
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
    alive = mmon_primary_still_replicating(
        inst->views, inst->n, inst->lost,
        (int64_t)inst->master_failure_timeout_ms);
    if (inst->verify_master_failure && alive >= 0) {
        if (!inst->verify_logged) {
            inst->verify_logged = true;
            sl_log_warn("Monitor '%s': not failing over: primary '%s' is unreachable from Sluice but replica '%s' is still connected to it and received an event from it %lld ms ago, within master_failure_timeout (%llu ms) (verify_master_failure)", MONNAME(inst), SRVNAME(inst, inst->lost), SRVNAME(inst, alive), (long long)inst->views[alive].slave.event_age_ms, (unsigned long long)inst->master_failure_timeout_ms);
        }
        return;
    }
    if (inst->failover_safe && !failover_is_safe(inst)) {
        return;
    }
    snprintf(reason, sizeof(reason), "primary '%s' down for %llu monitor "
             "intervals (failcount=%llu)%s", SRVNAME(inst, inst->lost),
             (unsigned long long)inst->lost_ticks,
             (unsigned long long)inst->failcount,
             !inst->verify_master_failure ? "" :
             mmon_primary_still_replicating(inst->views, inst->n, inst->lost,
                                            -1) >= 0
                 ? ", no replica received an event from it within "
                   "master_failure_timeout"
                 : ", no replica connected to it");
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
        if (v->slave.present &&
            (m == inst->primary ||
             (!inst->enforce_simple_topology &&
              (m < 0 || inst->views[m].running)))) {
            /* replicating from something alive: leave it (with
             * enforce_simple_topology, only from the primary) */
            ms->diverged_logged = false;
            continue;
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

/*
 * enforce_writable_master (MaxScale's): the server that would be the
 * primary but for read_only gets read_only=0. That is the last primary
 * when it is still running and replicates from no running monitored
 * server, else the server the primary choice would make with read_only
 * ignored, if it has a replica (so a set of standalone servers never
 * gets one made writable). Nothing while the last primary is down: that
 * is failover's decision (auto_failover, safe or not). Runs before the primary is chosen, so the
 * server is Master in the same tick. Only the primary monitor, never a
 * passive instance (primary_monitor is false then).
 */
static void
enforce_writable(struct mmon_instance *inst)
{
    struct mmon_view *copy;
    int c = inst->primary;
    char err[512];

    if (!inst->enforce_writable_master || !inst->primary_monitor ||
        (c >= 0 && !inst->views[c].read_only)) {
        return;
    }
    /* A primary that is down (or was, and failover has not replaced it)
     * is failover's business: never make another server writable here. */
    if ((c >= 0 && !inst->views[c].running) || inst->lost >= 0) {
        return;
    }
    copy = malloc(sizeof(*copy) * (size_t)inst->n);
    if (copy == NULL) {
        return;
    }
    memcpy(copy, inst->views, sizeof(*copy) * (size_t)inst->n);
    for (int i = 0; i < inst->n; i++) {
        copy[i].read_only = false;
    }
    c = mmon_pick_primary(copy, inst->n, inst->primary);
    if (c >= 0 && c != inst->primary &&
        mmon_count_replicas(copy, inst->n, c) == 0) {
        c = -1;
    }
    free(copy);
    if (c < 0 || !inst->views[c].read_only || inst->views[c].maint) {
        return;
    }
    sl_log_notice("Monitor '%s': primary '%s' is read-only, setting read_only=0 (enforce_writable_master)", MONNAME(inst), SRVNAME(inst, c));
    if (mmon_exec(inst, c, "SET GLOBAL read_only=0", err, sizeof(err)) == 0) {
        inst->views[c].read_only = false;
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

/* last_event (the latest state-change event, as the script's events
 * name it) and triggered_at (its time, an HTTP date as MaxScale writes
 * it); null before the first. */
static void
last_event(const struct mmon_server *ms, json_t *entry)
{
    char when[64];
    struct tm tm;

    if (ms->last_ev < 0 || gmtime_r(&ms->last_ev_at, &tm) == NULL ||
        strftime(when, sizeof(when), "%a, %d %b %Y %H:%M:%S GMT", &tm) ==
            0) {
        json_object_set_new(entry, "last_event", json_null());
        json_object_set_new(entry, "triggered_at", json_null());
        return;
    }
    json_object_set_new(entry, "last_event",
                        json_string(mmon_event_names[ms->last_ev]));
    json_object_set_new(entry, "triggered_at", json_string(when));
}

/* MaxScale's server attributes that the core copies into the server's
 * REST resource (admin_json.c, server_monitor_facts) besides those of
 * server_info: node_id, master_id, uptime. */
static void
server_facts(const struct mmon_instance *inst, int i, json_t *entry)
{
    const struct mmon_view *v = &inst->views[i];
    const struct mmon_slave_conn *sc = &v->slave;

    if (entry == NULL) {
        return;
    }
    json_object_set_new(entry, "node_id", json_integer(
        v->running ? (json_int_t)v->server_id : -1));
    json_object_set_new(entry, "master_id", json_integer(
        sc->present && sc->master >= 0
            ? (json_int_t)inst->views[sc->master].server_id : -1));
    json_object_set_new(entry, "uptime", v->running && v->uptime >= 0
                                             ? json_integer(v->uptime)
                                             : json_null());
    last_event(&inst->servers[i], entry);
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
        server_facts(inst, i, json_array_get(arr, json_array_size(arr) - 1));
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
    json_object_set_new(doc, "auto_failover_blocked",
                        inst->failover_blocked[0]
                            ? json_string(inst->failover_blocked)
                            : json_null());
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

/* ---- enforce_simple_topology ---- */

/*
 * A primary never seen running (down since before Sluice started): the
 * server most running replicas replicate from counts as the failed
 * primary, so failcount and auto_failover apply to it.
 */
static void
guess_lost_primary(struct mmon_instance *inst)
{
    int best = -1, most = 0;

    if (!inst->enforce_simple_topology || inst->primary >= 0 ||
        inst->lost >= 0) {
        return;
    }
    for (int j = 0; j < inst->n; j++) {
        int n = 0;

        if (inst->views[j].running) {
            continue;
        }
        for (int i = 0; i < inst->n; i++) {
            n += i != j && inst->views[i].running &&
                 inst->views[i].slave.present &&
                 inst->views[i].slave.master == j;
        }
        if (n > most) {
            most = n;
            best = j;
        }
    }
    if (best >= 0) {
        inst->lost = best;
        inst->lost_ticks = 1;
        sl_log_warn("Monitor '%s': no primary; '%s' is down and %d replica(s) replicate from it: treating it as the failed primary (enforce_simple_topology)", MONNAME(inst), SRVNAME(inst, best), most);
    }
}

/* Every server but the primary keeps only its default replication
 * connection: named ones (other sources) are stopped and removed. */
static void
remove_extra_sources(struct mmon_instance *inst)
{
    char err[512], sql[200], name[130];

    if (!inst->enforce_simple_topology || !inst->primary_monitor) {
        return;
    }
    for (int i = 0; i < inst->n; i++) {
        struct mmon_server *ms = &inst->servers[i];
        bool changed = false;

        if (i == inst->primary || !inst->views[i].running ||
            inst->views[i].maint) {
            continue;
        }
        for (int k = 0; k < ms->nnamed; k++) {
            size_t o = 0;

            for (const char *p = ms->named[k]; *p && o + 2 < sizeof(name);
                 p++) {
                if (*p == '\'' || *p == '\\') {
                    name[o++] = '\\';
                }
                name[o++] = *p;
            }
            name[o] = '\0';
            sl_log_notice("Monitor '%s': removing replication connection '%s' of '%s' (enforce_simple_topology: one source, the primary)", MONNAME(inst), ms->named[k], SRVNAME(inst, i));
            snprintf(sql, sizeof(sql), "STOP SLAVE '%s'", name);
            if (mmon_exec(inst, i, sql, err, sizeof(err)) == 0) {
                snprintf(sql, sizeof(sql), "RESET SLAVE '%s' ALL", name);
                mmon_exec(inst, i, sql, err, sizeof(err));
            }
            changed = true;
        }
        if (changed) {
            probe_server(inst, i);
        }
    }
}

/* ---- disk space (disk_space_threshold, disk_space_check_interval) ---- */

/* The threshold that applies to server i: its own, else the monitor's;
 * NULL when neither is set. */
static const char *
disk_threshold_of(const struct mmon_instance *inst, int i)
{
    const char *own = sl_params_get(sl_server_params(inst->servers[i].srv),
                                    "disk_space_threshold");

    if (own != NULL && own[strspn(own, " \t")] != '\0') {
        return own;
    }
    return inst->disk_threshold;
}

/* Say once why server i's disks cannot be checked; it then counts as not
 * low on disk space (as in MaxScale, which stops checking it). */
static void
disk_cannot_check(struct mmon_instance *inst, int i, const char *why)
{
    struct mmon_server *ms = &inst->servers[i];

    ms->disk_low = false;
    ms->disk_detail[0] = '\0';
    if (!ms->disk_warned) {
        ms->disk_warned = true;
        sl_log_warn("Monitor '%s': cannot check the disk space of server '%s': %s", MONNAME(inst), SRVNAME(inst, i), why);
    }
}

/* Query information_schema.DISKS on server i against `limits`. */
static void
check_disk(struct mmon_instance *inst, int i,
           const struct sl_disk_limits *limits)
{
    struct mmon_server *ms = &inst->servers[i];
    MYSQL *c = ms->conn;
    MYSQL_RES *res;
    MYSQL_ROW row;
    bool low = false;
    int rows = 0;
    char detail[sizeof(ms->disk_detail)] = "";
    char why[320];

    if (mysql_query(c, "SELECT Path, Total, Available FROM "
                       "information_schema.DISKS") != 0 ||
        (res = mysql_store_result(c)) == NULL) {
        if (mysql_errno(c) == 1109) {   /* ER_UNKNOWN_TABLE */
            disk_cannot_check(inst, i, "information_schema.DISKS does not "
                              "exist: the disks plugin is not installed "
                              "(INSTALL SONAME 'disks')");
        } else {
            snprintf(why, sizeof(why), "SELECT FROM information_schema."
                     "DISKS failed: %s", mysql_error(c));
            disk_cannot_check(inst, i, why);
        }
        return;
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        const char *path = row[0] ? row[0] : "";
        uint64_t total = row[1] ? strtoull(row[1], NULL, 10) : 0;
        uint64_t avail = row[2] ? strtoull(row[2], NULL, 10) : 0;
        int limit = sl_disk_limit_for(limits, path);

        rows++;
        if (!low && sl_disk_exhausted(total, avail, limit)) {
            low = true;
            snprintf(detail, sizeof(detail), "the disk at '%.100s' is "
                     "%llu%% used, its limit is %d%%", path,
                     (unsigned long long)((total - avail) * 100 / total),
                     limit);
        }
    }
    mysql_free_result(res);
    if (rows == 0) {
        disk_cannot_check(inst, i, "information_schema.DISKS is empty: "
                          "the monitor user needs the FILE privilege");
        return;
    }
    ms->disk_warned = false;
    if (low && !ms->disk_low) {
        sl_log_warn("Server '%s' is low on disk space: %s (disk_space_threshold)", SRVNAME(inst, i), detail);
    } else if (!low && ms->disk_low) {
        sl_log_notice("Server '%s' is no longer low on disk space", SRVNAME(inst, i));
    }
    ms->disk_low = low;
    snprintf(ms->disk_detail, sizeof(ms->disk_detail), "%s", detail);
}

/*
 * Every disk_space_check_interval (at most once a tick), each running
 * server not in maintenance with a threshold: low on disk space or not.
 * A server in maintenance keeps what it had (MaxScale: no longer
 * updated). Sets the views' disk_low for this tick.
 */
static void
check_disks(struct mmon_instance *inst)
{
    uint64_t now = sl_monotonic_ms();

    for (int i = 0; i < inst->n; i++) {
        struct mmon_server *ms = &inst->servers[i];
        const char *text = disk_threshold_of(inst, i);
        struct sl_disk_limits limits;
        char why[256];

        if (inst->disk_interval_ms == 0 || text == NULL ||
            sl_disk_limits_parse(text, &limits, why, sizeof(why)) < 0 ||
            !sl_disk_limits_set(&limits)) {
            ms->disk_low = false;   /* not checked: not low */
            ms->disk_detail[0] = '\0';
        } else if (inst->views[i].running && !inst->views[i].maint &&
                   ms->conn != NULL && now >= ms->disk_next_ms) {
            ms->disk_next_ms = now + inst->disk_interval_ms;
            check_disk(inst, i, &limits);
        }
        inst->views[i].disk_low = inst->views[i].running && ms->disk_low;
    }
}

/* maintenance_on_low_disk_space: a running server low on disk space that
 * is neither the primary nor a relay (it has replicas) goes into
 * maintenance, until an administrator clears it (MaxScale). */
static void
low_disk_maintenance(struct mmon_instance *inst)
{
    if (!inst->maint_low_disk) {
        return;
    }
    for (int i = 0; i < inst->n; i++) {
        struct mmon_view *v = &inst->views[i];
        struct sl_server *srv = inst->servers[i].srv;

        if (!v->running || !v->disk_low || v->maint || i == inst->primary ||
            mmon_count_replicas(inst->views, inst->n, i) > 0) {
            continue;
        }
        sl_log_warn("Monitor '%s': setting server '%s' to maintenance: it is low on disk space, %s (maintenance_on_low_disk_space; clear it with 'maxctrl clear server %s maintenance')", MONNAME(inst), SRVNAME(inst, i), inst->servers[i].disk_detail, SRVNAME(inst, i));
        sl_server_set_status(srv, sl_server_status(srv) | SL_SRV_MAINT);
        v->maint = true;
    }
}

static bool may_change_cluster(struct mmon_instance *inst, char *err,
                               size_t errlen);

/* switchover_on_low_disk_space: the primary low on disk space is switched
 * over to the most up-to-date replica that is not; after a failure (or
 * with no such replica) not tried again for failcount ticks. */
static void
maybe_low_disk_switchover(struct mmon_instance *inst)
{
    int old = inst->primary;
    int cand;
    char err[512];

    if (!inst->switchover_low_disk || old < 0 ||
        !inst->views[old].running || !inst->views[old].disk_low) {
        inst->low_disk_logged = false;
        return;
    }
    if (inst->low_disk_backoff > 0) {
        inst->low_disk_backoff--;
        return;
    }
    if (!may_change_cluster(inst, err, sizeof(err))) {
        if (!inst->low_disk_logged) {
            inst->low_disk_logged = true;
            sl_log_warn("Monitor '%s': primary '%s' is low on disk space but this instance does not switch it over: %s", MONNAME(inst), SRVNAME(inst, old), err);
        }
        return;
    }
    cand = mmon_pick_promotion_disk_ok(inst->views, inst->n, old, err,
                                       sizeof(err));
    if (cand < 0) {
        if (!inst->low_disk_logged) {
            inst->low_disk_logged = true;
            sl_log_warn("Monitor '%s': primary '%s' is low on disk space, %s, but there is no replica to switch over to that is not: %s", MONNAME(inst), SRVNAME(inst, old), inst->servers[old].disk_detail, err);
        }
        inst->low_disk_backoff = inst->failcount;
        return;
    }
    sl_log_warn("Monitor '%s': primary '%s' is low on disk space, %s: switching over to '%s' (switchover_on_low_disk_space)", MONNAME(inst), SRVNAME(inst, old), inst->servers[old].disk_detail, SRVNAME(inst, cand));
    if (mmon_switchover(inst, cand, old, err, sizeof(err)) < 0) {
        sl_log_error("Monitor '%s': switchover away from '%s', low on disk space, failed: %s", MONNAME(inst), SRVNAME(inst, old), err);
        inst->low_disk_backoff = inst->failcount;
    }
    mmon_probe_all(inst);
    update_primary(inst);
}

static void run_scheduled(struct mmon_instance *inst);

static void
mmon_tick(void *instance)
{
    struct mmon_instance *inst = instance;

    pthread_mutex_lock(&inst->lock);
    mmon_probe_all(inst);
    check_disks(inst);
    update_locks(inst);
    enforce_writable(inst);
    update_primary(inst);
    guess_lost_primary(inst);
    if (inst->primary >= 0) {
        mmon_events_remember(inst, inst->primary);
    }
    maybe_failover(inst);
    maybe_low_disk_switchover(inst);
    remove_extra_sources(inst);
    maybe_rejoin(inst);
    low_disk_maintenance(inst);
    enforce_read_only(inst);
    publish(inst);
    update_snapshot(inst);
    pthread_mutex_unlock(&inst->lock);
    run_scheduled(inst);
    script_run_queued(inst);
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

/* auto_failover: MaxScale 24.02's enum (the booleans, and safe). */
enum mmon_af {
    MMON_AF_FALSE, MMON_AF_TRUE, MMON_AF_SAFE, MMON_AF_OFF, MMON_AF_ON,
    MMON_AF_NO, MMON_AF_YES, MMON_AF_0, MMON_AF_1,
};
static const char *const auto_failover_names[] = {
    "false", "true", "safe", "off", "on", "no", "yes", "0", "1", NULL};

static void
read_params(struct mmon_instance *inst, const struct sl_params *p)
{
    const char *u = sl_params_get(p, "replication_user");
    const char *pw = sl_params_get(p, "replication_password");

    switch (sl_params_enum(p, "auto_failover")) {
    case MMON_AF_SAFE:
        inst->auto_failover = true;
        inst->failover_safe = true;
        break;
    case MMON_AF_TRUE: case MMON_AF_ON: case MMON_AF_YES: case MMON_AF_1:
        inst->auto_failover = true;
        break;
    default:
        break;
    }
    inst->enforce_writable_master = sl_params_bool(p,
                                                   "enforce_writable_master");
    inst->auto_rejoin = sl_params_bool(p, "auto_rejoin");
    inst->verify_master_failure = sl_params_bool(p, "verify_master_failure");
    inst->master_failure_timeout_ms =
        sl_params_duration_ms(p, "master_failure_timeout");
    inst->enforce_read_only_slaves =
        sl_params_bool(p, "enforce_read_only_slaves");
    inst->handle_events = sl_params_bool(p, "handle_events");
    inst->enforce_simple_topology = sl_params_bool(p,
                                                   "enforce_simple_topology");
    if (inst->enforce_simple_topology) {
        /* MaxScale: whatever they are set to (safe stays safe) */
        inst->auto_failover = true;
        inst->auto_rejoin = true;
    }
    inst->failcount = sl_params_count(p, "failcount");
    if (sl_global_params() != NULL) {      /* main thread, at creation */
        inst->query_retries = sl_params_count(sl_global_params(),
                                              "query_retries");
        inst->query_retry_timeout_ms = sl_params_duration_ms(
            sl_global_params(), "query_retry_timeout");
    }
    inst->switchover_timeout_ms = sl_params_duration_ms(p,
                                                        "switchover_timeout");
    inst->failover_timeout_ms = sl_params_duration_ms(p, "failover_timeout");
    inst->coop = (enum mmon_coop)sl_params_enum(p,
                                                "cooperative_monitoring_locks");
    inst->master_conds = (unsigned)sl_params_enum_mask(p,
                                                       "master_conditions");
    inst->slave_conds = (unsigned)sl_params_enum_mask(p, "slave_conditions");
    inst->disk_interval_ms = sl_params_duration_ms(p,
                                                   "disk_space_check_interval");
    inst->maint_low_disk = sl_params_bool(p, "maintenance_on_low_disk_space");
    inst->switchover_low_disk = sl_params_bool(p,
                                               "switchover_on_low_disk_space");
    /* MaxScale: without replication_user the monitor's own account is
     * used in CHANGE MASTER TO. */
    snprintf(inst->repl_user, sizeof(inst->repl_user), "%s",
             u && u[0] ? u : sl_monitor_user(inst->mon));
    snprintf(inst->repl_password, sizeof(inst->repl_password), "%s",
             u && u[0] ? (pw ? pw : "") : sl_monitor_password(inst->mon));
    parse_no_promotion(inst, p);
}

/* script, events, script_timeout. -1 (logged, naming the parameter) when
 * the command line cannot be split or its program cannot be run: MaxScale
 * refuses such a monitor too. */
static int
read_script(struct mmon_instance *inst, const struct sl_params *p)
{
    const char *cmd = sl_params_get(p, "script");
    char err[256];

    inst->script_events = sl_params_enum_mask(p, "events");
    inst->script_timeout_ms = sl_params_duration_ms(p, "script_timeout");
    if (cmd == NULL || cmd[0] == '\0') {
        return 0;
    }
    if (mmon_script_split(cmd, &inst->script_argv, err, sizeof(err)) < 0) {
        sl_log_error("Monitor '%s': parameter 'script': %s", MONNAME(inst), err);
        return -1;
    }
    if (!mmon_script_executable(inst->script_argv[0])) {
        sl_log_error("Monitor '%s': parameter 'script': '%s' is not an executable file (absolute path, or a program in PATH)", MONNAME(inst), inst->script_argv[0]);
        return -1;
    }
    return 0;
}

/* promotion_sql_file, demotion_sql_file: kept as paths and read at each
 * operation (as MaxScale does); at start-up each must be readable, or the
 * monitor is refused naming the parameter (the core adds FILE:LINE). */
static int
read_sql_files(struct mmon_instance *inst, const struct sl_params *p)
{
    static const char *const names[] = {"promotion_sql_file",
                                        "demotion_sql_file"};
    char **slots[] = {&inst->promotion_sql_file, &inst->demotion_sql_file};
    char err[1024];

    for (int k = 0; k < 2; k++) {
        const char *path = sl_params_get(p, names[k]);

        if (path == NULL || path[0] == '\0') {
            continue;
        }
        if (mmon_run_sql_file(inst, -1, names[k], path, err,
                              sizeof(err)) < 0) {
            /* err starts with the parameter's name and ": " */
            sl_log_error("Monitor '%s': parameter '%s': %s", MONNAME(inst), names[k], err + strlen(names[k]) + 2);
            return -1;
        }
        *slots[k] = strdup(path);
        if (*slots[k] == NULL) {
            return -1;
        }
    }
    return 0;
}

/*
 * disk_space_threshold (the monitor's; the core checked its syntax, and
 * the servers') and the settings that have no effect without a check,
 * said at start-up rather than silently doing nothing.
 */
static int
read_disk_params(struct mmon_instance *inst, const struct sl_params *p)
{
    const char *t = sl_params_get(p, "disk_space_threshold");
    int with_limit = 0;

    if (t != NULL && t[strspn(t, " \t")] != '\0') {
        inst->disk_threshold = strdup(t);
        if (inst->disk_threshold == NULL) {
            return -1;
        }
    }
    for (int i = 0; i < inst->n; i++) {
        with_limit += disk_threshold_of(inst, i) != NULL;
    }
    if (inst->disk_interval_ms == 0 && with_limit > 0) {
        sl_log_warn("Monitor '%s': disk_space_threshold applies to %d server(s) but disk_space_check_interval is 0: disk space is not checked (set disk_space_check_interval, e.g. 10s)", MONNAME(inst), with_limit);
    } else if (inst->disk_interval_ms > 0 && with_limit == 0) {
        sl_log_warn("Monitor '%s': disk_space_check_interval is set but no disk_space_threshold applies to any of its servers: disk space is not checked", MONNAME(inst));
    }
    if (inst->switchover_low_disk &&
        (inst->disk_interval_ms == 0 || with_limit == 0)) {
        sl_log_warn("Monitor '%s': switchover_on_low_disk_space=true has no effect without disk_space_threshold and disk_space_check_interval", MONNAME(inst));
    }
    return 0;
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
    for (size_t i = 0; i < n; i++) {
        inst->servers[i].parent = -1;
        inst->servers[i].last_ev = -1;
    }
    read_params(inst, p);
    if (read_script(inst, p) < 0 || read_sql_files(inst, p) < 0 ||
        read_disk_params(inst, p) < 0) {
        mmon_script_free_argv(inst->script_argv);
        free(inst->promotion_sql_file);
        free(inst->demotion_sql_file);
        free(inst->disk_threshold);
        free(inst->servers);
        free(inst->views);
        free(inst);
        return NULL;
    }
    pthread_mutex_init(&inst->lock, NULL);
    pthread_mutex_init(&inst->snap_lock, NULL);
    pthread_mutex_init(&inst->cmd_lock, NULL);
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
        free(inst->servers[i].events_enabled);
    }
    json_decref(inst->snapshot);
    for (size_t k = 0; k < inst->njobs; k++) {
        mmon_script_free_argv(inst->jobs[k].argv);
    }
    free(inst->jobs);
    mmon_script_free_argv(inst->script_argv);
    free(inst->promotion_sql_file);
    free(inst->demotion_sql_file);
    free(inst->disk_threshold);
    pthread_mutex_destroy(&inst->lock);
    pthread_mutex_destroy(&inst->snap_lock);
    pthread_mutex_destroy(&inst->cmd_lock);
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

enum cmd_kind { CMD_SWITCHOVER, CMD_FAILOVER, CMD_REJOIN, CMD_RELEASE,
                CMD_RESET, CMD_FAILOVER_SAFE };

static const char *const cmd_names[] = {"switchover", "failover", "rejoin",
                                        "release-locks",
                                        "reset-replication",
                                        "failover-safe"};

/* fetch-cmd-result's view of inst->cmd. */
enum mmon_cmd_state { CMD_NONE, CMD_SCHEDULED, CMD_RUNNING, CMD_DONE };

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
    case CMD_FAILOVER_SAFE:
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
        if (kind == CMD_FAILOVER_SAFE &&
            !failover_safe_now(inst, inst->lost, err, errlen)) {
            return -1;   /* MaxScale's failover-safe: the same rule */
        }
        return mmon_failover(inst, inst->lost, kind == CMD_FAILOVER_SAFE
                                 ? "manual failover-safe command"
                                 : "manual failover command", err, errlen);
    case CMD_REJOIN:
        if (!mmon_rejoin_allowed(inst, a, err, errlen)) {
            return -1;
        }
        return mmon_rejoin(inst, a, err, errlen);
    case CMD_RESET:
        return mmon_reset_replication(inst, a, err, errlen);
    }
    return -1;
}

/* A command, with the instance locked around it and the views fresh
 * before and published after. Any thread. */
static int
execute(struct mmon_instance *inst, enum cmd_kind kind, int a, int b,
        char *err, size_t errlen)
{
    int rc;

    pthread_mutex_lock(&inst->lock);
    mmon_probe_all(inst);
    update_locks(inst);
    update_primary(inst);
    rc = run_locked(inst, kind, a, b, err, errlen);
    mmon_probe_all(inst);
    if (kind != CMD_RELEASE) {
        update_locks(inst);
    }
    update_primary(inst);
    publish(inst);
    update_snapshot(inst);
    pthread_mutex_unlock(&inst->lock);
    return rc;
}

/* The latest manual command's end, for fetch-cmd-result. */
static void
cmd_done(struct mmon_instance *inst, int rc, const char *err)
{
    pthread_mutex_lock(&inst->cmd_lock);
    inst->cmd.state = CMD_DONE;
    inst->cmd.ok = rc >= 0;
    if (rc >= 0) {
        snprintf(inst->cmd.result, sizeof(inst->cmd.result),
                 "%s completed successfully.", inst->cmd.name);
    } else {
        snprintf(inst->cmd.result, sizeof(inst->cmd.result), "%s failed: %s",
                 inst->cmd.name, err);
    }
    pthread_mutex_unlock(&inst->cmd_lock);
}

/*
 * Claim the manual command slot for `kind` (scheduled or running now).
 * -EBUSY with *error set while another manual command is pending or
 * running: one at a time, as in MaxScale.
 */
static int
cmd_claim(struct mmon_instance *inst, enum cmd_kind kind, int a, int b,
          bool async, char **error)
{
    int rc = 0;

    pthread_mutex_lock(&inst->cmd_lock);
    if (inst->cmd.state == CMD_SCHEDULED || inst->cmd.state == CMD_RUNNING) {
        if (asprintf(error, "cannot run '%s': the command '%s' is %s on "
                     "monitor '%s' (fetch-cmd-result shows its result, "
                     "cancel-cmd cancels it while it is pending)",
                     cmd_names[kind], inst->cmd.name,
                     inst->cmd.state == CMD_SCHEDULED ? "pending"
                                                      : "running",
                     MONNAME(inst)) < 0) {
            *error = NULL;
        }
        rc = -EBUSY;
    } else {
        inst->cmd.state = async ? CMD_SCHEDULED : CMD_RUNNING;
        inst->cmd.kind = kind;
        inst->cmd.a = a;
        inst->cmd.b = b;
        inst->cmd.ok = false;
        inst->cmd.result[0] = '\0';
        snprintf(inst->cmd.name, sizeof(inst->cmd.name), "%s",
                 cmd_names[kind]);
    }
    pthread_mutex_unlock(&inst->cmd_lock);
    return rc;
}

/* Monitor thread, after a tick: run a scheduled async command. */
static void
run_scheduled(struct mmon_instance *inst)
{
    char err[1024] = "";
    int kind, a, b;
    int rc;

    pthread_mutex_lock(&inst->cmd_lock);
    if (inst->cmd.state != CMD_SCHEDULED) {
        pthread_mutex_unlock(&inst->cmd_lock);
        return;
    }
    inst->cmd.state = CMD_RUNNING;
    kind = inst->cmd.kind;
    a = inst->cmd.a;
    b = inst->cmd.b;
    pthread_mutex_unlock(&inst->cmd_lock);
    sl_log_notice("Monitor '%s': running the scheduled %s", MONNAME(inst), cmd_names[kind]);
    rc = execute(inst, (enum cmd_kind)kind, a, b, err, sizeof(err));
    cmd_done(inst, rc, err);
}

static int
run_command(enum cmd_kind kind, bool async, const struct sl_modcmd_arg *args,
            int nargs, void **output, char **error)
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
    if (kind == CMD_RELEASE) {
        /* not a cluster operation: no slot, no result to fetch */
        rc = execute(inst, kind, idx[0], idx[1], err, sizeof(err));
    } else {
        if ((rc = cmd_claim(inst, kind, idx[0], idx[1], async, error)) < 0) {
            return rc;
        }
        if (async) {
            /* The monitor thread runs it after its next tick. */
            sl_log_notice("Monitor '%s': %s scheduled (async-%s)", MONNAME(inst), cmd_names[kind], cmd_names[kind]);
            return 0;
        }
        rc = execute(inst, kind, idx[0], idx[1], err, sizeof(err));
        cmd_done(inst, rc, err);
    }
    if (rc < 0) {
        *error = strdup(err);
        return -EIO;
    }
    pthread_mutex_lock(&inst->lock);
    *output = json_pack("{s:s?}", "primary", inst->primary >= 0 ?
                        SRVNAME(inst, inst->primary) : NULL);
    pthread_mutex_unlock(&inst->lock);
    return 0;
}

static int
cmd_switchover(const struct sl_modcmd_arg *args, int nargs, void **output,
               char **error)
{
    return run_command(CMD_SWITCHOVER, false, args, nargs, output, error);
}

static int
cmd_failover(const struct sl_modcmd_arg *args, int nargs, void **output,
             char **error)
{
    return run_command(CMD_FAILOVER, false, args, nargs, output, error);
}

static int
cmd_failover_safe(const struct sl_modcmd_arg *args, int nargs,
                  void **output, char **error)
{
    return run_command(CMD_FAILOVER_SAFE, false, args, nargs, output, error);
}

static int
cmd_async_failover_safe(const struct sl_modcmd_arg *args, int nargs,
                        void **output, char **error)
{
    return run_command(CMD_FAILOVER_SAFE, true, args, nargs, output, error);
}

static int
cmd_rejoin(const struct sl_modcmd_arg *args, int nargs, void **output,
           char **error)
{
    return run_command(CMD_REJOIN, false, args, nargs, output, error);
}

static int
cmd_release_locks(const struct sl_modcmd_arg *args, int nargs,
                  void **output, char **error)
{
    return run_command(CMD_RELEASE, false, args, nargs, output, error);
}

static int
cmd_reset_replication(const struct sl_modcmd_arg *args, int nargs,
                      void **output, char **error)
{
    return run_command(CMD_RESET, false, args, nargs, output, error);
}

static int
cmd_async_switchover(const struct sl_modcmd_arg *args, int nargs,
                     void **output, char **error)
{
    return run_command(CMD_SWITCHOVER, true, args, nargs, output, error);
}

static int
cmd_async_failover(const struct sl_modcmd_arg *args, int nargs,
                   void **output, char **error)
{
    return run_command(CMD_FAILOVER, true, args, nargs, output, error);
}

static int
cmd_async_rejoin(const struct sl_modcmd_arg *args, int nargs, void **output,
                 char **error)
{
    return run_command(CMD_REJOIN, true, args, nargs, output, error);
}

static int
cmd_async_reset_replication(const struct sl_modcmd_arg *args, int nargs,
                            void **output, char **error)
{
    return run_command(CMD_RESET, true, args, nargs, output, error);
}

/*
 * fetch-cmd-result: the latest manual command (async or not) — pending,
 * running, "NAME completed successfully." or, for a failure, the error
 * (the call fails with it, as the command itself would have).
 */
static int
cmd_fetch_result(const struct sl_modcmd_arg *args, int nargs, void **output,
                 char **error)
{
    struct mmon_instance *inst = find_instance(args[0].v.monitor);
    int rc = 0;

    (void)nargs;
    if (inst == NULL) {
        *error = strdup("the monitor is not a mariadbmon monitor");
        return -EINVAL;
    }
    pthread_mutex_lock(&inst->cmd_lock);
    switch (inst->cmd.state) {
    case CMD_NONE:
        *output = json_string("No manual command results are available.");
        break;
    case CMD_SCHEDULED:
        *output = json_sprintf("Command '%s' is pending.", inst->cmd.name);
        break;
    case CMD_RUNNING:
        *output = json_sprintf("Command '%s' is still running.",
                               inst->cmd.name);
        break;
    default:
        if (inst->cmd.ok) {
            *output = json_string(inst->cmd.result);
        } else {
            *error = strdup(inst->cmd.result);
            rc = -EIO;
        }
        break;
    }
    pthread_mutex_unlock(&inst->cmd_lock);
    return rc;
}

/* cancel-cmd: drop a scheduled command that has not started. */
static int
cmd_cancel(const struct sl_modcmd_arg *args, int nargs, void **output,
           char **error)
{
    struct mmon_instance *inst = find_instance(args[0].v.monitor);
    int rc = 0;

    (void)nargs;
    (void)output;
    if (inst == NULL) {
        *error = strdup("the monitor is not a mariadbmon monitor");
        return -EINVAL;
    }
    pthread_mutex_lock(&inst->cmd_lock);
    if (inst->cmd.state == CMD_SCHEDULED) {
        inst->cmd.state = CMD_DONE;
        inst->cmd.ok = false;
        snprintf(inst->cmd.result, sizeof(inst->cmd.result),
                 "%s was cancelled before it started.", inst->cmd.name);
        sl_log_notice("Monitor '%s': scheduled %s cancelled (cancel-cmd)", MONNAME(inst), inst->cmd.name);
    } else {
        if (asprintf(error, "no command to cancel on monitor '%s'%s%s%s",
                     MONNAME(inst),
                     inst->cmd.state == CMD_RUNNING ? ": '" : "",
                     inst->cmd.state == CMD_RUNNING ? inst->cmd.name : "",
                     inst->cmd.state == CMD_RUNNING
                         ? "' is already running" : "") < 0) {
            *error = NULL;
        }
        rc = -EINVAL;
    }
    pthread_mutex_unlock(&inst->cmd_lock);
    return rc;
}

static const struct sl_modcmd_arg_spec reset_args[] = {
    {SL_MODCMD_ARG_MONITOR, false, "Monitor name"},
    {SL_MODCMD_ARG_SERVER, true, "New primary (default: the current one)"},
};

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
    {
        static const struct {
            const char *name;
            enum sl_modcmd_kind kind;
            sl_modcmd_fn fn;
            const struct sl_modcmd_arg_spec *args;
            int nargs;
            const char *desc;
        } more[] = {
            {"reset-replication", SL_MODCMD_ACTIVE, cmd_reset_replication,
             reset_args, 2, "Delete the binary logs and GTID positions of "
             "every server and restart replication from the primary "
             "(destructive)"},
            {"async-switchover", SL_MODCMD_ACTIVE, cmd_async_switchover,
             switchover_args, 3, "Schedule a switchover and return at once "
             "(see fetch-cmd-result)"},
            {"async-failover", SL_MODCMD_ACTIVE, cmd_async_failover,
             failover_args, 1, "Schedule a failover and return at once"},
            {"async-rejoin", SL_MODCMD_ACTIVE, cmd_async_rejoin, rejoin_args,
             2, "Schedule a rejoin and return at once"},
            {"failover-safe", SL_MODCMD_ACTIVE, cmd_failover_safe,
             failover_args, 1, "Fail over only if no transaction the "
             "failed primary was seen to write is lost"},
            {"async-failover-safe", SL_MODCMD_ACTIVE,
             cmd_async_failover_safe, failover_args, 1,
             "Schedule a failover-safe and return at once"},
            {"async-reset-replication", SL_MODCMD_ACTIVE,
             cmd_async_reset_replication, reset_args, 2,
             "Schedule a reset-replication and return at once"},
            {"fetch-cmd-result", SL_MODCMD_PASSIVE, cmd_fetch_result,
             failover_args, 1, "The state or result of the latest manual "
             "command"},
            {"cancel-cmd", SL_MODCMD_ACTIVE, cmd_cancel, failover_args, 1,
             "Cancel a scheduled command that has not started"},
        };

        for (size_t k = 0; k < sizeof(more) / sizeof(more[0]) &&
                           (rc == 0 || rc == -EEXIST); k++) {
            rc = sl_modcmd_register("mariadbmon", more[k].name, more[k].kind,
                                    more[k].fn, more[k].args, more[k].nargs,
                                    more[k].desc);
        }
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
    {"auto_failover", SL_PARAM_ENUM, "false", 0, auto_failover_names,
     "Fail over automatically when the primary is down; safe: only when "
     "the replica promoted has every transaction the primary was last "
     "seen to have written"},
    {"auto_rejoin", SL_PARAM_BOOL, "false", 0, NULL,
     "Make returning servers replicate from the primary"},
    {"failcount", SL_PARAM_COUNT, "5", 0, NULL,
     "Monitor intervals the primary must be down before failover"},
    {"verify_master_failure", SL_PARAM_BOOL, "true", 0, NULL,
     "No failover while a replica connected to the primary has received "
     "an event from it within master_failure_timeout"},
    {"master_failure_timeout", SL_PARAM_DURATION, "10s", SL_PARAM_F_SECONDS,
     NULL, "verify_master_failure: how recent a replica's last event from "
     "the primary must be to hold a failover back (at least two of the "
     "replica's heartbeat periods)"},
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
    {"enforce_simple_topology", SL_PARAM_BOOL, "false", 0, NULL,
     "Keep one primary and N replicas: turns on auto_failover and "
     "auto_rejoin, removes other replication sources, fails over a "
     "primary never seen running"},
    {"assume_unique_hostnames", SL_PARAM_BOOL, "true", SL_PARAM_F_REFUSED,
     NULL, "servers are always matched by host name and port"},
    {"handle_events", SL_PARAM_BOOL, "true", 0, NULL,
     "Scheduled events follow the primary: ENABLED events of a demoted "
     "server set to DISABLE ON SLAVE, those enabled on the old primary "
     "enabled on the promoted one"},
    {"enforce_writable_master", SL_PARAM_BOOL, "false", 0, NULL,
     "Set read_only=0 on the primary when it is found read-only"},
    {"disk_space_threshold", SL_PARAM_STRING, NULL, 0, NULL,
     "path:percent,... (* = every other disk) for the servers without "
     "their own disk_space_threshold: a server with a disk (a Path of "
     "information_schema.DISKS) fuller than its percent is Disk Space "
     "Exhausted"},
    {"disk_space_check_interval", SL_PARAM_DURATION, "0s", 0, NULL,
     "How often the disks are checked (at most once a monitor_interval); "
     "0 = never"},
    {"switchover_on_low_disk_space", SL_PARAM_BOOL, "false", 0, NULL,
     "Switch a primary that is low on disk space over to the most "
     "up-to-date replica that is not"},
    {"maintenance_on_low_disk_space", SL_PARAM_BOOL, "true", 0, NULL,
     "Put a running server low on disk space that is neither the primary "
     "nor a relay into maintenance (cleared only by an administrator)"},
    {"cooperative_monitoring_locks", SL_PARAM_ENUM, "none", 0, coop_names,
     "Several Sluice (or MaxScale) instances on one cluster: only the one "
     "holding GET_LOCK('maxscale_mariadbmon') on a majority of all, or of "
     "the running, servers changes the cluster"},
    {"promotion_sql_file", SL_PARAM_PATH, NULL, 0, NULL,
     "SQL statements (one a line, # comments) run on a promoted server "
     "once it is writable; one failing fails the operation"},
    {"demotion_sql_file", SL_PARAM_PATH, NULL, 0, NULL,
     "SQL statements run on a demoted primary once it is read-only, and "
     "on a standalone server before it rejoins"},
    {"script", SL_PARAM_STRING, NULL, 0, NULL,
     "Command run on server events ($INITIATOR, $EVENT, $PARENT, $CHILDREN, "
     "$CREDENTIALS, $LIST, $NODELIST, $MASTERLIST, $SLAVELIST, $SYNCEDLIST "
     "substituted), split into arguments without a shell"},
    {"events", SL_PARAM_ENUM_MASK, "all", 0, mmon_event_names,
     "Events that run the script (all: every event)"},
    {"script_timeout", SL_PARAM_DURATION, "90s", SL_PARAM_F_SECONDS, NULL,
     "Time a script may run; then SIGTERM, one second later SIGKILL"},
    {"master_conditions", SL_PARAM_ENUM_MASK,
     "primary_monitor_master,disk_space_ok", 0, mmon_master_cond_names,
     "What the primary must also have to be Master: a replica connecting, "
     "connected or running; the primary monitor's choice; not low on disk "
     "space; none"},
    {"slave_conditions", SL_PARAM_ENUM_MASK, "none", 0, mmon_slave_cond_names,
     "What a replica must also have to be Slave: linked_master (both "
     "threads running up to a running primary), running_master, "
     "writable_master (the primary is Master), primary_monitor_master, "
     "disk_space_ok (not low on disk space); none"},
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
