/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the REST API may point file paths. An admin account can create
 * and alter objects at run time; without a limit it could make Sluice
 * append query logs to any file it can write (qlafilter's filebase,
 * regexfilter's log_file), read any file as a cache rules file, or
 * unlink any file by naming it as a new listener's socket (a stale socket
 * is removed before bind). So a path parameter given through the API must
 * lie under logdir or a directory listed in admin_secure_paths, and never
 * under datadir or persistdir.
 * Paths written by the operator in the configuration file are not
 * checked; TLS files (ssl_*) are only read into memory and stay free.
 *
 * A path is a parameter named filebase, socket or *file, or one a loaded
 * module or the core declares SL_PARAM_PATH. Its directory must exist and
 * resolve (realpath, so symlinks and ".." count for what they reach) to an
 * allowed directory or below; an existing final component must not be a
 * symlink, and for socket must be a socket.
 *
 * Context: the libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "admin_int.h"
#include "config_int.h"
#include "module_int.h"

const struct sl_param_spec *
sl__admin_module_specs(const char *name)
{
    for (size_t i = 0; name && i < sl__module_count(); i++) {
        const struct sl_loaded_module *lm = sl__module_at(i);

        if (strcasecmp(lm->info->name, name) == 0) {
            return lm->info->params;
        }
    }
    return NULL;
}

static bool
is_path_param(const char *kind, const struct sl_param_spec *modspecs,
              const char *key)
{
    const struct sl_param_spec *s;
    size_t n = strlen(key);

    if (strncmp(key, "ssl_", 4) == 0) {
        return false;
    }
    if (strcmp(key, "filebase") == 0 || strcmp(key, "socket") == 0 ||
        (n >= 4 && strcmp(key + n - 4, "file") == 0)) {
        return true;
    }
    s = sl__param_spec_find(modspecs, key);
    if (s == NULL) {
        s = sl__param_spec_find(sl__config_core_specs(kind), key);
    }
    return s != NULL && s->type == SL_PARAM_PATH;
}

/* dir (resolved) is base (resolved) or below it. */
static bool
under(const char *dir, const char *base)
{
    char rb[PATH_MAX];
    size_t n;

    if (base == NULL || base[0] == '\0' || realpath(base, rb) == NULL) {
        return false;
    }
    n = strlen(rb);
    if (n == 1) {
        return true;   /* "/" was allowed on purpose */
    }
    return strncmp(dir, rb, n) == 0 && (dir[n] == '\0' || dir[n] == '/');
}

/* Under logdir or a directory of the comma list admin_secure_paths, and
 * never under datadir or persistdir (the admin accounts, the persisted
 * objects: what the API could otherwise rewrite to grant itself more). */
static bool
allowed_dir(const char *dir)
{
    const struct sl_global *g = &sl__config->global;
    const char *list = sl_params_get(g->params, "admin_secure_paths");
    char item[PATH_MAX];

    if (under(dir, g->datadir) || under(dir, g->persistdir)) {
        return false;
    }
    if (under(dir, g->logdir)) {
        return true;
    }
    while (list != NULL && *list != '\0') {
        size_t n = strcspn(list, ",");

        while (n > 0 && *list == ' ') {
            list++;
            n--;
        }
        snprintf(item, sizeof(item), "%.*s", (int)n, list);
        while (n > 0 && item[n - 1] == ' ') {
            item[--n] = '\0';
        }
        if (n > 0 && under(dir, item)) {
            return true;
        }
        list += strcspn(list, ",");
        list += *list == ',';
    }
    return false;
}

/* 0 when value may be used for key, else -1 with why[] set. */
static int
check_path(const char *key, const char *value, char *why, size_t whylen)
{
    char copy[PATH_MAX];
    char dir[PATH_MAX];
    struct stat st;

    if (value[0] != '/' || strlen(value) >= sizeof(copy)) {
        snprintf(why, whylen, "must be an absolute path");
        return -1;
    }
    snprintf(copy, sizeof(copy), "%s", value);
    if (realpath(dirname(copy), dir) == NULL || !allowed_dir(dir)) {
        snprintf(why, whylen, "is outside the directories the REST API "
                 "may use (logdir, admin_secure_paths; never datadir or "
                 "persistdir)");
        return -1;
    }
    if (lstat(value, &st) == 0 &&
        (S_ISLNK(st.st_mode) ||
         (strcmp(key, "socket") == 0 && !S_ISSOCK(st.st_mode)))) {
        snprintf(why, whylen, "names an existing %s",
                 S_ISLNK(st.st_mode) ? "symbolic link" : "file that is "
                 "not a socket");
        return -1;
    }
    return 0;
}

int
sl__admin_check_paths(const char *kind, const struct sl_param_spec *modspecs,
                  json_t *params, struct admin_resp *res)
{
    const char *key;
    json_t *v;
    char why[200];

    json_object_foreach(params, key, v) {
        const char *value = json_string_value(v);

        if (!is_path_param(kind, modspecs, key) || value == NULL ||
            value[0] == '\0') {
            continue;
        }
        if (check_path(key, value, why, sizeof(why)) < 0) {
            *res = sl__admin_error(403, "parameter '%s': '%.300s' %s", key,
                               value, why);
            return -1;
        }
    }
    return 0;
}
