/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mariadbmon's cluster operations: failover, switchover and rejoin, as
 * sequences of SQL on the monitor's connections. All assume GTID
 * replication (MASTER_USE_GTID=slave_pos) and a simple topology: one
 * primary, replicas of it.
 *
 *   failover(old):   pick the replica that received the most (GTID)
 *                    -> wait until it applied what it received
 *                    -> STOP SLAVE; RESET SLAVE ALL; read_only=0 on it
 *                    -> redirect the other replicas of old to it
 *   switchover(new, old):
 *                    read_only=1 on old -> read old's gtid_binlog_pos
 *                    -> MASTER_GTID_WAIT on new until it has it
 *                       (timeout: read_only=0 on old again, give up)
 *                    -> promote new -> old replicates from new
 *                    -> redirect the other replicas of old to new
 *   promotion_sql_file runs on the promoted server once it is writable
 *   (after its events are enabled), demotion_sql_file on a demoted
 *   primary once it is read_only (switchover) and on a standalone server
 *   before it rejoins; a failing statement fails the operation.
 *   rejoin(s):       only when s's GTID history is contained in the
 *                    primary's (mmon_can_rejoin); read_only=1 with
 *                    enforce_read_only_slaves; gtid_slave_pos = what s
 *                    has; CHANGE MASTER TO the primary; START SLAVE
 *
 * Every step is logged; every function runs with inst->lock held (monitor
 * thread or a command's thread) and returns 0 or -1 with err[] set.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "mariadbmon"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/log.h>
#include <sluice/params.h>
#include <sluice/worker.h>

#include "mmon_int.h"

/* Copy s into out with ' and \ escaped for a single-quoted SQL literal. */
static void
sql_quote(const char *s, char *out, size_t len)
{
    size_t o = 0;

    for (; *s != '\0' && o + 3 < len; s++) {
        if (*s == '\'' || *s == '\\') {
            out[o++] = '\\';
        }
        out[o++] = *s;
    }
    out[o] = '\0';
}

/* Per domain, the later of two positions (what a server "has"). */
static void
merge_pos(const struct mmon_gtid_pos *a, const struct mmon_gtid_pos *b,
          struct mmon_gtid_pos *out)
{
    *out = *a;
    for (int i = 0; i < b->n; i++) {
        const struct mmon_gtid *g = &b->g[i];
        bool found = false;

        for (int j = 0; j < out->n; j++) {
            if (out->g[j].domain == g->domain) {
                found = true;
                if (g->seq > out->g[j].seq) {
                    out->g[j] = *g;
                }
            }
        }
        if (!found && out->n < MMON_MAX_DOMAINS) {
            out->g[out->n++] = *g;
        }
    }
}

/* One integer from a query; -1 with err[] on failure. */
static int
query_int(struct mmon_instance *inst, int i, const char *sql, long long *out,
          char *err, size_t errlen)
{
    MYSQL *c;
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mmon_exec(inst, i, "DO 1", err, errlen) < 0) {
        return -1;   /* (re)connects if needed */
    }
    c = inst->servers[i].conn;
    if (mysql_query(c, sql) != 0 || (res = mysql_store_result(c)) == NULL) {
        snprintf(err, errlen, "server '%s': '%s' failed: %s",
                 SRVNAME(inst, i), sql, mysql_error(c));
        return -1;
    }
    row = mysql_fetch_row(res);
    *out = (row != NULL && row[0] != NULL) ? strtoll(row[0], NULL, 10) : -1;
    mysql_free_result(res);
    return 0;
}

/* A status published by a switchover before the command's own publish(),
 * logged as publish() logs a change. */
static void
publish_early(struct sl_server *srv, uint32_t now)
{
    uint32_t old = sl_server_status(srv);
    char a[128], b[128];

    sl_server_set_status(srv, now);
    sl_log_notice("Server '%s' changed state: %s -> %s", sl_server_name(srv), sl_server_status_str(old, a, sizeof(a)), sl_server_status_str(now, b, sizeof(b)));
}

/*
 * A switchover's drain: the routers hold new primary work from the moment
 * the old primary is marked SL_SRV_MOVING, but let transactions already
 * open there finish (moving them means replaying them, and a replay that
 * reads rows changed meanwhile must abort). Wait until the old primary
 * runs no transaction but the monitor's, for at most MMON_DRAIN_MS or a
 * quarter of what is left of the switchover's time; what is still open
 * then meets read_only (the routers replay it). Best effort: never fails.
 */
