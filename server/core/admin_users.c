/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Admin accounts of the REST API: DATADIR/passwd, a JSON array of
 * {"name", "account": "admin"|"basic", "password": SHA-512 crypt hash}.
 * Passwords are never stored in plain text.
 *
 * Without the file there is one account, admin/mariadb (as in MaxScale).
 * While that default password is in use the account works from loopback
 * addresses only and the log and /v1/maxscale say so. Changing it (or
 * creating any account) writes the file.
 *
 * crypt() is slow on purpose (~5 ms); a small cache of recently verified
 * user:password digests keeps rapid API calls cheap. It is cleared on every
 * account change.
 *
 * Context: the libmicrohttpd thread (and main for load/free).
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sluice/log.h>

#include "admin_int.h"

#define DEFAULT_USER "admin"
#define DEFAULT_PASSWORD "mariadb"
#define CACHE_SLOTS 8

static json_t *users;          /* the array as stored */
static char path[4200];
static unsigned char cache[CACHE_SLOTS][32];
static int cache_role[CACHE_SLOTS];
static unsigned cache_next;

static void
digest(const char *user, const char *pw, unsigned char out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned len = 32;

    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    EVP_DigestUpdate(ctx, user, strlen(user) + 1);
    EVP_DigestUpdate(ctx, pw, strlen(pw));
    EVP_DigestFinal_ex(ctx, out, &len);
    EVP_MD_CTX_free(ctx);
}

/* A new SHA-512 crypt hash of pw, or NULL. */
static char *
hash_password(const char *pw)
{
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    struct crypt_data cd;

    if (crypt_gensalt_rn("$6$", 0, NULL, 0, salt, sizeof(salt)) == NULL) {
        return NULL;
    }
    memset(&cd, 0, sizeof(cd));
    if (crypt_r(pw, salt, &cd) == NULL || cd.output[0] == '*') {
        return NULL;
    }
    return strdup(cd.output);
}

static bool
verify(const char *pw, const char *hash)
{
    struct crypt_data cd;
    const char *out;

    memset(&cd, 0, sizeof(cd));
    out = crypt_r(pw, hash, &cd);
    return out != NULL && out[0] != '*' && strcmp(out, hash) == 0;
}

static json_t *
find_user(const char *name, size_t *index)
{
    size_t i;
    json_t *u;

    json_array_foreach(users, i, u) {
        const char *n = json_string_value(json_object_get(u, "name"));

        if (n && strcmp(n, name) == 0) {
            if (index) {
                *index = i;
            }
            return u;
        }
    }
    return NULL;
}

/* Write the accounts to a new file (0600: the hashes are secrets) and
 * rename it over the old one. 0 or -EIO (logged). */
static int
save(void)
{
    char tmp[4300];
    int fd;
    int rc;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    rc = fd < 0 || fchmod(fd, 0600) != 0 ||
         json_dumpfd(users, fd, JSON_INDENT(2)) != 0;
    if (fd >= 0 && close(fd) != 0) {
        rc = 1;
    }
    if (rc != 0 || rename(tmp, path) != 0) {
        sl_log_error("cannot write admin accounts to '%s': %s", path,
                     strerror(errno));
        unlink(tmp);
        return -EIO;
    }
    memset(cache, 0, sizeof(cache));
    return 0;
}

static int
add_user(const char *name, const char *pw, const char *account)
{
    char *h = hash_password(pw);
    json_t *u;

    if (h == NULL) {
        return -ENOMEM;
    }
    u = json_pack("{s:s, s:s, s:s}", "name", name, "account", account,
                  "password", h);
    free(h);
    return u ? json_array_append_new(users, u) : -ENOMEM;
}

/* A hand-edited file may hold anything: an entry without a string name,
 * password hash and an account of admin or basic is logged and left out,
 * so every entry the rest of this file sees is complete. */
static void
drop_bad_entries(void)
{
    size_t i = 0;
    size_t entry = 0;   /* position in the file, for the message */

    while (entry++, i < json_array_size(users)) {
        json_t *u = json_array_get(users, i);
        const char *name = json_string_value(json_object_get(u, "name"));
        const char *pw = json_string_value(json_object_get(u, "password"));
        const char *acc = json_string_value(json_object_get(u, "account"));

        if (name != NULL && name[0] != '\0' && pw != NULL && acc != NULL &&
            (strcmp(acc, "admin") == 0 || strcmp(acc, "basic") == 0)) {
            i++;
            continue;
        }
        sl_log_error("'%s': account entry %zu ('%.64s') ignored: it needs "
                     "\"name\", \"password\" and \"account\" (admin or "
                     "basic)", path, entry, name ? name : "?");
        json_array_remove(users, i);
    }
}

