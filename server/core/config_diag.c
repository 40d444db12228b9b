/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration diagnostics: every message of the loader, the validator,
 * the TLS checks and the file reader goes through sl__cfg_error() or
 * sl__cfg_warn() (config_int.h), which tag "FILE:LINE: " (mapping a line
 * of a merged text back to its file through d->srcs), count, keep the text
 * and print it; sl__cfg_ignored() also keeps the line for --config-check's
 * summary of parameters accepted and ignored.
 *
 * A unit of its own so that what the loader calls (params.c, tls.c,
 * config_files.c) can report without calling back into config.c.
 *
 * Context: main thread while loading; the admin thread for objects added
 * at run time (each with its own struct sl_cfg_diag).
 */
#define SL_LOG_TAG "config"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/log.h>

#include "config_int.h"

bool sl__config_errors_to_log;

static void
diag_add(struct sl_cfg_diag *d, bool error, int line, const char *fmt,
         va_list ap)
{
    char msg[1024];
    char full[1400];
    size_t n;

    const char *file = d->file ? d->file : "-";

    vsnprintf(msg, sizeof(msg), fmt, ap);
    for (size_t i = d->nsrcs; line > 0 && i-- > 0;) {
        if (line >= d->srcs[i].first) {
            file = d->srcs[i].file;
            line = line - d->srcs[i].first + 1;
            break;
        }
    }
    if (line > 0) {
        snprintf(full, sizeof(full), "%s:%d: %s%s", file,
                 line, error ? "" : "warning: ", msg);
    } else {
        snprintf(full, sizeof(full), "%s: %s%s", d->file ? d->file : "-",
                 error ? "" : "warning: ", msg);
    }
    *(error ? &d->errors : &d->warnings) += 1;
    if (!d->quiet) {
        fprintf(stderr, "%s\n", full);
    }
    if (sl__config_errors_to_log) {
        if (error) {
            sl_log_error("%s", full);
        } else {
            sl_log_warn("%s", full);
        }
    }
    n = strlen(full);
    if (d->len + n + 2 > d->cap) {
        size_t cap = (d->cap + n + 2) * 2;
        char *t = realloc(d->text, cap);

        if (t == NULL) {
            return;
        }
        d->text = t;
        d->cap = cap;
    }
    memcpy(d->text + d->len, full, n);
    d->len += n;
    d->text[d->len++] = '\n';
    d->text[d->len] = '\0';
}

void
sl__cfg_error(struct sl_cfg_diag *d, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    diag_add(d, true, line, fmt, ap);
    va_end(ap);
}

void
sl__cfg_warn(struct sl_cfg_diag *d, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    diag_add(d, false, line, fmt, ap);
    va_end(ap);
}

void
sl__cfg_ignored(struct sl_cfg_diag *d, int line, const char *name,
                const char *what, const char *reason)
{
    size_t before = d->len;
    size_t n;

    sl__cfg_warn(d, line, "parameter '%s' in %s is accepted for MaxScale "
                 "compatibility and ignored: %s", name, what, reason);
    if (d->len <= before) {
        return;
    }
    n = d->len - before;
    if (d->ignored_len + n + 1 > d->ignored_cap) {
        size_t cap = (d->ignored_cap + n + 1) * 2;
        char *t = realloc(d->ignored, cap);

        if (t == NULL) {
            return;
        }
        d->ignored = t;
        d->ignored_cap = cap;
    }
    memcpy(d->ignored + d->ignored_len, d->text + before, n);
    d->ignored_len += n;
    d->ignored[d->ignored_len] = '\0';
    d->nignored++;
}

void
sl__cfg_diag_free(struct sl_cfg_diag *d)
{
    free(d->text);
    d->text = NULL;
    d->len = d->cap = 0;
    free(d->ignored);
    d->ignored = NULL;
    d->ignored_len = d->ignored_cap = 0;
    for (size_t i = 0; i < d->nsrcs; i++) {
        free(d->srcs[i].file);
    }
    free(d->srcs);
    d->srcs = NULL;
    d->nsrcs = 0;
}