#define MMON_DRAIN_MS 500u

static void
drain(struct mmon_instance *inst, int i, uint64_t deadline)
{
    uint64_t now = sl_monotonic_ms();
    uint64_t left = deadline > now ? (deadline - now) / 4 : 0;
    uint64_t until = now + (left < MMON_DRAIN_MS ? left : MMON_DRAIN_MS);
    const struct timespec pause = {.tv_nsec = 5 * 1000 * 1000};
    char err[256];
    long long n = -1;

    do {
        if (query_int(inst, i, "SELECT COUNT(*) FROM "
                      "information_schema.INNODB_TRX WHERE "
                      "trx_mysql_thread_id <> CONNECTION_ID()", &n, err,
                      sizeof(err)) < 0 || n <= 0) {
            break;
        }
        nanosleep(&pause, NULL);
    } while (sl_monotonic_ms() < until);
    if (n > 0) {
        sl_log_notice("Monitor '%s': %lld transaction(s) still open on '%s' after the drain: they meet read_only", MONNAME(inst), n, SRVNAME(inst, i));
    }
}

/* Wait until server i has applied pos (MASTER_GTID_WAIT in one-second
 * steps, so no call outlives backend_read_timeout). */
static int
wait_applied(struct mmon_instance *inst, int i,
             const struct mmon_gtid_pos *pos, uint64_t deadline, char *err,
             size_t errlen)
{
    char gtid[1024];
    char sql[1200];
    long long r = -1;

    if (pos->n == 0) {
        return 0;
    }
    mmon_gtid_format(pos, gtid, sizeof(gtid));
    snprintf(sql, sizeof(sql), "SELECT MASTER_GTID_WAIT('%s', 1)", gtid);
    do {
        if (query_int(inst, i, sql, &r, err, errlen) < 0) {
            return -1;
        }
    } while (r != 0 && sl_monotonic_ms() < deadline);
    if (r != 0) {
        snprintf(err, errlen, "server '%s' did not reach GTID %s in time",
                 SRVNAME(inst, i), gtid);
        return -1;
    }
    return 0;
}

int
mmon_run_sql_file(struct mmon_instance *inst, int i, const char *param,
                  const char *path, char *err, size_t errlen)
{
    FILE *f;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned lineno = 0;
    int rc = 0;

    if (path == NULL) {
        return 0;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot read '%s': %s", param, path,
                 strerror(errno));
        return -1;
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        char *b = line;
        char e[1024];

        lineno++;
        while (len > 0 && isspace((unsigned char)line[len - 1])) {
            line[--len] = '\0';
        }
        while (isspace((unsigned char)*b)) {
            b++;
        }
        if (*b == '\0' || *b == '#' || i < 0) {
            continue;
        }
        if (mmon_exec(inst, i, b, e, sizeof(e)) < 0) {
            snprintf(err, errlen, "%s '%s' line %u: %s", param, path, lineno,
                     e);
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s: cannot read '%s': %s", param, path,
                 strerror(errno));
        rc = -1;
    }
    free(line);
    fclose(f);
    if (rc == 0 && i >= 0) {
        sl_log_notice("Monitor '%s': ran %s '%s' on '%s'", MONNAME(inst), param, path, SRVNAME(inst, i));
    }
    return rc;
}

static int
promote(struct mmon_instance *inst, int i, char *err, size_t errlen)
{
    if (mmon_exec(inst, i, "STOP SLAVE", err, errlen) < 0 ||
        mmon_exec(inst, i, "RESET SLAVE ALL", err, errlen) < 0 ||
        mmon_exec(inst, i, "SET GLOBAL read_only=0", err, errlen) < 0) {
        return -1;
    }
    sl_log_notice("Monitor '%s': promoted '%s': replication stopped and reset, read_only=0", MONNAME(inst), SRVNAME(inst, i));
    return 0;
}

/*
 * Make server i replicate from target. slave_pos, when given, first sets
 * gtid_slave_pos (for a server that was a primary: where it stands).
 */
