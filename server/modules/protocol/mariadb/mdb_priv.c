/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One mysql.global_priv row (MariaDB 10.4+) into the account table (see
 * mdb_parse.h): the plugin and its authentication_string, the `auth_or`
 * list of an account with several plugins, and what the server enforces
 * beyond the password (REQUIRE, ACCOUNT LOCK, expiry, connection limits).
 *
 * An account created with
 *
 *   IDENTIFIED VIA ed25519 USING PASSWORD('a')
 *               OR mysql_native_password USING PASSWORD('b')
 *
 * is stored by MariaDB 10.11 as
 *
 *   {"plugin":"mysql_native_password","authentication_string":"*HEX",
 *    "auth_or":[{"plugin":"ed25519","authentication_string":"..."},{}], ...}
 *
 * auth_or lists the alternatives in the order the server tries them; the
 * empty object stands for the plugin and authentication_string at the top
 * level (the server keeps the native one there, for the mysql.user view).
 * The server tries the alternatives in order, switching the client to the
 * next plugin when one fails; Sluice can check a client only with
 * mysql_native_password, so it uses the account's first native
 * alternative, whatever its place in the list, and remembers the whole
 * list for its messages.
 *
 * Pure (jansson only): the unit tests feed it rows recorded from MariaDB.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdb_parse.h"

/* *out = a copy of string j[key], NULL when absent or "". -1 out of
 * memory. */
static int
dup_field(const json_t *j, const char *key, char **out)
{
    const char *s = json_string_value(json_object_get(j, key));

    *out = s != NULL && s[0] != '\0' ? strdup(s) : NULL;
    return s != NULL && s[0] != '\0' && *out == NULL ? -1 : 0;
}

/* Numbers are decoded as reals: "access" of an account with every
 * privilege does not fit jansson's int64. */
static int64_t
int_or(const json_t *j, const char *key, int64_t dflt)
{
    const json_t *v = json_object_get(j, key);
    double d = json_number_value(v);

    if (!json_is_number(v) || d < (double)INT64_MIN || d > 9.0e18) {
        return dflt;
    }
    return (int64_t)d;
}

static uint32_t
limit_of(const json_t *j, const char *key)
{
    int64_t v = int_or(j, key, 0);

    return v > 0 && v <= UINT32_MAX ? (uint32_t)v : 0;
}

/* The requirements in a's mysql.global_priv JSON j. -1 out of memory. An
 * ssl_type this code does not know is checked like SPECIFIED (TLS at
 * least). */
static int
apply_priv(struct mdb_account *a, const json_t *j)
{
    a->ssl_type = (uint8_t)int_or(j, "ssl_type", MDB_SSL_NONE);
    a->locked = json_is_true(json_object_get(j, "account_locked"));
    a->pw_changed = int_or(j, "password_last_changed", -1);
    a->pw_lifetime = (int32_t)int_or(j, "password_lifetime", -1);
    a->max_user_connections = limit_of(j, "max_user_connections");
    a->max_connections_hour = limit_of(j, "max_connections");
    if (dup_field(j, "ssl_cipher", &a->ssl_cipher) != 0 ||
        dup_field(j, "x509_issuer", &a->x509_issuer) != 0 ||
        dup_field(j, "x509_subject", &a->x509_subject) != 0) {
        return -1;
    }
    return 0;
}

/* A plugin name Sluice can check with mysql_native_password. No plugin
 * means native, as mysql.user shows it. */
static bool
is_native(const char *plugin)
{
    return plugin == NULL || plugin[0] == '\0' ||
           strcmp(plugin, MDB_NATIVE_PLUGIN) == 0;
}

static bool
is_ed25519(const char *plugin)
{
    return plugin != NULL && strcmp(plugin, "ed25519") == 0;
}

/* Append name to the comma list in buf (cut at its size). */
static void
append_name(char *buf, size_t size, const char *name)
{
    size_t n = strlen(buf);

    snprintf(buf + n, size - n, "%s%s", n > 0 ? "," : "",
             name != NULL && name[0] != '\0' ? name : MDB_NATIVE_PLUGIN);
}

/* The plugin and authentication string of o (the row, or one member of
 * its auth_or list). An alternative this code cannot read gets plugin "?"
 * and no password that could ever match. */
static void
alt_of(const json_t *o, const char **plugin, const char **auth)
{
    const json_t *p = json_object_get(o, "plugin");
    const json_t *s = json_object_get(o, "authentication_string");

    if (!json_is_object(o) || (p != NULL && !json_is_string(p)) ||
        (s != NULL && !json_is_string(s))) {
        *plugin = "?";
        *auth = "!";
        return;
    }
    *plugin = json_string_value(p);
    *auth = json_string_value(s);
}

int
mdb_users_add_priv(struct mdb_users *u, const char *user, const char *host,
                   const char *priv)
{
    json_error_t e;
    json_t *j = priv != NULL ? json_loads(priv, JSON_DECODE_INT_AS_REAL, &e)
                             : NULL;
    const json_t *alts = json_object_get(j, "auth_or");
    const char *top_plugin, *top_auth, *plugin, *auth;
    char names[MDB_PLUGINS_MAX] = "";
    uint8_t stored[MDB_SHA1_LEN];
    uint8_t pk[MDB_ED25519_KEY_LEN];
    bool found = false, usable, ed = false, pam = false;
    const char *pam_auth = NULL;
    struct mdb_account *a;
    int rc = 0;

    if (json_is_true(json_object_get(j, "is_role"))) {
        json_decref(j);
        return 0;
    }
    alt_of(j, &top_plugin, &top_auth);   /* not an object: unusable */
    plugin = top_plugin;
    auth = top_auth;
    if (json_is_array(alts) && json_array_size(alts) > 0) {
        for (size_t i = 0; i < json_array_size(alts); i++) {
            const json_t *alt = json_array_get(alts, i);
            const char *p, *s;

            if (json_is_object(alt) && json_object_size(alt) == 0) {
                p = top_plugin;   /* {}: the top-level alternative */
                s = top_auth;
            } else {
                alt_of(alt, &p, &s);
            }
            append_name(names, sizeof(names), p);
            if (!ed && is_ed25519(p) && mdb_ed25519_parse_key(s, pk) == 0) {
                ed = true;   /* the first one, as the server tries it */
            }
            if (!pam && p != NULL && strcmp(p, "pam") == 0) {
                pam = true;   /* its service name, as the server reads it */
                pam_auth = s;
            }
            usable = is_native(p) && mdb_parse_stored(s, stored) >= 0;
            if (!found && (i == 0 || usable)) {
                plugin = p;   /* the first native one, else the first */
                auth = s;
                found = usable;
            }
        }
    } else if (json_is_object(j)) {
        append_name(names, sizeof(names), top_plugin);
        ed = is_ed25519(top_plugin) &&
             mdb_ed25519_parse_key(top_auth, pk) == 0;
    }
    if (mdb_users_add(u, user, host, auth, plugin) != 0) {
        json_decref(j);
        return -1;
    }
    a = &u->v[u->n - 1];
    if (ed) {
        a->ed25519 = true;
        memcpy(a->ed_pk, pk, sizeof(pk));
    }
    if (pam && !a->pam && mdb_account_set_pam(a, pam_auth) != 0) {
        rc = -1;
    } else if (names[0] != '\0' && (a->plugins = strdup(names)) == NULL) {
        rc = -1;
    } else if (json_is_object(j)) {
        rc = apply_priv(a, j);
    }
    json_decref(j);
    return rc;
}
