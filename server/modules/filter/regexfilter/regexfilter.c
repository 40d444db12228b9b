/* SPDX-License-Identifier: Apache-2.0 */
/*
 * regexfilter: rewrite statements with a pcre2 pattern, as in MaxScale.
 *
 * Every COM_QUERY of a session that passes the `user`/`source`
 * restrictions has each match of `match` replaced by `replace` ($1, ${name}
 * refer to groups); the rewritten statement goes on in place of the
 * original. `options=ignorecase` makes the pattern caseless. With
 * `log_file`, every rewrite is recorded there ("original -> rewritten");
 * `log_trace` logs it at info level.
 *
 * Context: the instance is immutable; each session has its own match data.
 */
#define SL_LOG_TAG "regexfilter"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/session.h>

#include "fltutil.h"

static const struct sl_param_spec rgx_params[] = {
    {"match", SL_PARAM_REGEX, NULL, SL_PARAM_F_MANDATORY, NULL,
     "Pattern to find"},
    {"replace", SL_PARAM_STRING, NULL, SL_PARAM_F_MANDATORY, NULL,
     "Replacement text ($1 for groups)"},
    {"options", SL_PARAM_ENUM_MASK, "", 0, flt_regex_options,
     "Pattern options"},
    {"user", SL_PARAM_STRING, NULL, 0, NULL, "Rewrite only for this user"},
    {"source", SL_PARAM_STRING, NULL, 0, NULL,
     "Rewrite only for this client host"},
    {"log_file", SL_PARAM_PATH, NULL, 0, NULL, "Record rewrites here"},
    {"log_trace", SL_PARAM_BOOL, "false", 0, NULL,
     "Log rewrites at info level"},
    SL_PARAM_END,
};

struct rgx_instance {
    char name[128];
    struct flt_regex match;
    char *replace;
    struct flt_who who;
    bool trace;
    FILE *log;
    pthread_mutex_t lock;   /* log */
};

struct rgx_session {
    struct rgx_instance *inst;
    struct sl_session *ses;
    struct sl_filter_session *fs;
    pcre2_match_data *md;
    int active;   /* -1: user not known yet */
};

static void *
rgx_create(const char *name, const struct sl_params *p)
{
    struct rgx_instance *inst = calloc(1, sizeof(*inst));
    const char *log = sl_params_get(p, "log_file");

    if (inst == NULL) {
        return NULL;
    }
    snprintf(inst->name, sizeof(inst->name), "%s", name);
    flt_who_init(&inst->who, p);
    inst->trace = sl_params_bool(p, "log_trace");
    inst->replace = strdup(sl_params_string(p, "replace"));
    pthread_mutex_init(&inst->lock, NULL);
    if (inst->replace == NULL ||
        flt_regex_init(&inst->match, p, "match",
                       (unsigned)sl_params_enum_mask(p, "options"),
                       name) != 0) {
        goto fail;
    }
    if (log != NULL && log[0] != '\0') {
        inst->log = fopen(log, "a");
        if (inst->log == NULL) {
            sl_log_error("filter '%s': cannot open log_file '%s': %s", name,
                         log, strerror(errno));
            goto fail;
        }
    }
    return inst;
fail:
    flt_regex_free(&inst->match);
    pthread_mutex_destroy(&inst->lock);
    free(inst->replace);
    free(inst);
    return NULL;
}

static void
rgx_destroy(void *instance)
{
    struct rgx_instance *inst = instance;

    if (inst->log != NULL) {
        fclose(inst->log);
    }
    flt_regex_free(&inst->match);
    pthread_mutex_destroy(&inst->lock);
    free(inst->replace);
    free(inst);
}

static void *
rgx_new_session(void *instance, struct sl_session *ses,
                struct sl_filter_session *fs)
{
    struct rgx_session *rs = calloc(1, sizeof(*rs));

    if (rs == NULL) {
        return NULL;
    }
    rs->inst = instance;
    rs->ses = ses;
    rs->fs = fs;
    rs->active = -1;
    rs->md = pcre2_match_data_create(32, NULL);
    if (rs->md == NULL) {
        free(rs);
        return NULL;
    }
    return rs;
}

static void
rgx_free_session(void *fsession)
{
    struct rgx_session *rs = fsession;

    pcre2_match_data_free(rs->md);
    free(rs);
}

/* The rewritten statement, malloc'd, or NULL when nothing matched. */
static char *
rgx_substitute(struct rgx_session *rs, const char *sql, size_t len,
               size_t *out_len)
{
    struct rgx_instance *inst = rs->inst;
    PCRE2_SIZE cap = len * 2 + 256;
    char *out;
    int rc;

    for (int attempt = 0; attempt < 2; attempt++) {
        out = malloc(cap);
        if (out == NULL) {
            return NULL;
        }
        rc = pcre2_substitute(inst->match.code, (PCRE2_SPTR)sql, len, 0,
                              PCRE2_SUBSTITUTE_GLOBAL |
                                  PCRE2_SUBSTITUTE_OVERFLOW_LENGTH,
                              rs->md, NULL, (PCRE2_SPTR)inst->replace,
                              PCRE2_ZERO_TERMINATED, (PCRE2_UCHAR *)out,
                              &cap);
        if (rc != PCRE2_ERROR_NOMEMORY) {
            break;
        }
        free(out);
        out = NULL;
    }
    if (rc <= 0) {   /* no match or an error */
        free(out);
        return NULL;
    }
    *out_len = cap;
    return out;
}

static void
rgx_record(struct rgx_session *rs, const char *sql, size_t len,
           const char *out, size_t out_len)
{
    struct rgx_instance *inst = rs->inst;

    if (inst->trace) {
        sl_log_ses_info(rs->ses, "rewrote '%.*s' as '%.*s'", (int)len, sql,
                        (int)out_len, out);
    }
    if (inst->log != NULL) {
        pthread_mutex_lock(&inst->lock);
        fprintf(inst->log, "%.*s -> %.*s\n", (int)len, sql, (int)out_len,
                out);
        fflush(inst->log);
        pthread_mutex_unlock(&inst->lock);
    }
}

static int
rgx_route_query(void *fsession, struct sl_buf *buf)
{
    struct rgx_session *rs = fsession;
    const char *sql;
    size_t len, out_len;
    char *out;
    struct sl_buf *nbuf;

    if (rs->active < 0) {
        rs->active = flt_who_match(&rs->inst->who, rs->ses);
    }
    if (!rs->active || (sql = flt_query_sql(buf, &len)) == NULL) {
        return sl_filter_route_next(rs->fs, buf);
    }
    out = rgx_substitute(rs, sql, len, &out_len);
    if (out == NULL) {
        return sl_filter_route_next(rs->fs, buf);
    }
    rgx_record(rs, sql, len, out, out_len);
    nbuf = sl_mdb_make_query(out, out_len);
    free(out);
    if (nbuf == NULL) {
        return sl_filter_route_next(rs->fs, buf);
    }
    sl_buf_free(buf);
    return sl_filter_route_next(rs->fs, nbuf);
}

static const struct sl_filter_ops rgx_ops = {
    .size = sizeof(rgx_ops),
    .create_instance = rgx_create,
    .destroy_instance = rgx_destroy,
    .new_session = rgx_new_session,
    .free_session = rgx_free_session,
    .route_query = rgx_route_query,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "regexfilter",
    .version = "1.0.0",
    .description = "Rewrites statements: pcre2 match -> replace",
    .params = rgx_params,
    .ops = &rgx_ops,
})