static int
redirect(struct mmon_instance *inst, int i, int target,
         const struct mmon_gtid_pos *slave_pos, char *err, size_t errlen)
{
    struct sl_server *t = inst->servers[target].srv;
    const struct sl_params *tp = sl_server_params(t);
    const struct sl_params *ip = sl_server_params(inst->servers[i].srv);
    char user[600], pw[600], host[600], gtid[1024];
    char sql[4000];

    sql_quote(inst->repl_user, user, sizeof(user));
    sql_quote(inst->repl_password, pw, sizeof(pw));
    /* the primary's private_address when it has one (MaxScale's) */
    sql_quote(tp && sl_params_has(tp, "private_address")
                  ? sl_params_get(tp, "private_address")
                  : sl_server_address(t), host, sizeof(host));
    if (inst->enforce_read_only_slaves &&
        mmon_exec(inst, i, "SET GLOBAL read_only=1", err, errlen) < 0) {
        return -1;
    }
    /* STOP SLAVE on a server without replication only warns. */
    if (mmon_exec(inst, i, "STOP SLAVE", err, errlen) < 0) {
        return -1;
    }
    if (slave_pos != NULL) {
        if (mmon_exec(inst, i, "RESET SLAVE ALL", err, errlen) < 0) {
            return -1;
        }
        snprintf(sql, sizeof(sql), "SET GLOBAL gtid_slave_pos='%s'",
                 mmon_gtid_format(slave_pos, gtid, sizeof(gtid)));
        if (mmon_exec(inst, i, sql, err, errlen) < 0) {
            return -1;
        }
    }
    /* the replica's replication_custom_options, checked at load time
     * (config_objects.c) to be MASTER_x = value pairs only */
    snprintf(sql, sizeof(sql), "CHANGE MASTER TO MASTER_HOST='%s', "
             "MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', "
             "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1%s%s", host,
             sl_server_port(t), user, pw,
             ip && sl_params_has(ip, "replication_custom_options") ? ", " : "",
             ip && sl_params_has(ip, "replication_custom_options")
                 ? sl_params_get(ip, "replication_custom_options") : "");
    if (mmon_exec(inst, i, sql, err, errlen) < 0 ||
        mmon_exec(inst, i, "START SLAVE", err, errlen) < 0) {
        return -1;
    }
    sl_log_notice("Monitor '%s': '%s' now replicates from '%s'", MONNAME(inst), SRVNAME(inst, i), SRVNAME(inst, target));
    return 0;
}

/* Point every other replica of old at new_primary; failures are logged
 * and do not stop the operation (the primary has already changed). */
static void
redirect_replicas(struct mmon_instance *inst, int old, int new_primary)
{
    char err[1024];

    for (int j = 0; j < inst->n; j++) {
        const struct mmon_view *v = &inst->views[j];

        if (j == old || j == new_primary || !v->running || v->maint ||
            !v->slave.present || v->slave.master != old) {
            continue;
        }
        if (redirect(inst, j, new_primary, NULL, err, sizeof(err)) < 0) {
            sl_log_error("Monitor '%s': could not redirect '%s' to '%s': %s", MONNAME(inst), SRVNAME(inst, j), SRVNAME(inst, new_primary), err);
        }
    }
}

static int
failover_run(struct mmon_instance *inst, int old, const char *reason,
             char *err, size_t errlen)
{
    uint64_t deadline = sl_monotonic_ms() + inst->failover_timeout_ms;
    char why[256], gtid[1024];
    int cand = mmon_pick_promotion(inst->views, inst->n, old, why,
                                   sizeof(why));
    const struct mmon_view *c;

    if (cand < 0) {
        snprintf(err, errlen, "cannot replace '%s': %s", SRVNAME(inst, old),
                 why);
        return -1;
    }
    c = &inst->views[cand];
    sl_log_warn("Monitor '%s': failover: promoting '%s' (received GTID %s) to replace '%s': %s", MONNAME(inst), SRVNAME(inst, cand), mmon_gtid_format(&c->slave.io_pos, gtid, sizeof(gtid)), SRVNAME(inst, old), reason);
    /* Everything the candidate received must be applied before it takes
     * writes, or those transactions would be lost. */
    if (wait_applied(inst, cand, &c->slave.io_pos, deadline, err,
                     errlen) < 0 ||
        promote(inst, cand, err, errlen) < 0) {
        sl_log_error("Monitor '%s': failover to '%s' failed: %s", MONNAME(inst), SRVNAME(inst, cand), err);
        return -1;
    }
    mmon_events_promote(inst, cand, old);
    if (mmon_run_sql_file(inst, cand, "promotion_sql_file",
                          inst->promotion_sql_file, err, errlen) < 0) {
        sl_log_error("Monitor '%s': failover to '%s' failed: %s", MONNAME(inst), SRVNAME(inst, cand), err);
        return -1;
    }
    redirect_replicas(inst, old, cand);
    inst->primary = cand;
    inst->lost = -1;
    inst->lost_ticks = 0;
    sl_log_notice("Monitor '%s': failover done: '%s' is the primary", MONNAME(inst), SRVNAME(inst, cand));
    return 0;
}

