/* SPDX-License-Identifier: Apache-2.0 */
/*
 * qlafilter: the query log, as in MaxScale.
 *
 * Every COM_QUERY that passes the `match`/`exclude` patterns and the
 * `user`/`source` restrictions is written as one line of `log_data`
 * fields joined by `separator`, to a file per session
 * (<filebase>.<session id>), one file for all sessions
 * (<filebase>.unified) and/or stdout, as `log_type` says. A line whose
 * fields need the answer (reply_time, num_rows, ...) is written when the
 * answer is complete; otherwise at once. Password literals in a statement
 * are logged as '*****' (sl_log_mask_passwords); files are created 0640.
 *
 * Files are opened in append mode (or truncated with append=false) and
 * reopened by path after a log rotation (SIGHUP): each writer compares
 * sl_log_rotation_count() with the value it saw when it opened its file.
 *
 * Context: the instance (patterns, the unified file under its mutex) is
 * shared by all workers; a session's file belongs to its worker.
 */
#define _GNU_SOURCE   /* strcasestr */
#define SL_LOG_TAG "qlafilter"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sluice/buf.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/service.h>
#include <sluice/session.h>

#include "fltutil.h"

enum qla_type {
    QLA_SESSION = 1u << 0,
    QLA_UNIFIED = 1u << 1,
    QLA_STDOUT = 1u << 2,
};

static const char *const qla_types[] = {"session", "unified", "stdout", NULL};

/* log_data fields, in MaxScale's names; bit i = qla_fields[i]. */
enum qla_field {
    F_SERVICE, F_SESSION, F_DATE, F_USER, F_REPLY_TIME, F_TOTAL_REPLY_TIME,
    F_QUERY, F_DEFAULT_DB, F_NUM_ROWS, F_REPLY_SIZE, F_TRANSACTION,
    F_TRANSACTION_TIME, F_NUM_WARNINGS, F_ERROR_MSG, F_SERVER, F_COMMAND,
};

static const char *const qla_fields[] = {
    "service", "session", "date", "user", "reply_time", "total_reply_time",
    "query", "default_db", "num_rows", "reply_size", "transaction",
    "transaction_time", "num_warnings", "error_msg", "server", "command",
    NULL,
};

#define QLA_REPLY_FIELDS                                                       \
    ((1u << F_REPLY_TIME) | (1u << F_TOTAL_REPLY_TIME) |                       \
     (1u << F_NUM_ROWS) | (1u << F_REPLY_SIZE) | (1u << F_NUM_WARNINGS) |      \
     (1u << F_ERROR_MSG))

static const struct sl_param_spec qla_params[] = {
    {"filebase", SL_PARAM_STRING, NULL, SL_PARAM_F_MANDATORY, NULL,
     "Path prefix of the log files"},
    {"match", SL_PARAM_REGEX, NULL, 0, NULL, "Log only matching statements"},
    {"exclude", SL_PARAM_REGEX, NULL, 0, NULL, "Do not log these"},
    {"options", SL_PARAM_ENUM_MASK, "", 0, flt_regex_options,
     "Pattern options"},
    {"user", SL_PARAM_STRING, NULL, 0, NULL, "Log only this user"},
    {"source", SL_PARAM_STRING, NULL, 0, NULL, "Log only this client host"},
    {"log_type", SL_PARAM_ENUM_MASK, "session", 0, qla_types,
     "session, unified and/or stdout"},
    {"log_data", SL_PARAM_ENUM_MASK, "date,user,query", 0, qla_fields,
     "Fields of each line"},
    {"flush", SL_PARAM_BOOL, "false", 0, NULL, "Flush after every line"},
    {"append", SL_PARAM_BOOL, "true", 0, NULL, "Append to existing files"},
    {"separator", SL_PARAM_STRING, ",", 0, NULL, "Field separator"},
    {"newline_replacement", SL_PARAM_STRING, " ", 0, NULL,
     "Replaces newlines in logged statements"},
    {"duration_unit", SL_PARAM_ENUM, "ms", 0,
     (const char *const[]){"ms", "us", NULL}, "Unit of reply times"},
    {"use_canonical_form", SL_PARAM_BOOL, "false", SL_PARAM_F_REFUSED, NULL,
     "canonical statements are not implemented: the log would hold the "
     "literal values"},
    SL_PARAM_END,
};

