/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topfilter: the N slowest statements of each session, as in MaxScale.
 *
 * Each COM_QUERY that passes `match`/`exclude` and the `user`/`source`
 * restrictions is timed from the moment it is routed to the end of its
 * answer. The session keeps the `count` slowest in a sorted array; when it
 * closes, the report goes to <filebase>.<session id>:
 *
 *   Top 10 longest running queries in session.
 *   ==========================================
 *
 *   Time (sec) | Query
 *   -----------+------------------------------------------------------
 *        0.812 | SELECT SLEEP(0.8)
 *   ...
 *   Session started / Connection from / Username / totals
 *
 * Context: per session state only.
 */
#define SL_LOG_TAG "topfilter"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/buf.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/session.h>

#include "fltutil.h"

#define TOP_SQL_MAX 2048   /* statements are truncated in the report */

static const struct sl_param_spec top_params[] = {
    {"count", SL_PARAM_COUNT, "10", 0, NULL, "Statements to report"},
    {"filebase", SL_PARAM_STRING, NULL, SL_PARAM_F_MANDATORY, NULL,
     "Path prefix of the report files"},
    {"match", SL_PARAM_REGEX, NULL, 0, NULL, "Time only matching statements"},
    {"exclude", SL_PARAM_REGEX, NULL, 0, NULL, "Do not time these"},
    {"options", SL_PARAM_ENUM_MASK, "", 0, flt_regex_options,
     "Pattern options"},
    {"user", SL_PARAM_STRING, NULL, 0, NULL, "Only this user's sessions"},
    {"source", SL_PARAM_STRING, NULL, 0, NULL, "Only this client host"},
    SL_PARAM_END,
};

struct top_instance {
    char name[128];
    char filebase[4096];
    size_t count;
    struct flt_regex match, exclude;
    struct flt_who who;
};

struct top_entry {
    int64_t us;
    char *sql;
};

struct top_session {
    struct top_instance *inst;
    struct sl_session *ses;
    struct sl_filter_session *fs;
    pcre2_match_data *md;
    int active;
    struct top_entry *top;   /* [inst->count], slowest first */
    size_t ntop;
    char *pending;           /* the statement being timed */
    int64_t pending_start;
    time_t started;
    int64_t started_us;
    uint64_t statements;
    int64_t total_us;
};

static void *
top_create(const char *name, const struct sl_params *p)
{
    struct top_instance *inst = calloc(1, sizeof(*inst));
    unsigned opts = (unsigned)sl_params_enum_mask(p, "options");

    if (inst == NULL) {
        return NULL;
    }
    snprintf(inst->name, sizeof(inst->name), "%s", name);
    snprintf(inst->filebase, sizeof(inst->filebase), "%s",
             sl_params_string(p, "filebase"));
    inst->count = (size_t)sl_params_count(p, "count");
    flt_who_init(&inst->who, p);
    if (inst->count == 0 || inst->count > 10000 ||
        flt_regex_init(&inst->match, p, "match", opts, name) != 0 ||
        flt_regex_init(&inst->exclude, p, "exclude", opts, name) != 0) {
        if (inst->count == 0 || inst->count > 10000) {
            sl_log_error("filter '%s': count must be 1..10000", name);
        }
        flt_regex_free(&inst->match);
        free(inst);
        return NULL;
    }
    return inst;
}

static void
top_destroy(void *instance)
{
    struct top_instance *inst = instance;

    flt_regex_free(&inst->match);
    flt_regex_free(&inst->exclude);
    free(inst);
}

static void *
top_new_session(void *instance, struct sl_session *ses,
                struct sl_filter_session *fs)
{
    struct top_instance *inst = instance;
    struct top_session *ts = calloc(1, sizeof(*ts));

    if (ts == NULL) {
        return NULL;
    }
    ts->inst = inst;
    ts->ses = ses;
    ts->fs = fs;
    ts->active = -1;
    ts->started = time(NULL);
    ts->started_us = flt_now_us();
    ts->md = pcre2_match_data_create(16, NULL);
    ts->top = calloc(inst->count, sizeof(*ts->top));
    if (ts->md == NULL || ts->top == NULL) {
        pcre2_match_data_free(ts->md);
        free(ts->top);
        free(ts);
        return NULL;
    }
    return ts;
}

