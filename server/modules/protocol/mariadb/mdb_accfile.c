/* SPDX-License-Identifier: Apache-2.0 */
/*
 * user_accounts_file parsing (format in mdb_accfile.h). Every entry is
 * checked before the first callback, so a bad file adds no account.
 *
 * Context: pure functions, any thread.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "mdb_accfile.h"

enum ftype { F_STR, F_BOOL };

struct field {
    const char *name;
    enum ftype type;
};

static const struct field user_fields[] = {
    {"user", F_STR}, {"host", F_STR}, {"password", F_STR},
    {"plugin", F_STR}, {"authentication_string", F_STR},
    {"default_role", F_STR}, {"super_priv", F_BOOL},
    {"global_db_priv", F_BOOL}, {"proxy_priv", F_BOOL},
    {"is_role", F_BOOL}, {NULL, F_STR},
};
static const struct field db_fields[] = {
    {"user", F_STR}, {"host", F_STR}, {"db", F_STR}, {NULL, F_STR},
};
static const struct field role_fields[] = {
    {"user", F_STR}, {"host", F_STR}, {"role", F_STR}, {NULL, F_STR},
};

static const struct {
    const char *name;
    const struct field *fields;
    const char *required;      /* beyond user and host, or NULL */
} arrays[] = {
    {"user", user_fields, NULL},
    {"db", db_fields, "db"},
    {"roles_mapping", role_fields, "role"},
};

static const char *
str_or_empty(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));

    return v != NULL ? v : "";
}

/* "" or '*' and 40 hex digits (mysql.user's Password column). */
static bool
native_hash_ok(const char *s)
{
    if (s[0] == '\0') {
        return true;
    }
    if (s[0] != '*' || strlen(s) != 41) {
        return false;
    }
    for (size_t i = 1; i < 41; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
              (s[i] >= 'A' && s[i] <= 'F'))) {
            return false;
        }
    }
    return true;
}

/* One entry of array `arr` at index i. 0 or -1 with err. */
static int
check_entry(const json_t *o, size_t a, size_t i, char *err, size_t errlen)
{
    const char *arr = arrays[a].name;
    const char *key;
    const json_t *v;

    if (!json_is_object(o)) {
        snprintf(err, errlen, "%s[%zu] is not a JSON object", arr, i);
        return -1;
    }
    json_object_foreach((json_t *)o, key, v) {
        const struct field *f = arrays[a].fields;

        while (f->name != NULL && strcmp(f->name, key) != 0) {
            f++;
        }
        if (f->name == NULL) {
            snprintf(err, errlen, "%s[%zu]: unknown field \"%.64s\"", arr, i,
                     key);
            return -1;
        }
        if (f->type == F_STR ? !json_is_string(v) : !json_is_boolean(v)) {
            snprintf(err, errlen, "%s[%zu]: \"%s\" must be a %s", arr, i,
                     key, f->type == F_STR ? "string" : "boolean");
            return -1;
        }
    }
    if (json_object_get(o, "user") == NULL ||
        json_object_get(o, "host") == NULL) {
        snprintf(err, errlen, "%s[%zu]: \"%s\" is missing (every entry "
                 "needs the strings \"user\" and \"host\")", arr, i,
                 json_object_get(o, "user") == NULL ? "user" : "host");
        return -1;
    }
    if (arrays[a].required != NULL &&
        json_object_get(o, arrays[a].required) == NULL) {
        snprintf(err, errlen, "%s[%zu]: \"%s\" is missing", arr, i,
                 arrays[a].required);
        return -1;
    }
    if (a == 0) {
        const char *plugin = str_or_empty(o, "plugin");
        bool native = plugin[0] == '\0' ||
                      strcmp(plugin, "mysql_native_password") == 0;

        if (!native_hash_ok(str_or_empty(o, "password")) ||
            (native &&
             !native_hash_ok(str_or_empty(o, "authentication_string")))) {
            snprintf(err, errlen, "%s[%zu]: the password must be a "
                     "mysql_native_password hash as in mysql.user ('*' and "
                     "40 hex digits, e.g. SELECT PASSWORD('secret'))", arr,
                     i);
            return -1;
        }
    }
    return 0;
}

static int
parse_doc(json_t *doc, mdb_accfile_fn fn, void *ctx, char *err,
          size_t errlen)
{
    const json_t *users = json_object_get(doc, "user");
    const char *key;
    json_t *v;

    if (!json_is_object(doc)) {
        snprintf(err, errlen, "the file is not a JSON object");
        return -1;
    }
    json_object_foreach(doc, key, v) {
        size_t a = 0;

        while (a < sizeof(arrays) / sizeof(arrays[0]) &&
               strcmp(arrays[a].name, key) != 0) {
            a++;
        }
        if (a == sizeof(arrays) / sizeof(arrays[0])) {
            snprintf(err, errlen, "unknown member \"%.64s\" (expected "
                     "\"user\", \"db\" and \"roles_mapping\")", key);
            return -1;
        }
        if (!json_is_array(v)) {
            snprintf(err, errlen, "\"%s\" must be an array", key);
            return -1;
        }
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (check_entry(json_array_get(v, i), a, i, err, errlen) != 0) {
                return -1;
            }
        }
    }
    for (size_t i = 0; fn != NULL && i < json_array_size(users); i++) {
        const json_t *o = json_array_get(users, i);
        struct mdb_accfile_user u = {
            .user = str_or_empty(o, "user"),
            .host = str_or_empty(o, "host"),
            .password = str_or_empty(o, "password"),
            .plugin = str_or_empty(o, "plugin"),
            .auth_string = str_or_empty(o, "authentication_string"),
            .is_role = json_is_true(json_object_get(o, "is_role")),
        };

        if (fn(ctx, &u) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

int
mdb_accfile_parse(const char *text, size_t len, mdb_accfile_fn fn, void *ctx,
                  char *err, size_t errlen)
{
    json_error_t e;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    int rc;

    if (doc == NULL) {
        snprintf(err, errlen, "invalid JSON at line %d column %d: %s",
                 e.line, e.column, e.text);
        return -1;
    }
    rc = parse_doc(doc, fn, ctx, err, errlen);
    json_decref(doc);
    return rc;
}

int
mdb_accfile_read(const char *path, mdb_accfile_fn fn, void *ctx, char *err,
                 size_t errlen)
{
    json_error_t e;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    int rc;

    if (doc == NULL) {
        if (e.line <= 0) {
            snprintf(err, errlen, "cannot be read: %s", e.text);
        } else {
            snprintf(err, errlen, "invalid JSON at line %d column %d: %s",
                     e.line, e.column, e.text);
        }
        return -1;
    }
    rc = parse_doc(doc, fn, ctx, err, errlen);
    json_decref(doc);
    return rc;
}