/* A log file reopened after rotation. */
struct qla_file {
    FILE *fp;
    char path[4200];
    uint64_t rotation;   /* sl_log_rotation_count() when opened */
};

struct qla_instance {
    char name[128];
    char filebase[4096];
    struct flt_regex match, exclude;
    struct flt_who who;
    unsigned types;
    unsigned fields;
    bool flush, append, micro;
    char separator[32];
    char nl[32];
    pthread_mutex_t lock;   /* unified file and stdout */
    struct qla_file unified;
};

struct qla_session {
    struct qla_instance *inst;
    struct sl_session *ses;
    struct sl_filter_session *fs;
    pcre2_match_data *md;
    struct qla_file file;
    int active;             /* -1 unknown (user not set yet), 0 no, 1 yes */
    /* the statement waiting for its answer */
    char *sql;
    size_t sql_len;
    int64_t start_us, first_us;
    time_t start_wall;
    uint64_t rows, bytes;
    uint16_t warnings;
    char error[256];
};

/* Open (create 0640: the queries may hold secrets) and, when new, write
 * the header line. 0 or -1 (logged). */
static int
qla_open(struct qla_instance *inst, struct qla_file *f, bool truncate)
{
    int fd = open(f->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
                               (truncate ? O_TRUNC : 0), 0640);

    f->fp = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (f->fp == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        sl_log_error("filter '%s': cannot open '%s': %s", inst->name, f->path,
                     strerror(errno));
        return -1;
    }
    f->rotation = sl_log_rotation_count();
    if (ftell(f->fp) == 0) {   /* a new file: the header line */
        const char *sep = "";

        for (unsigned i = 0; qla_fields[i] != NULL; i++) {
            if (inst->fields & (1u << i)) {
                fprintf(f->fp, "%s%s", sep, qla_fields[i]);
                sep = inst->separator;
            }
        }
        fputc('\n', f->fp);
        fflush(f->fp);
    }
    return 0;
}

static void
qla_reopen_if_rotated(struct qla_instance *inst, struct qla_file *f)
{
    if (f->fp != NULL && f->rotation != sl_log_rotation_count()) {
        fclose(f->fp);
        qla_open(inst, f, false);
    }
}

static void *
qla_create(const char *name, const struct sl_params *p)
{
    struct qla_instance *inst = calloc(1, sizeof(*inst));
    unsigned opts = (unsigned)sl_params_enum_mask(p, "options");

    if (inst == NULL) {
        return NULL;
    }
    snprintf(inst->name, sizeof(inst->name), "%s", name);
    snprintf(inst->filebase, sizeof(inst->filebase), "%s",
             sl_params_string(p, "filebase"));
    inst->types = (unsigned)sl_params_enum_mask(p, "log_type");
    inst->fields = (unsigned)sl_params_enum_mask(p, "log_data");
    inst->flush = sl_params_bool(p, "flush");
    inst->append = sl_params_bool(p, "append");
    inst->micro = sl_params_enum(p, "duration_unit") == 1;
    snprintf(inst->separator, sizeof(inst->separator), "%s",
             sl_params_string(p, "separator"));
    snprintf(inst->nl, sizeof(inst->nl), "%s",
             sl_params_string(p, "newline_replacement"));
    flt_who_init(&inst->who, p);
    pthread_mutex_init(&inst->lock, NULL);
    if (flt_regex_init(&inst->match, p, "match", opts, name) != 0 ||
        flt_regex_init(&inst->exclude, p, "exclude", opts, name) != 0) {
        goto fail;
    }
    if (inst->types & QLA_UNIFIED) {
        snprintf(inst->unified.path, sizeof(inst->unified.path),
                 "%s.unified", inst->filebase);
        if (qla_open(inst, &inst->unified, !inst->append) != 0) {
            goto fail;
        }
    }
    return inst;
fail:
    flt_regex_free(&inst->match);
    flt_regex_free(&inst->exclude);
    pthread_mutex_destroy(&inst->lock);
    free(inst);
    return NULL;
}

