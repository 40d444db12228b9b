/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /v1/sluice/queries: the query digests merged from every worker
 * (digest.c), sorted and filtered by query parameters; DELETE empties
 * them. docs/rest-api.md describes the parameters and attributes.
 *
 * Context: the libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_int.h"
#include "splice_int.h"
#include "stats.h"

static const char *const sort_keys[] = {
    "count", "total_time", "avg_time", "max_time", "min_time", "errors",
    "rows", "last_seen", "first_seen", NULL,
};
static int sort_by;     /* index in sort_keys; qsort has no context */

static double
sort_value(const struct sl_digest_row *r)
{
    switch (sort_by) {
    case 0: return (double)r->count;
    case 1: return (double)r->sum_ns;
    case 2: return r->samples ? (double)r->sum_ns / (double)r->samples : 0;
    case 3: return (double)r->max_ns;
    case 4: return (double)r->min_ns;
    case 5: return (double)r->errors;
    case 6: return (double)r->rows;
    case 7: return (double)r->last_seen_ms;
    default: return (double)r->first_seen_ms;
    }
}

/* Descending; ties by text so the order is stable between calls. */
static int
row_cmp(const void *a, const void *b)
{
    double x = sort_value(a), y = sort_value(b);

    if (x != y) {
        return x < y ? 1 : -1;
    }
    return strcmp(((const struct sl_digest_row *)a)->text,
                  ((const struct sl_digest_row *)b)->text);
}

static json_t *
iso_time(uint64_t ms)
{
    char buf[64];
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ".%03uZ",
             (unsigned)(ms % 1000));
    return json_string(buf);
}

static json_t *
row_json(struct admin_req *r, const struct sl_digest_row *d)
{
    struct sl_hist h = {.count = d->samples, .sum_ns = d->sum_ns};
    char id[32];
    json_t *hist = json_array();
    json_t *attrs;

    memcpy(h.bucket, d->hist, sizeof(h.bucket));
    for (int b = 0; b < SL_HIST_BUCKETS; b++) {
        json_array_append_new(hist, json_integer((json_int_t)d->hist[b]));
    }
    snprintf(id, sizeof(id), "%016llx", (unsigned long long)d->key);
    attrs = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:f, s:f, s:f, "
        "s:f, s:f, s:f, s:f, s:o}",
        "digest_text", d->text, "user", d->user, "database", d->db,
        "service", d->service, "count", (json_int_t)d->count,
        "errors", (json_int_t)d->errors, "rows_sent", (json_int_t)d->rows,
        "samples", (json_int_t)d->samples,
        "first_seen", iso_time(d->first_seen_ms),
        "last_seen", iso_time(d->last_seen_ms),
        "total_time", (double)d->sum_ns / 1e9,
        "min_time", (double)d->min_ns / 1e9,
        "max_time", (double)d->max_ns / 1e9,
        "avg_time", d->samples ? (double)d->sum_ns / 1e9 /
                                     (double)d->samples : 0.0,
        "p50", sl__hist_quantile(&h, 0.50, d->min_ns, d->max_ns),
        "p95", sl__hist_quantile(&h, 0.95, d->min_ns, d->max_ns),
        "p99", sl__hist_quantile(&h, 0.99, d->min_ns, d->max_ns),
        "histogram", hist);
    return json_pack("{s:s, s:s, s:o, s:{s:o}}", "id", id, "type", "queries",
                     "attributes", attrs, "links", "self",
                     sl__admin_link(r, "sluice/queries"));
}

static bool
keep(struct admin_req *r, const struct sl_digest_row *d)
{
    const char *svc = sl__admin_query(r, "service");
    const char *user = sl__admin_query(r, "user");
    const char *db = sl__admin_query(r, "database");
    const char *match = sl__admin_query(r, "match");

    return (svc == NULL || strcmp(svc, d->service) == 0) &&
           (user == NULL || strcmp(user, d->user) == 0) &&
           (db == NULL || strcmp(db, d->db) == 0) &&
           (match == NULL || strcasestr(d->text, match) != NULL);
}

static struct admin_resp
queries_get(struct admin_req *r)
{
    const char *sort = sl__admin_query(r, "sort");
    const char *limit_s = sl__admin_query(r, "limit");
    long long limit = -1;
    struct sl_digest_snapshot s;
    json_t *data;
    size_t shown = 0;

    sort_by = 1;
    if (sort != NULL) {
        for (sort_by = 0; sort_keys[sort_by] && strcmp(sort_keys[sort_by],
                                                       sort); sort_by++) {
        }
        if (sort_keys[sort_by] == NULL) {
            return sl__admin_error(400, "unknown sort key '%.64s' (count, "
                               "total_time, avg_time, max_time, min_time, "
                               "errors, rows, last_seen, first_seen)", sort);
        }
    }
    if (limit_s != NULL) {
        char *end;

        limit = strtoll(limit_s, &end, 10);
        if (*limit_s == '\0' || *end != '\0' || limit < 0) {
            return sl__admin_error(400, "limit must be a number >= 0, not "
                               "'%.64s'", limit_s);
        }
    }
    if (!sl__stats_cfg.digests) {
        return sl__admin_error(409, "query digests are off (query_digests="
                           "false)");
    }
    if (sl__digest_snapshot(&s) < 0) {
        return sl__admin_error(503, "workers did not answer");
    }
    qsort(s.rows, s.n, sizeof(*s.rows), row_cmp);
    data = json_array();
    for (size_t i = 0; i < s.n && (limit < 0 || (long long)shown < limit);
         i++) {
        if (keep(r, &s.rows[i])) {
            json_array_append_new(data, row_json(r, &s.rows[i]));
            shown++;
        }
    }
    {
        json_t *doc = json_pack(
            "{s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:{s:o}}", "data",
            data, "meta", "total", (json_int_t)s.n, "entries",
            (json_int_t)s.entries, "evictions", (json_int_t)s.evictions,
            "dropped_samples", (json_int_t)s.dropped,
            "untracked_executes", (json_int_t)s.untracked, "max_entries",
            (json_int_t)sl__stats_cfg.max_entries, "links", "self",
            sl__admin_link(r, "sluice/queries"));
        uint64_t kf_total;
        int64_t kf_now;

        /* Kernel-forwarded sessions are absent from the table (their
         * statements never reach Sluice): say how many there were. */
        sl__splice_counts(&kf_total, &kf_now);
        json_object_set_new(json_object_get(doc, "meta"),
                            "kernel_forwarded_sessions",
                            json_pack("{s:I, s:I}", "current",
                                      (json_int_t)kf_now, "total",
                                      (json_int_t)kf_total));
        sl__digest_snapshot_free(&s);
        return sl__admin_ok(doc);
    }
}

/* GET or DELETE /v1/sluice/queries. */
struct admin_resp
sl__rest_queries(struct admin_req *r)
{
    if (strcmp(r->method, "GET") == 0) {
        return queries_get(r);
    }
    if (strcmp(r->method, "DELETE") == 0) {
        if (sl__digest_reset() < 0) {
            return sl__admin_error(503, "workers did not answer");
        }
        return sl__admin_no_content();
    }
    return sl__admin_error(405, "/v1/sluice/queries takes GET or DELETE");
}