/* Check the arguments of a switchover; fills *new_primary and *old. */
static int
switchover_check(struct mmon_instance *inst, int *new_primary, int *old,
                 char *err, size_t errlen)
{
    char why[256];
    const struct mmon_view *v;

    if (inst->primary < 0) {
        snprintf(err, errlen, "no primary to switch over from");
        return -1;
    }
    if (*old >= 0 && *old != inst->primary) {
        snprintf(err, errlen, "'%s' is not the primary ('%s' is)",
                 SRVNAME(inst, *old), SRVNAME(inst, inst->primary));
        return -1;
    }
    *old = inst->primary;
    if (*new_primary < 0) {
        *new_primary = mmon_pick_promotion(inst->views, inst->n, *old, why,
                                           sizeof(why));
        if (*new_primary < 0) {
            snprintf(err, errlen, "no replica to promote: %s", why);
            return -1;
        }
    }
    v = &inst->views[*new_primary];
    if (*new_primary == *old || !v->running || v->maint ||
        v->no_promotion || !v->slave.present || v->slave.master != *old) {
        snprintf(err, errlen, "'%s' cannot be promoted: it must be a running "
                 "replica of '%s', not in maintenance or "
                 "servers_no_promotion", SRVNAME(inst, *new_primary),
                 SRVNAME(inst, *old));
        return -1;
    }
    return 0;
}

/* An aborted switchover gives the old primary its writes back; if even
 * that fails, the operator must know: it stays read-only. */
static void
writable_again(struct mmon_instance *inst, int old)
{
    char err[256];

    if (mmon_exec(inst, old, "SET GLOBAL read_only=0", err,
                  sizeof(err)) < 0) {
        sl_log_warn("Monitor '%s': '%s' stays read_only after the aborted switchover: %s", MONNAME(inst), SRVNAME(inst, old), err);
    }
}

static int
switchover_run(struct mmon_instance *inst, int new_primary, int old,
               char *err, size_t errlen)
{
    uint64_t deadline = sl_monotonic_ms() + inst->switchover_timeout_ms;
    struct mmon_gtid_pos pos;
    char gtid[1024];
    struct sl_server *moving;

    if (switchover_check(inst, &new_primary, &old, err, errlen) < 0) {
        return -1;
    }
    sl_log_notice("Monitor '%s': switchover from '%s' to '%s' started", MONNAME(inst), SRVNAME(inst, old), SRVNAME(inst, new_primary));
    /* Routers hold what needs the primary from here until a Master
     * without the bit appears (published before read_only: a write
     * routed after it is held, one routed before that meets read_only
     * gets 1290, which the router retries; docs/modules.md). The bit goes
     * with the next publish(), which ends every command. */
    moving = inst->servers[old].srv;
    publish_early(moving, sl_server_status(moving) | SL_SRV_MOVING);
    drain(inst, old, deadline);
    if (mmon_exec(inst, old, "SET GLOBAL read_only=1", err, errlen) < 0) {
        return -1;
    }
    mmon_events_remember(inst, old);
    mmon_events_demote(inst, old);
    if (mmon_run_sql_file(inst, old, "demotion_sql_file",
                          inst->demotion_sql_file, err, errlen) < 0) {
        sl_log_warn("Monitor '%s': switchover aborted, '%s' stays the primary: %s", MONNAME(inst), SRVNAME(inst, old), err);
        writable_again(inst, old);
        return -1;
    }
    /* No new writes on old from here: its binlog position is final. */
    mmon_probe_all(inst);
    pos = inst->views[old].binlog_pos;
    if (!inst->views[old].running ||
        wait_applied(inst, new_primary, &pos, deadline, err, errlen) < 0) {
        sl_log_warn("Monitor '%s': switchover aborted, '%s' stays the primary: %s", MONNAME(inst), SRVNAME(inst, old), err);
        writable_again(inst, old);
        return -1;
    }
    if (promote(inst, new_primary, err, errlen) < 0) {
        return -1;
    }
    mmon_events_promote(inst, new_primary, old);
    if (mmon_run_sql_file(inst, new_primary, "promotion_sql_file",
                          inst->promotion_sql_file, err, errlen) < 0) {
        /* MaxScale: every statement must succeed. The new primary is
         * writable already; the old one stays read_only, not redirected:
         * the operator decides (the error says which statement). */
        sl_log_error("Monitor '%s': switchover to '%s' failed after its promotion: %s", MONNAME(inst), SRVNAME(inst, new_primary), err);
        return -1;
    }
    /* The new primary takes writes now, before the old one is
     * redirected: the held statements go on at once. */
    publish_early(inst->servers[new_primary].srv,
                  (sl_server_status(inst->servers[new_primary].srv) &
                   (SL_SRV_MAINT | SL_SRV_DRAINING)) |
                  SL_SRV_RUNNING | SL_SRV_MASTER);
    merge_pos(&inst->views[old].binlog_pos, &inst->views[old].slave_pos,
              &pos);
    if (redirect(inst, old, new_primary, &pos, err, errlen) < 0) {
        sl_log_error("Monitor '%s': old primary '%s' could not be demoted: %s", MONNAME(inst), SRVNAME(inst, old), err);
    }
    redirect_replicas(inst, old, new_primary);
    inst->primary = new_primary;
    sl_log_notice("Monitor '%s': switchover done: '%s' is the primary (at GTID %s), '%s' replicates from it", MONNAME(inst), SRVNAME(inst, new_primary), mmon_gtid_format(&inst->views[old].binlog_pos, gtid, sizeof(gtid)), SRVNAME(inst, old));
    return 0;
}