static void
qla_destroy(void *instance)
{
    struct qla_instance *inst = instance;

    if (inst->unified.fp != NULL) {
        fclose(inst->unified.fp);
    }
    flt_regex_free(&inst->match);
    flt_regex_free(&inst->exclude);
    pthread_mutex_destroy(&inst->lock);
    free(inst);
}

static void qla_emit(struct qla_session *qs);

static void *
qla_new_session(void *instance, struct sl_session *ses,
                struct sl_filter_session *fs)
{
    struct qla_instance *inst = instance;
    struct qla_session *qs = calloc(1, sizeof(*qs));

    if (qs == NULL) {
        return NULL;
    }
    qs->inst = inst;
    qs->ses = ses;
    qs->fs = fs;
    qs->active = -1;
    qs->md = pcre2_match_data_create(16, NULL);
    if (qs->md == NULL) {
        free(qs);
        return NULL;
    }
    return qs;
}

static void
qla_free_session(void *fsession)
{
    struct qla_session *qs = fsession;

    qla_emit(qs);   /* a statement whose answer never came */
    if (qs->file.fp != NULL) {
        fclose(qs->file.fp);
    }
    pcre2_match_data_free(qs->md);
    free(qs->sql);
    free(qs);
}

/* Append text to the line, newlines replaced. */
static void
put_query(FILE *fp, const char *sql, size_t len, const char *nl)
{
    for (size_t i = 0; i < len; i++) {
        if (sql[i] == '\n' || sql[i] == '\r') {
            fputs(nl, fp);
        } else {
            fputc(sql[i], fp);
        }
    }
}

static double
qla_duration(const struct qla_session *qs, int64_t end_us)
{
    double d = (double)(end_us - qs->start_us);

    return qs->inst->micro ? d : d / 1000.0;
}

/* One field of the pending statement's line. */
static void
put_field(FILE *fp, const struct qla_session *qs, enum qla_field f)
{
    const struct sl_session *ses = qs->ses;
    char date[64];
    struct tm tm;

    switch (f) {
    case F_SERVICE: fputs(sl_service_name(sl_session_service(ses)), fp); break;
    case F_SESSION:
        fprintf(fp, "%llu", (unsigned long long)sl_session_id(ses));
        break;
    case F_DATE:
        localtime_r(&qs->start_wall, &tm);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
        fputs(date, fp);
        break;
    case F_USER:
        fprintf(fp, "%s@%s", sl_session_user(ses), sl_session_remote(ses));
        break;
    case F_REPLY_TIME:
        fprintf(fp, "%.3f", qs->first_us ? qla_duration(qs, qs->first_us)
                                         : 0.0);
        break;
    case F_TOTAL_REPLY_TIME:
        fprintf(fp, "%.3f", qla_duration(qs, flt_now_us()));
        break;
    case F_QUERY: put_query(fp, qs->sql, qs->sql_len, qs->inst->nl); break;
    case F_DEFAULT_DB: fputs(sl_session_db(ses), fp); break;
    case F_NUM_ROWS: fprintf(fp, "%llu", (unsigned long long)qs->rows); break;
    case F_REPLY_SIZE:
        fprintf(fp, "%llu", (unsigned long long)qs->bytes);
        break;
    case F_NUM_WARNINGS: fprintf(fp, "%u", qs->warnings); break;
    case F_ERROR_MSG: fputs(qs->error, fp); break;
    case F_COMMAND: fputs("COM_QUERY", fp); break;
    default: break;   /* transaction, server: not tracked */
    }
}

static void
write_line(FILE *fp, const struct qla_session *qs)
{
    const char *sep = "";

    for (unsigned i = 0; qla_fields[i] != NULL; i++) {
        if (qs->inst->fields & (1u << i)) {
            fputs(sep, fp);
            put_field(fp, qs, (enum qla_field)i);
            sep = qs->inst->separator;
        }
    }
    fputc('\n', fp);
    if (qs->inst->flush) {
        fflush(fp);
    }
}