int
sl__admin_users_load(const char *datadir)
{
    json_error_t err;

    snprintf(path, sizeof(path), "%.4000s/passwd", datadir);
    json_decref(users);
    users = json_load_file(path, 0, &err);
    if (users == NULL && access(path, F_OK) == 0) {
        sl_log_error("cannot read admin accounts from '%s': %s", path,
                     err.text);
        return -EINVAL;
    }
    if (users != NULL && !json_is_array(users)) {
        sl_log_error("'%s' is not a JSON array of accounts", path);
        return -EINVAL;
    }
    drop_bad_entries();
    if (users == NULL) {
        users = json_array();
        if (users == NULL || add_user(DEFAULT_USER, DEFAULT_PASSWORD,
                                      "admin") < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

void
sl__admin_users_free(void)
{
    json_decref(users);
    users = NULL;
    memset(cache, 0, sizeof(cache));
}

bool
sl__admin_users_default_active(void)
{
    json_t *u = users ? find_user(DEFAULT_USER, NULL) : NULL;
    const char *h = u ? json_string_value(json_object_get(u, "password"))
                      : NULL;

    return h != NULL && verify(DEFAULT_PASSWORD, h);
}

int
sl__admin_users_check(const char *user, const char *pw, bool local)
{
    unsigned char d[32];
    json_t *u;
    const char *h;
    int role;

    if (strcmp(user, DEFAULT_USER) == 0 &&
        strcmp(pw, DEFAULT_PASSWORD) == 0 && !local) {
        return -1;   /* the default password: loopback only */
    }
    digest(user, pw, d);
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (memcmp(cache[i], d, sizeof(d)) == 0) {
            return cache_role[i];
        }
    }
    u = find_user(user, NULL);
    h = u ? json_string_value(json_object_get(u, "password")) : NULL;
    if (h == NULL || !verify(pw, h)) {
        return -1;
    }
    role = strcmp(json_string_value(json_object_get(u, "account")),
                  "admin") == 0;
    memcpy(cache[cache_next % CACHE_SLOTS], d, sizeof(d));
    cache_role[cache_next++ % CACHE_SLOTS] = role;
    return role;
}

/* ---- /v1/users ---- */

static json_t *
user_json(struct admin_req *r, json_t *u)
{
    const char *name = json_string_value(json_object_get(u, "name"));

    return json_pack("{s:s, s:s, s:{s:s}, s:{s:o}}", "id", name, "type",
                     "inet", "attributes", "account",
                     json_string_value(json_object_get(u, "account")),
                     "links", "self", sl__admin_link(r, "users/inet/%s", name));
}

struct admin_resp
sl__rest_users_get(struct admin_req *r)
{
    json_t *arr = json_array();
    size_t i;
    json_t *u;

    if (r->nseg == 3) {
        u = find_user(r->seg[2], NULL);
        if (u == NULL || strcmp(r->seg[1], "inet") != 0) {
            return sl__admin_error(404, "unknown user '%s'", r->seg[2]);
        }
        json_decref(arr);
        return sl__admin_ok(json_pack("{s:o, s:{s:o}}", "data", user_json(r, u),
                                  "links", "self",
                                  sl__admin_link(r, "users/inet/%s",
                                             r->seg[2])));
    }
    if (r->nseg == 2 && strcmp(r->seg[1], "inet") != 0) {
        json_decref(arr);
        return sl__admin_error(404, "unknown resource 'users/%s'", r->seg[1]);
    }
    json_array_foreach(users, i, u) {
        json_array_append_new(arr, user_json(r, u));
    }
    return sl__admin_ok(json_pack("{s:o, s:{s:o}}", "data", arr, "links",
                              "self", sl__admin_link(r, "users/inet")));
}

/* POST /v1/users/inet {"data":{"id","attributes":{"password","account"}}}
 * PATCH /v1/users/inet/NAME {"data":{"attributes":{"password"}}}
 * DELETE /v1/users/inet/NAME */
struct admin_resp
sl__rest_users_write(struct admin_req *r)
{
    json_t *data = json_object_get(r->body, "data");
    json_t *attrs = json_object_get(data, "attributes");
    const char *pw = json_string_value(json_object_get(attrs, "password"));
    const char *acc = json_string_value(json_object_get(attrs, "account"));
    const char *name = r->nseg == 3 ? r->seg[2]
                       : json_string_value(json_object_get(data, "id"));
    char accbuf[16];
    size_t idx;
    json_t *u;

    if (r->nseg < 2 || strcmp(r->seg[1], "inet") != 0) {
        return sl__admin_error(405, "use /v1/users/inet");
    }
    if (name == NULL || name[0] == '\0') {
        return sl__admin_error(400, "missing user name (data.id)");
    }
    u = find_user(name, &idx);
    if (strcmp(r->method, "DELETE") == 0) {
        if (u == NULL) {
            return sl__admin_error(404, "unknown user '%s'", name);
        }
        json_array_remove(users, idx);
        return save() < 0 ? sl__admin_error(500, "cannot save accounts")
                          : sl__admin_no_content();
    }
    if (pw == NULL || pw[0] == '\0') {
        return sl__admin_error(400, "missing parameter 'password'");
    }
    if (acc && strcmp(acc, "admin") != 0 && strcmp(acc, "basic") != 0) {
        return sl__admin_error(400, "invalid value '%s' for parameter "
                           "'account' (expected admin or basic)", acc);
    }
    if (strcmp(r->method, "POST") == 0 && r->nseg == 2) {
        if (u != NULL) {
            return sl__admin_error(409, "user '%s' already exists", name);
        }
    } else if (strcmp(r->method, "PATCH") == 0 && r->nseg == 3) {
        if (u == NULL) {
            return sl__admin_error(404, "unknown user '%s'", name);
        }
        snprintf(accbuf, sizeof(accbuf), "%s", acc ? acc
                 : json_string_value(json_object_get(u, "account")));
        acc = accbuf;
        json_array_remove(users, idx);
    } else {
        return sl__admin_error(405, "method %s not allowed here", r->method);
    }
    if (add_user(name, pw, acc ? acc : "basic") < 0) {
        return sl__admin_error(500, "cannot hash the password");
    }
    return save() < 0 ? sl__admin_error(500, "cannot save accounts")
                      : sl__admin_no_content();
}