bool
mmon_rejoin_allowed(struct mmon_instance *inst, int i, char *why,
                    size_t whylen)
{
    const struct mmon_view *s = &inst->views[i];
    const struct mmon_view *p;
    struct mmon_gtid_pos has;

    if (inst->primary < 0 || i == inst->primary) {
        snprintf(why, whylen, inst->primary < 0 ? "there is no primary"
                                                : "'%s' is the primary",
                 SRVNAME(inst, i));
        return false;
    }
    if (!s->running) {
        snprintf(why, whylen, "'%s' is not running", SRVNAME(inst, i));
        return false;
    }
    p = &inst->views[inst->primary];
    merge_pos(&s->binlog_pos, &s->slave_pos, &has);
    return mmon_can_rejoin(&has, &p->binlog_pos, &p->slave_pos, p->server_id,
                           why, whylen);
}

static int
rejoin_run(struct mmon_instance *inst, int i, char *err, size_t errlen)
{
    const struct mmon_view *s = &inst->views[i];
    struct mmon_gtid_pos has;
    char gtid[1024];

    merge_pos(&s->binlog_pos, &s->slave_pos, &has);
    sl_log_notice("Monitor '%s': rejoining '%s' (GTID %s) as a replica of '%s'", MONNAME(inst), SRVNAME(inst, i), mmon_gtid_format(&has, gtid, sizeof(gtid)), SRVNAME(inst, inst->primary));
    mmon_events_demote(inst, i);
    /* MaxScale: a standalone server (no replication connection at all,
     * typically a former primary) runs demotion_sql_file first; a replica
     * of the wrong source does not. */
    if (!s->slave.present &&
        mmon_run_sql_file(inst, i, "demotion_sql_file",
                          inst->demotion_sql_file, err, errlen) < 0) {
        return -1;
    }
    return redirect(inst, i, inst->primary, &has, err, errlen);
}

/*
 * reset-replication (MaxScale's): on every server, STOP SLAVE, RESET SLAVE
 * ALL, read_only=1, RESET MASTER (binary logs deleted) and gtid_slave_pos
 * set to sequence 0 in the new primary's domain; then the new primary
 * (new_primary, or the current primary) is made writable and every other
 * server replicates from it. Destructive: the GTID history is gone. Every
 * monitored server not in maintenance must be running.
 */