/* Write the pending statement to every configured destination. */
static void
qla_emit(struct qla_session *qs)
{
    struct qla_instance *inst = qs->inst;

    if (qs->sql == NULL) {
        return;
    }
    if (inst->types & QLA_SESSION) {
        if (qs->file.fp == NULL && qs->file.path[0] == '\0') {
            snprintf(qs->file.path, sizeof(qs->file.path), "%s.%llu",
                     inst->filebase,
                     (unsigned long long)sl_session_id(qs->ses));
            qla_open(inst, &qs->file, !inst->append);
        }
        qla_reopen_if_rotated(inst, &qs->file);
        if (qs->file.fp != NULL) {
            write_line(qs->file.fp, qs);
        }
    }
    if (inst->types & (QLA_UNIFIED | QLA_STDOUT)) {
        pthread_mutex_lock(&inst->lock);
        if (inst->types & QLA_UNIFIED) {
            qla_reopen_if_rotated(inst, &inst->unified);
            if (inst->unified.fp != NULL) {
                write_line(inst->unified.fp, qs);
            }
        }
        if (inst->types & QLA_STDOUT) {
            write_line(stdout, qs);
            fflush(stdout);
        }
        pthread_mutex_unlock(&inst->lock);
    }
    free(qs->sql);
    qs->sql = NULL;
}

/*
 * The statement as logged: a copy of sql (NUL-terminated, *outlen set)
 * with password literals masked (CREATE USER ... IDENTIFIED BY '...',
 * SET PASSWORD = PASSWORD('...')), so a query log never holds a password.
 * Only a statement naming PASSWORD or IDENTIFIED is scanned twice. NULL
 * on allocation failure.
 */
static char *
qla_copy_masked(const char *sql, size_t len, size_t *outlen)
{
    char *copy = malloc(len + 1);
    char *masked;
    size_t cap = 2 * len + 16;   /* each '' may grow to '*****' */

    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, sql, len);
    copy[len] = '\0';
    *outlen = len;
    if (strcasestr(copy, "PASSWORD") == NULL &&
        strcasestr(copy, "IDENTIFIED") == NULL) {
        return copy;
    }
    masked = malloc(cap);
    if (masked != NULL) {
        sl_log_mask_passwords(copy, NULL, masked, cap);
        *outlen = strlen(masked);
    }
    free(copy);
    return masked;
}

static int
qla_route_query(void *fsession, struct sl_buf *buf)
{
    struct qla_session *qs = fsession;
    struct qla_instance *inst = qs->inst;
    const char *sql;
    size_t len;

    if (qs->active < 0) {
        qs->active = flt_who_match(&inst->who, qs->ses);
    }
    if (qs->active && (sql = flt_query_sql(buf, &len)) != NULL &&
        flt_wanted(&inst->match, &inst->exclude, qs->md, sql, len)) {
        qla_emit(qs);   /* a previous one that got no answer */
        qs->sql = qla_copy_masked(sql, len, &qs->sql_len);
        if (qs->sql != NULL) {
            qs->start_us = flt_now_us();
            qs->first_us = 0;
            qs->start_wall = time(NULL);
            qs->rows = qs->bytes = qs->warnings = 0;
            qs->error[0] = '\0';
            if (!(inst->fields & QLA_REPLY_FIELDS)) {
                qla_emit(qs);
            }
        }
    }
    return sl_filter_route_next(qs->fs, buf);
}

static int
qla_client_reply(void *fsession, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    struct qla_session *qs = fsession;

    if (qs->sql != NULL) {
        if (qs->first_us == 0) {
            qs->first_us = flt_now_us();
        }
        qs->bytes += sl_buf_len(buf);
        qs->rows = reply->rows;
        qs->warnings = reply->warnings;
        if (reply->is_err) {
            snprintf(qs->error, sizeof(qs->error), "ERROR %u (%s)",
                     reply->error_code, reply->sqlstate);
        }
        if (reply->complete) {
            qla_emit(qs);
        }
    }
    return sl_filter_reply_next(qs->fs, buf, reply);
}

static const struct sl_filter_ops qla_ops = {
    .size = sizeof(qla_ops),
    .create_instance = qla_create,
    .destroy_instance = qla_destroy,
    .new_session = qla_new_session,
    .free_session = qla_free_session,
    .route_query = qla_route_query,
    .client_reply = qla_client_reply,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "qlafilter",
    .version = "1.0.0",
    .description = "Query log: statements to per-session or unified files",
    .params = qla_params,
    .ops = &qla_ops,
})
