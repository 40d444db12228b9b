/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handle_events (MaxScale's, default on): scheduled events follow the
 * primary role. Every tick the monitor remembers which events are
 * ENABLED on the primary; a server being demoted (switchover's old
 * primary, a rejoined server, every server in reset-replication) gets
 * its ENABLED events set to DISABLE ON SLAVE; a server being promoted
 * gets ENABLE for its DISABLED / SLAVESIDE_DISABLED events that were
 * enabled on the previous primary when last seen (same schema and name).
 *
 *   ALTER DEFINER=`u`@`h` EVENT `schema`.`name` {DISABLE ON SLAVE|ENABLE}
 *
 * with the event's own definer (an ALTER without it would make the
 * monitor user the definer), under sql_log_bin=0 (the change is this
 * server's, not the cluster's). The monitor user needs EVENT and, for
 * events of other definers, SET USER (or SUPER).
 *
 * Failures are logged and never stop the operation: a promotion is not
 * undone because an event could not be switched on.
 *
 * Context: with inst->lock held (monitor thread or a command's thread).
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "mariadbmon"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/log.h>

#include "mmon_int.h"

/* Append `s` quoted as a backtick identifier. */
static void
ident(char *buf, size_t len, const char *s)
{
    size_t o = strlen(buf);

    if (o + 1 < len) {
        buf[o++] = '`';
    }
    for (; *s != '\0' && o + 3 < len; s++) {
        if (*s == '`') {
            buf[o++] = '`';
        }
        buf[o++] = *s;
    }
    if (o + 1 < len) {
        buf[o++] = '`';
    }
    buf[o] = '\0';
}

/* "user@host" (host after the last '@') as `user`@`host`. */
static void
definer(char *buf, size_t len, const char *d)
{
    const char *at = strrchr(d, '@');
    char user[256];

    buf[0] = '\0';
    if (at == NULL) {
        ident(buf, len, d);
        return;
    }
    snprintf(user, sizeof(user), "%.*s", (int)(at - d), d);
    ident(buf, len, user);
    strncat(buf, "@", len - strlen(buf) - 1);
    ident(buf, len, at + 1);
}

/* The events of server i whose STATUS is in `statuses` (SQL list):
 * rows of schema, name, definer. NULL on error (logged). */
static MYSQL_RES *
events_of(struct mmon_instance *inst, int i, const char *statuses)
{
    MYSQL *c = inst->servers[i].conn;
    char sql[256];
    MYSQL_RES *res;

    if (c == NULL) {
        return NULL;
    }
    snprintf(sql, sizeof(sql), "SELECT EVENT_SCHEMA, EVENT_NAME, DEFINER "
             "FROM information_schema.EVENTS WHERE STATUS IN (%s)", statuses);
    if (mysql_query(c, sql) != 0 || (res = mysql_store_result(c)) == NULL) {
        sl_log_warn("Monitor '%s': cannot list the events of '%s': %s", MONNAME(inst), SRVNAME(inst, i), mysql_error(c));
        return NULL;
    }
    return res;
}

void
mmon_events_remember(struct mmon_instance *inst, int i)
{
    struct mmon_server *ms = &inst->servers[i];
    MYSQL_RES *res;
    MYSQL_ROW row;
    char *list = NULL;
    size_t len = 0;
    FILE *f;

    if (!inst->handle_events || !inst->views[i].running ||
        (res = events_of(inst, i, "'ENABLED'")) == NULL) {
        return;
    }
    if ((f = open_memstream(&list, &len)) == NULL) {
        mysql_free_result(res);
        return;
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        if (row[0] != NULL && row[1] != NULL) {
            fprintf(f, "%s.%s\n", row[0], row[1]);
        }
    }
    fclose(f);
    mysql_free_result(res);
    free(ms->events_enabled);
    ms->events_enabled = list;
}

/* Was schema.name enabled on `from` when last seen? */
static bool
was_enabled(const struct mmon_server *from, const char *schema,
            const char *name)
{
    char key[600];
    size_t kl;

    if (from == NULL || from->events_enabled == NULL) {
        return false;
    }
    kl = (size_t)snprintf(key, sizeof(key), "%s.%s\n", schema, name);
    for (const char *p = from->events_enabled; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p + 1) : strlen(p);

        if (l == kl && memcmp(p, key, kl) == 0) {
            return true;
        }
        p += l;
    }
    return false;
}

/* ALTER each listed event of server i; `from` filters (promotion). */
static void
alter_events(struct mmon_instance *inst, int i, const char *statuses,
             const char *action, const struct mmon_server *from)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char err[1024];
    int done = 0;

    if (!inst->handle_events ||
        (res = events_of(inst, i, statuses)) == NULL) {
        return;
    }
    if (mysql_num_rows(res) > 0 &&
        mmon_exec(inst, i, "SET SESSION sql_log_bin=0", err,
                  sizeof(err)) < 0) {
        mysql_free_result(res);
        return;
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        char sql[2048] = "ALTER DEFINER=";
        char who[600];

        if (row[0] == NULL || row[1] == NULL || row[2] == NULL ||
            (from != NULL && !was_enabled(from, row[0], row[1]))) {
            continue;
        }
        definer(who, sizeof(who), row[2]);
        strncat(sql, who, sizeof(sql) - strlen(sql) - 1);
        strncat(sql, " EVENT ", sizeof(sql) - strlen(sql) - 1);
        ident(sql, sizeof(sql), row[0]);
        strncat(sql, ".", sizeof(sql) - strlen(sql) - 1);
        ident(sql, sizeof(sql), row[1]);
        strncat(sql, " ", sizeof(sql) - strlen(sql) - 1);
        strncat(sql, action, sizeof(sql) - strlen(sql) - 1);
        if (mmon_exec(inst, i, sql, err, sizeof(err)) == 0) {
            done++;
        } else {
            sl_log_error("Monitor '%s': handle_events: %s", MONNAME(inst), err);
        }
    }
    if (mysql_num_rows(res) > 0) {
        mmon_exec(inst, i, "SET SESSION sql_log_bin=1", err, sizeof(err));
    }
    mysql_free_result(res);
    if (done > 0) {
        sl_log_notice("Monitor '%s': handle_events: %d event(s) of '%s' set to %s", MONNAME(inst), done, SRVNAME(inst, i), action);
    }
}

void
mmon_events_demote(struct mmon_instance *inst, int i)
{
    alter_events(inst, i, "'ENABLED'", "DISABLE ON SLAVE", NULL);
}

void
mmon_events_promote(struct mmon_instance *inst, int i, int old)
{
    if (old < 0) {
        return;   /* no previous primary: nothing is known to enable */
    }
    alter_events(inst, i, "'DISABLED','SLAVESIDE_DISABLED'", "ENABLE",
                 &inst->servers[old]);
}