int
mmon_reset_replication(struct mmon_instance *inst, int new_primary,
                       char *err, size_t errlen)
{
    char sql[256];
    long long domain = 0;
    int had_primary;

    if (new_primary < 0) {
        new_primary = inst->primary;
    }
    if (new_primary < 0) {
        snprintf(err, errlen, "no primary: name the server to promote");
        return -1;
    }
    if (!inst->views[new_primary].running || inst->views[new_primary].maint) {
        snprintf(err, errlen, "'%s' cannot be the primary: it is not "
                 "running or is in maintenance", SRVNAME(inst, new_primary));
        return -1;
    }
    for (int i = 0; i < inst->n; i++) {
        if (!inst->views[i].maint && !inst->views[i].running) {
            snprintf(err, errlen, "server '%s' is down: reset-replication "
                     "needs every server not in maintenance running",
                     SRVNAME(inst, i));
            return -1;
        }
    }
    if (query_int(inst, new_primary, "SELECT @@gtid_domain_id", &domain, err,
                  errlen) < 0) {
        return -1;
    }
    had_primary = inst->primary;
    if (had_primary >= 0) {
        mmon_events_remember(inst, had_primary);
    }
    sl_log_warn("Monitor '%s': reset-replication: deleting the binary logs and GTID positions of every server; '%s' becomes the primary", MONNAME(inst), SRVNAME(inst, new_primary));
    snprintf(sql, sizeof(sql), "SET GLOBAL gtid_slave_pos='%lld-%lld-0'",
             domain, (long long)inst->views[new_primary].server_id);
    for (int i = 0; i < inst->n; i++) {
        if (inst->views[i].maint) {
            continue;
        }
        if (mmon_exec(inst, i, "STOP SLAVE", err, errlen) < 0 ||
            mmon_exec(inst, i, "RESET SLAVE ALL", err, errlen) < 0 ||
            mmon_exec(inst, i, "SET GLOBAL read_only=1", err, errlen) < 0) {
            goto out_failed;
        }
        mmon_events_demote(inst, i);
        if (mmon_exec(inst, i, "RESET MASTER", err, errlen) < 0 ||
            mmon_exec(inst, i, sql, err, errlen) < 0) {
            goto out_failed;
        }
    }
    if (mmon_exec(inst, new_primary, "SET GLOBAL read_only=0", err,
                  errlen) < 0) {
        return -1;
    }
    /* MaxScale: events come back only if the cluster had a primary. */
    mmon_events_promote(inst, new_primary, had_primary);
    for (int i = 0; i < inst->n; i++) {
        if (i == new_primary || inst->views[i].maint) {
            continue;
        }
        if (redirect(inst, i, new_primary, NULL, err, errlen) < 0) {
            sl_log_error("Monitor '%s': reset-replication: '%s' could not be made a replica of '%s': %s", MONNAME(inst), SRVNAME(inst, i), SRVNAME(inst, new_primary), err);
            return -1;
        }
    }
    inst->primary = new_primary;
    inst->lost = -1;
    inst->lost_ticks = 0;
    sl_log_notice("Monitor '%s': reset-replication done: '%s' is the primary, GTID positions start again at %s", MONNAME(inst), SRVNAME(inst, new_primary), sql + strlen("SET GLOBAL gtid_slave_pos="));
    return 0;

out_failed:
    sl_log_error("Monitor '%s': reset-replication failed: %s", MONNAME(inst), err);
    return -1;
}

/* The operations as the monitor and its commands call them: counted,
 * ok or not, for /metrics (sluice_monitor_operations_total). */
int
mmon_failover(struct mmon_instance *inst, int old, const char *reason,
              char *err, size_t errlen)
{
    int rc = failover_run(inst, old, reason, err, errlen);

    sl_monitor_count_op(inst->mon, SL_MONITOR_OP_FAILOVER, rc >= 0);
    return rc;
}

int
mmon_switchover(struct mmon_instance *inst, int new_primary, int old,
                char *err, size_t errlen)
{
    int rc = switchover_run(inst, new_primary, old, err, errlen);

    sl_monitor_count_op(inst->mon, SL_MONITOR_OP_SWITCHOVER, rc >= 0);
    return rc;
}

int
mmon_rejoin(struct mmon_instance *inst, int i, char *err, size_t errlen)
{
    int rc = rejoin_run(inst, i, err, errlen);

    sl_monitor_count_op(inst->mon, SL_MONITOR_OP_REJOIN, rc >= 0);
    return rc;
}
