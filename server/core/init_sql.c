/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A listener's connection_init_sql_file (MaxScale's): a text file with one
 * SQL statement per line, empty (or blank) lines ignored. It is read once,
 * when the listener is loaded (start-up, reload, runtime creation) or
 * when a PATCH names it; the statements are kept on the listener, and the
 * protocol sends them on every backend connection of the listener's
 * sessions right after the login (sl_listener_init_sql). Nothing here
 * runs per query.
 *
 * Context: main thread (loading) or the admin thread (REST), on objects
 * no worker sees yet.
 */
#define SL_LOG_TAG "config"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/service.h>

#include "internal.h"
#include "init_sql.h"

void
sl__init_sql_free(char **stmts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(stmts[i]);
    }
    free(stmts);
}

/* Append the line [s, e) (trimmed) to *v unless it is blank. */
static int
add_line(const char *s, const char *e, char ***v, size_t *n)
{
    char **nv;
    char *line;

    while (s < e && (*s == ' ' || *s == '\t' || *s == '\r')) {
        s++;
    }
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) {
        e--;
    }
    if (s == e) {
        return 0;
    }
    line = strndup(s, (size_t)(e - s));
    nv = line ? realloc(*v, (*n + 1) * sizeof(char *)) : NULL;
    if (nv == NULL) {
        free(line);
        return -ENOMEM;
    }
    nv[(*n)++] = line;
    *v = nv;
    return 0;
}

int
sl__init_sql_parse(const char *text, size_t len, char ***out, size_t *nout,
                   char *err, size_t errlen)
{
    const char *p = text;
    const char *end = text + len;
    char **v = NULL;
    size_t n = 0;

    if (memchr(text, '\0', len) != NULL) {
        snprintf(err, errlen, "contains a NUL byte (not a text file)");
        return -EINVAL;
    }
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;

        if (add_line(p, e, &v, &n) != 0) {
            sl__init_sql_free(v, n);
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        p = nl ? nl + 1 : end;
    }
    *out = v;
    *nout = n;
    return 0;
}

int
sl__init_sql_read(const char *path, char ***out, size_t *nout, char *err,
                  size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *text;
    size_t len;
    int rc;

    *out = NULL;
    *nout = 0;
    if (f == NULL) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -errno;
    }
    text = malloc(SL_INIT_SQL_MAX + 1);
    if (text == NULL) {
        fclose(f);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    len = fread(text, 1, SL_INIT_SQL_MAX + 1, f);
    if (ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
    } else if (len > SL_INIT_SQL_MAX) {
        rc = -EFBIG;
        snprintf(err, errlen, "'%s' is larger than %d bytes", path,
                 SL_INIT_SQL_MAX);
    } else {
        char why[128];

        rc = sl__init_sql_parse(text, len, out, nout, why, sizeof(why));
        if (rc != 0) {
            snprintf(err, errlen, "'%s' %s", path, why);
        }
    }
    free(text);
    fclose(f);
    return rc;
}

const char *const *
sl_listener_init_sql(const struct sl_listener *l, size_t *n)
{
    if (l == NULL) {
        *n = 0;
        return NULL;
    }
    *n = l->ninit_sql;
    return (const char *const *)l->init_sql;
}
