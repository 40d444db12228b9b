/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener's user_mapping_file (MaxScale's format, see mdb_parse.h):
 * which backend account, with which password, Sluice logs in to the
 * servers as for a client user. Pure parsing; mdb_users.c reads the file.
 *
 * Context: pure functions, any thread; a parsed map is read-only.
 */
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mdb_parse.h"

static int
fail(struct mdb_usermap *m, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    mdb_usermap_free(m);
    return -1;
}

/* A string member of o, or NULL. */
static const char *
str_of(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int
parse_map(const json_t *arr, struct mdb_usermap *m)
{
    size_t n = json_array_size(arr);

    m->map = calloc(n > 0 ? n : 1, sizeof(*m->map));
    if (m->map == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(arr, i);
        const char *u = str_of(o, "original_user");
        const char *to = str_of(o, "mapped_user");

        if (u == NULL || to == NULL || u[0] == '\0' || to[0] == '\0' ||
            strlen(u) >= MDB_USER_MAX || strlen(to) >= MDB_USER_MAX) {
            return -1;
        }
        m->map[i].user = strdup(u);
        m->map[i].mapped = strdup(to);
        m->n_map = i + 1;
        if (m->map[i].user == NULL || m->map[i].mapped == NULL) {
            return -1;
        }
    }
    return 0;
}

static int
parse_creds(const json_t *arr, struct mdb_usermap *m)
{
    size_t n = json_array_size(arr);

    m->creds = calloc(n > 0 ? n : 1, sizeof(*m->creds));
    if (m->creds == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(arr, i);
        const char *u = str_of(o, "mapped_user");
        const char *pw = str_of(o, "password");
        const char *plugin = str_of(o, "plugin");

        if (u == NULL || u[0] == '\0' || strlen(u) >= MDB_USER_MAX ||
            (json_object_get(o, "password") != NULL && pw == NULL)) {
            return -1;
        }
        if (plugin != NULL && plugin[0] != '\0' &&
            strcmp(plugin, MDB_NATIVE_PLUGIN) != 0 &&
            strcmp(plugin, "ed25519") != 0) {
            return -2;
        }
        m->creds[i].user = strdup(u);
        m->creds[i].password = strdup(pw != NULL ? pw : "");
        m->creds[i].ed25519 = plugin != NULL &&
                              strcmp(plugin, "ed25519") == 0;
        m->n_creds = i + 1;
        if (m->creds[i].user == NULL || m->creds[i].password == NULL) {
            return -1;
        }
    }
    return 0;
}

int
mdb_usermap_parse(const char *text, size_t len, struct mdb_usermap *m,
                  char *err, size_t errlen)
{
    json_error_t e;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    const json_t *map, *creds, *groups;
    int rc;

    memset(m, 0, sizeof(*m));
    if (!json_is_object(j)) {
        if (j == NULL) {
            snprintf(err, errlen, "not JSON: %s (line %d)", e.text, e.line);
        } else {
            snprintf(err, errlen, "not a JSON object");
        }
        json_decref(j);
        return -1;
    }
    map = json_object_get(j, "user_map");
    creds = json_object_get(j, "server_credentials");
    groups = json_object_get(j, "group_map");
    if ((map != NULL && !json_is_array(map)) ||
        (creds != NULL && !json_is_array(creds))) {
        json_decref(j);
        return fail(m, err, errlen, "\"user_map\" and "
                    "\"server_credentials\" must be arrays");
    }
    if (groups != NULL && !(json_is_array(groups) &&
                            json_array_size(groups) == 0)) {
        json_decref(j);
        return fail(m, err, errlen, "\"group_map\" (Linux groups) is not "
                    "supported by Sluice: map users one by one in "
                    "\"user_map\"");
    }
    if (parse_map(map, m) != 0) {
        json_decref(j);
        return fail(m, err, errlen, "every \"user_map\" entry needs "
                    "non-empty \"original_user\" and \"mapped_user\" "
                    "strings");
    }
    rc = parse_creds(creds, m);
    json_decref(j);
    if (rc == -2) {
        return fail(m, err, errlen, "\"plugin\" of a \"server_credentials\" "
                    "entry must be \"mysql_native_password\" or "
                    "\"ed25519\"");
    }
    if (rc != 0) {
        return fail(m, err, errlen, "every \"server_credentials\" entry "
                    "needs a non-empty \"mapped_user\" and a string "
                    "\"password\"");
    }
    return 0;
}

void
mdb_usermap_free(struct mdb_usermap *m)
{
    for (size_t i = 0; i < m->n_map; i++) {
        free(m->map[i].user);
        free(m->map[i].mapped);
    }
    for (size_t i = 0; i < m->n_creds; i++) {
        if (m->creds[i].password != NULL) {
            OPENSSL_cleanse(m->creds[i].password,
                            strlen(m->creds[i].password));
        }
        free(m->creds[i].password);
        free(m->creds[i].user);
    }
    free(m->map);
    free(m->creds);
    memset(m, 0, sizeof(*m));
}

const char *
mdb_usermap_find(const struct mdb_usermap *m, const char *user,
                 const struct mdb_usermap_cred **cred)
{
    const char *mapped = NULL;

    *cred = NULL;
    for (size_t i = 0; i < m->n_map && mapped == NULL; i++) {
        if (strcmp(m->map[i].user, user) == 0) {
            mapped = m->map[i].mapped;
        }
    }
    for (size_t i = 0; mapped != NULL && i < m->n_creds; i++) {
        if (strcmp(m->creds[i].user, mapped) == 0) {
            *cred = &m->creds[i];
            break;
        }
    }
    return mapped;
}
