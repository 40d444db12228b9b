/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A service's user_accounts_file (MaxScale's format): accounts Sluice
 * accepts logins for in addition to (user_accounts_file_usage=
 * add_when_load_ok) or instead of (file_only_always) those it loads from
 * the servers. A JSON object with the optional arrays
 *
 *   "user":          {"user", "host", "password", "plugin",
 *                     "authentication_string", "default_role",
 *                     "super_priv", "global_db_priv", "proxy_priv",
 *                     "is_role"}
 *   "db":            {"user", "host", "db"}
 *   "roles_mapping": {"user", "host", "role"}
 *
 * "user" and "host" are mandatory strings in every entry, the others have
 * the types above; unknown names are refused (a misspelt "password" must
 * not give a password-less account).
 *
 * Compiled twice: into the protocol module (which loads the accounts) and
 * into libsluice (whose configuration check refuses a bad file at start-up
 * and on REST creation/PATCH), so it uses only libc and jansson.
 *
 * Context: pure functions, any thread.
 */
#ifndef SLUICE_MDB_ACCFILE_H
#define SLUICE_MDB_ACCFILE_H

#include <stdbool.h>
#include <stddef.h>

/* One element of "user", as the callback sees it (strings never NULL). */
struct mdb_accfile_user {
    const char *user;
    const char *host;
    const char *password;      /* "" or a `*HEX` mysql_native_password hash */
    const char *plugin;        /* "" = mysql_native_password */
    const char *auth_string;   /* authentication_string */
    bool is_role;
};

/* Called for each element of "user"; non-zero stops the parse (out of
 * memory). */
typedef int (*mdb_accfile_fn)(void *ctx, const struct mdb_accfile_user *u);

/* Read and check the file at path, calling fn (may be NULL: only check)
 * for each user entry. 0, or -1 with err[errlen] saying what is wrong
 * (the JSON error's line and column, or which entry and why). */
int mdb_accfile_read(const char *path, mdb_accfile_fn fn, void *ctx,
                     char *err, size_t errlen);

/* The same on text already in memory (unit tests, fuzzing). */
int mdb_accfile_parse(const char *text, size_t len, mdb_accfile_fn fn,
                      void *ctx, char *err, size_t errlen);

#endif