/* Keep the statement if it is among the slowest; takes sql. */
static void
top_insert(struct top_session *ts, char *sql, int64_t us)
{
    size_t n = ts->inst->count;
    size_t i = ts->ntop;

    if (ts->ntop == n) {
        if (us <= ts->top[n - 1].us) {
            free(sql);
            return;
        }
        free(ts->top[n - 1].sql);
        i = n - 1;
    } else {
        ts->ntop++;
    }
    while (i > 0 && ts->top[i - 1].us < us) {
        ts->top[i] = ts->top[i - 1];
        i--;
    }
    ts->top[i].us = us;
    ts->top[i].sql = sql;
}

static void
top_report(struct top_session *ts)
{
    struct top_instance *inst = ts->inst;
    char path[4200];
    char date[64];
    struct tm tm;
    double total = (double)ts->total_us / 1e6;
    FILE *fp;

    snprintf(path, sizeof(path), "%s.%llu", inst->filebase,
             (unsigned long long)sl_session_id(ts->ses));
    fp = fopen(path, "w");
    if (fp == NULL) {
        sl_log_error("filter '%s': cannot write '%s': %s", inst->name, path,
                     strerror(errno));
        return;
    }
    fprintf(fp, "Top %zu longest running queries in session.\n", inst->count);
    fprintf(fp, "==========================================\n\n");
    fprintf(fp, "Time (sec) | Query\n");
    fprintf(fp, "-----------+-----------------------------------------------"
                "------------------\n");
    for (size_t i = 0; i < ts->ntop; i++) {
        fprintf(fp, "%10.3f |  %s\n", (double)ts->top[i].us / 1e6,
                ts->top[i].sql);
    }
    fprintf(fp, "-----------+-----------------------------------------------"
                "------------------\n");
    localtime_r(&ts->started, &tm);
    strftime(date, sizeof(date), "%a %b %e %H:%M:%S %Y", &tm);
    fprintf(fp, "\n\nSession started %s\n", date);
    fprintf(fp, "Connection from %s\n", sl_session_remote(ts->ses));
    fprintf(fp, "Username        %s\n", sl_session_user(ts->ses));
    fprintf(fp, "\nTotal of %llu statements executed.\n",
            (unsigned long long)ts->statements);
    fprintf(fp, "Total statement execution time   %10.3f seconds\n", total);
    fprintf(fp, "Average statement execution time %10.3f seconds\n",
            ts->statements ? total / (double)ts->statements : 0.0);
    fprintf(fp, "Total connection time            %10.3f seconds\n",
            (double)(flt_now_us() - ts->started_us) / 1e6);
    fclose(fp);
}

static void
top_free_session(void *fsession)
{
    struct top_session *ts = fsession;

    if (ts->active == 1) {
        top_report(ts);
    }
    for (size_t i = 0; i < ts->ntop; i++) {
        free(ts->top[i].sql);
    }
    free(ts->top);
    free(ts->pending);
    pcre2_match_data_free(ts->md);
    free(ts);
}

static int
top_route_query(void *fsession, struct sl_buf *buf)
{
    struct top_session *ts = fsession;
    const char *sql;
    size_t len;

    if (ts->active < 0) {
        ts->active = flt_who_match(&ts->inst->who, ts->ses);
    }
    if (ts->active && (sql = flt_query_sql(buf, &len)) != NULL &&
        flt_wanted(&ts->inst->match, &ts->inst->exclude, ts->md, sql, len)) {
        if (len > TOP_SQL_MAX) {
            len = TOP_SQL_MAX;
        }
        free(ts->pending);
        ts->pending = strndup(sql, len);
        ts->pending_start = flt_now_us();
    }
    return sl_filter_route_next(ts->fs, buf);
}

static int
top_client_reply(void *fsession, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    struct top_session *ts = fsession;

    if (ts->pending != NULL && reply->complete) {
        int64_t us = flt_now_us() - ts->pending_start;

        ts->statements++;
        ts->total_us += us;
        top_insert(ts, ts->pending, us);
        ts->pending = NULL;
    }
    return sl_filter_reply_next(ts->fs, buf, reply);
}

static const struct sl_filter_ops top_ops = {
    .size = sizeof(top_ops),
    .create_instance = top_create,
    .destroy_instance = top_destroy,
    .new_session = top_new_session,
    .free_session = top_free_session,
    .route_query = top_route_query,
    .client_reply = top_client_reply,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "topfilter",
    .version = "1.0.0",
    .description = "Reports the N slowest statements of each session",
    .params = top_params,
    .ops = &top_ops,
})
