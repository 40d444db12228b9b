/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The REST API audit file (MaxScale's admin_audit, admin_audit_file,
 * admin_audit_exclude_methods): one CSV row per request, written when the
 * answer is queued -- time, duration, user, client address, URI, method,
 * status, code and the request body with every "password" value masked.
 * Requests refused for their credentials are always written, whatever
 * admin_audit_exclude_methods says. The file has a header row when it is
 * created and is reopened with the log (POST /v1/maxscale/logs/flush).
 *
 * Context: the libmicrohttpd thread (the only caller), so no lock.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sluice/log.h>

#include "admin_int.h"
#include "config_int.h"

static bool enabled;
static char path[4096];
static unsigned excluded;      /* bit i: methods[i] is not written */
static FILE *file;
static bool error_reported;    /* one log line per failure streak */

static void
close_file(void)
{
    if (file != NULL) {
        fclose(file);
        file = NULL;
    }
}

/* Open (creating with the header row) the file; 0 or -errno. */
static int
open_file(void)
{
    struct stat st;
    int fd;

    close_file();
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        return -errno;
    }
    file = fdopen(fd, "a");
    if (file == NULL) {
        int err = errno;

        close(fd);
        return -err;
    }
    if (fstat(fd, &st) == 0 && st.st_size == 0) {
        fputs("Timestamp,Duration,User,Host,URI,Method,Status,"
              "Response code,Body\n", file);
        fflush(file);
    }
    return 0;
}

int
sl__admin_audit_configure(const struct sl_params *p, const char *logdir)
{
    const char *f = sl_params_get(p, "admin_audit_file");

    if (sl__http_methods_parse(sl_params_get(p, "admin_audit_exclude_methods"),
                      &excluded) < 0) {
        sl_log_error("admin_audit_exclude_methods: a comma-separated list "
                     "of GET, PUT, POST, PATCH, DELETE, HEAD, OPTIONS, "
                     "CONNECT, TRACE");
        return -EINVAL;
    }
    snprintf(path, sizeof(path), "%s", f && f[0] ? f : "");
    if (path[0] == '\0') {
        snprintf(path, sizeof(path), "%s/admin_audit.csv",
                 logdir && logdir[0] ? logdir : ".");
    }
    enabled = sl_params_bool(p, "admin_audit");
    if (enabled) {
        int rc = open_file();

        if (rc < 0) {
            sl_log_error("REST API: cannot open the audit file %s: %s", path,
                         strerror(-rc));
            return rc;
        }
        sl_log_notice("REST API requests are audited in %s", path);
    }
    return 0;
}

int
sl__admin_audit_alter(const char *key, json_t *v, struct admin_resp *err)
{
    if (strcmp(key, "admin_audit_exclude_methods") == 0) {
        unsigned mask;

        if (!json_is_string(v) ||
            sl__http_methods_parse(json_string_value(v), &mask) < 0) {
            *err = sl__admin_error(400, "invalid value for parameter "
                                   "'admin_audit_exclude_methods' (a "
                                   "comma-separated list of GET, PUT, POST, "
                                   "PATCH, DELETE, HEAD, OPTIONS, CONNECT, "
                                   "TRACE)");
            return -1;
        }
        excluded = mask;
        return 0;
    }
    if (strcmp(key, "admin_audit_file") == 0) {
        char old[sizeof(path)];
        int rc;

        if (!json_is_string(v) || json_string_value(v)[0] != '/' ||
            strlen(json_string_value(v)) >= sizeof(path)) {
            *err = sl__admin_error(400, "invalid value for parameter "
                                   "'admin_audit_file' (an absolute path)");
            return -1;
        }
        memcpy(old, path, sizeof(old));
        snprintf(path, sizeof(path), "%s", json_string_value(v));
        if (enabled && (rc = open_file()) < 0) {
            memcpy(path, old, sizeof(path));
            open_file();
            *err = sl__admin_error(400, "cannot open the audit file %s: %s",
                                   json_string_value(v), strerror(-rc));
            return -1;
        }
        return 0;
    }
    /* admin_audit */
    if (!json_is_boolean(v)) {
        *err = sl__admin_error(400, "invalid value for parameter "
                               "'admin_audit' (expected true or false)");
        return -1;
    }
    if (json_is_true(v) && !enabled) {
        int rc = open_file();

        if (rc < 0) {
            *err = sl__admin_error(400, "cannot open the audit file %s: %s",
                                   path, strerror(-rc));
            return -1;
        }
    } else if (!json_is_true(v)) {
        close_file();
    }
    enabled = json_is_true(v);
    return 0;
}

bool
sl__admin_audit_enabled(void)
{
    return enabled;
}

void
sl__admin_audit_reopen(void)
{
    if (enabled && open_file() < 0) {
        sl_log_error("REST API: cannot reopen the audit file %s", path);
    }
}

/* "password" values anywhere in the document become "*****". */
static void
mask_passwords(json_t *j)
{
    const char *k;
    json_t *v;
    size_t i;

    if (json_is_object(j)) {
        json_object_foreach(j, k, v) {
            if (strcasestr(k, "password") != NULL && json_is_string(v)) {
                json_object_set_new(j, k, json_string("*****"));
            } else {
                mask_passwords(v);
            }
        }
    } else if (json_is_array(j)) {
        json_array_foreach(j, i, v) {
            mask_passwords(v);
        }
    }
}

/* One CSV field: quoted, quotes doubled, line breaks kept inside. */
static void
field(const char *s, bool last)
{
    fputc('"', file);
    for (; *s; s++) {
        if (*s == '"') {
            fputc('"', file);
        }
        fputc(*s, file);
    }
    fputs(last ? "\"\n" : "\",", file);
}

void
sl__admin_audit(const char *method, const char *url, const char *user,
                const char *client, int status, double seconds,
                const char *body, size_t len, bool auth_failed)
{
    char when[64];
    char dur[32];
    char code[16];
    char *text = NULL;
    struct timespec ts;
    struct tm tm;
    int i = 0;

    if (!enabled || file == NULL) {
        return;
    }
    while (sl__http_methods[i] && strcmp(sl__http_methods[i], method) != 0) {
        i++;
    }
    if (!auth_failed && sl__http_methods[i] && (excluded & (1u << i))) {
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ld",
             ts.tv_nsec / 1000000);
    snprintf(dur, sizeof(dur), "%.0fms", seconds * 1000.0);
    snprintf(code, sizeof(code), "%d", status);
    if (len > 0) {
        json_t *doc = json_loadb(body, len, 0, NULL);

        if (doc != NULL) {
            mask_passwords(doc);
            text = json_dumps(doc, JSON_COMPACT);
            json_decref(doc);
        } else if (asprintf(&text, "(%zu bytes, not JSON)", len) < 0) {
            text = NULL;
        }
    }
    field(when, false);
    field(dur, false);
    field(user ? user : "", false);
    field(client ? client : "", false);
    field(url, false);
    field(method, false);
    field(status < 300 ? "OK" : status < 500 ? "Client error"
                                             : "Server error", false);
    field(code, false);
    field(text ? text : "", true);
    free(text);
    if (fflush(file) != 0 || ferror(file)) {
        if (!error_reported) {
            sl_log_error("REST API: cannot write to the audit file %s: %s",
                         path, strerror(errno));
            error_reported = true;
        }
        clearerr(file);
    } else {
        error_reported = false;
    }
}

void
sl__admin_audit_close(void)
{
    close_file();
    enabled = false;
}
