/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The REST API's routing table: one row per {method, path pattern,
 * handler, required role}. admin.c looks a request up here twice: on
 * libmicrohttpd's first call (admit: the role the row requires is checked
 * there, the only place the role is checked, before any body is read) and
 * when the request is complete (dispatch: the row's handler runs).
 *
 * Patterns are the path after /v1/, segment by segment: a literal, "a|b"
 * (any of the alternatives), "*" (any one segment) or, last, "**" (any
 * number of segments, none included). A method field may list
 * alternatives too ("POST|PATCH"). GET rows also answer HEAD.
 *
 * Context: the libmicrohttpd thread.
 */
#include <stdbool.h>
#include <string.h>

#include "admin_int.h"

#define KINDS "servers|services|listeners|monitors|filters"

static const struct sl_admin_route routes[] = {
    /* reads */
    {"GET", "maxscale", sl__rest_maxscale_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/threads", sl__rest_threads_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/threads/*", sl__rest_threads_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/modules", sl__rest_modules_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/modules/*", sl__rest_modules_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/modules/*/*", sl__rest_modcmd, SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/logs", sl__rest_logs_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/logs/data|entries", sl__rest_log_data,
     SL_ADMIN_ROLE_BASIC},
    {"GET", "maxscale/query_classifier/classify|cache",
     sl__rest_query_classifier, SL_ADMIN_ROLE_BASIC},
    {"GET", KINDS, sl__rest_objects_get, SL_ADMIN_ROLE_BASIC},
    {"GET", KINDS "/*", sl__rest_objects_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "sessions", sl__rest_sessions_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "sessions/*", sl__rest_sessions_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "users/**", sl__rest_users_get, SL_ADMIN_ROLE_BASIC},
    {"GET", "sluice/queries", sl__rest_queries, SL_ADMIN_ROLE_BASIC},
    /* the SQL resource: admin only, reads too (docs/security.md) */
    {"GET", "sql", sl__rest_sql, SL_ADMIN_ROLE_ADMIN},
    {"GET", "sql/*", sl__rest_sql, SL_ADMIN_ROLE_ADMIN},
    {"POST", "sql", sl__rest_sql, SL_ADMIN_ROLE_ADMIN},
    {"POST", "sql/*/queries|reconnect|cancel", sl__rest_sql, SL_ADMIN_ROLE_ADMIN},
    {"DELETE", "sql/*", sl__rest_sql, SL_ADMIN_ROLE_ADMIN},
    /* writes */
    {"POST", "maxscale/logs/rotate|flush", sl__rest_log_rotate,
     SL_ADMIN_ROLE_ADMIN},
    {"POST", "maxscale/modules/*/*", sl__rest_modcmd, SL_ADMIN_ROLE_ADMIN},
    {"POST|PATCH|DELETE", "users/**", sl__rest_users_write,
     SL_ADMIN_ROLE_ADMIN},
    {"POST", KINDS, sl__rest_create, SL_ADMIN_ROLE_ADMIN},
    {"POST", "services/*/listeners", sl__rest_create_listener,
     SL_ADMIN_ROLE_ADMIN},
    {"PUT", "servers/*/set|clear", sl__rest_server_state,
     SL_ADMIN_ROLE_ADMIN},
    {"PUT", "services|listeners|monitors/*/stop|start", sl__rest_stop_start,
     SL_ADMIN_ROLE_ADMIN},
    {"PATCH", "maxscale", sl__rest_alter, SL_ADMIN_ROLE_ADMIN},
    {"PATCH", KINDS "/*", sl__rest_alter, SL_ADMIN_ROLE_ADMIN},
    {"PATCH", "monitors/*/relationships/servers", sl__rest_relink_monitor,
     SL_ADMIN_ROLE_ADMIN},
    {"PATCH", "services/*/relationships/servers", sl__rest_relink_service,
     SL_ADMIN_ROLE_ADMIN},
    {"DELETE", KINDS "/*", sl__rest_destroy, SL_ADMIN_ROLE_ADMIN},
    {"DELETE", "sluice/queries", sl__rest_queries, SL_ADMIN_ROLE_ADMIN},
    {"DELETE", "services/*/listeners/*", sl__rest_destroy,
     SL_ADMIN_ROLE_ADMIN},
};

/* Does word (length n) equal one of the '|'-separated alternatives? */
static bool
one_of(const char *alts, size_t altlen, const char *word)
{
    size_t n = strlen(word);
    const char *p = alts;
    const char *end = alts + altlen;

    while (p < end) {
        const char *bar = memchr(p, '|', (size_t)(end - p));
        const char *stop = bar ? bar : end;

        if ((size_t)(stop - p) == n && strncmp(p, word, n) == 0) {
            return true;
        }
        p = stop + 1;
    }
    return false;
}

static bool
path_matches(const char *pattern, char *const *seg, int nseg)
{
    const char *p = pattern;
    int i = 0;

    while (*p != '\0') {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);

        if (len == 2 && strncmp(p, "**", 2) == 0) {
            return true;
        }
        if (i == nseg) {
            return false;
        }
        if (!(len == 1 && *p == '*') && !one_of(p, len, seg[i])) {
            return false;
        }
        i++;
        p += len + (slash ? 1 : 0);
    }
    return i == nseg;
}

static bool
method_matches(const char *methods, const char *method)
{
    if (strcmp(method, "HEAD") == 0) {
        method = "GET";
    }
    return one_of(methods, strlen(methods), method);
}

const struct sl_admin_route *
sl__admin_route_find(const char *method, char *const *seg, int nseg,
                     bool *path_known)
{
    *path_known = false;
    for (size_t i = 0; i < SL_ARRAY_LEN(routes); i++) {
        if (!path_matches(routes[i].path, seg, nseg)) {
            continue;
        }
        *path_known = true;
        if (method_matches(routes[i].method, method)) {
            return &routes[i];
        }
    }
    return NULL;
}

enum sl_admin_role
sl__admin_route_role(const char *method, char *const *seg, int nseg)
{
    bool known;
    const struct sl_admin_route *rt = sl__admin_route_find(method, seg,
                                                           nseg, &known);
    bool read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;

    if (rt != NULL) {
        return rt->role;
    }
    /* no such route: a read is answered 404 to anyone, a write needs the
     * admin role before it is told 405 (as before the table) */
    return read ? SL_ADMIN_ROLE_BASIC : SL_ADMIN_ROLE_ADMIN;
}
