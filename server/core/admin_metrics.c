/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /metrics: the Prometheus text exposition format 0.0.4. Every family
 * has # HELP and # TYPE; names have the sluice_ prefix and base units
 * (seconds, bytes), counters end in _total. docs/metrics.md lists them.
 *
 * Configuration objects are read directly (their counters are atomics,
 * their histograms per-worker slots, stats.c); worker figures come from a
 * job posted to every worker.
 *
 * Context: the libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sluice/server.h>

#include "admin_int.h"
#include "config_int.h"
#include "dcb_int.h"
#include "stats.h"
#include "worker_int.h"

#define WORKER_TIMEOUT_MS 2000

struct out {
    FILE *f;
};

/* A label value, escaped as the format wants (\\, \", \n). */
static void
label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') {
            fputc('\\', f);
            fputc(*s, f);
        } else if (*s == '\n') {
            fputs("\\n", f);
        } else {
            fputc(*s, f);
        }
    }
}

static void
family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{label="value"} number */
static void
sample(FILE *f, const char *name, const char *label, const char *value,
       const char *fmt, ...) SL_PRINTF(5, 6);

static void
sample(FILE *f, const char *name, const char *label, const char *value,
       const char *fmt, ...)
{
    va_list ap;

    fputs(name, f);
    if (label != NULL) {
        fprintf(f, "{%s=\"", label);
        label_value(f, value);
        fputs("\"}", f);
    }
    fputc(' ', f);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
}

static void
histogram(FILE *f, const char *name, const char *label, const char *value,
          const struct sl_hist *h)
{
    uint64_t cum = 0;

    for (int b = 0; b < SL_HIST_BUCKETS; b++) {
        cum += h->bucket[b];
        fprintf(f, "%s_bucket{%s=\"", name, label);
        label_value(f, value);
        fprintf(f, "\",le=\"%s\"} %llu\n",
                b < SL_HIST_BUCKETS - 1 ? sl__hist_le_str[b] : "+Inf",
                (unsigned long long)cum);
    }
    fprintf(f, "%s_sum{%s=\"", name, label);
    label_value(f, value);
    fprintf(f, "\"} %.9f\n", (double)h->sum_ns / 1e9);
    fprintf(f, "%s_count{%s=\"", name, label);
    label_value(f, value);
    fprintf(f, "\"} %llu\n", (unsigned long long)cum);
}

/* ---- process ---- */

static void
process_metrics(FILE *f)
{
    long pages = 0;
    long rss = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    DIR *d = opendir("/proc/self/fd");
    long fds = 0;

    if (statm != NULL) {
        if (fscanf(statm, "%ld %ld", &pages, &rss) != 2) {
            rss = 0;
        }
        fclose(statm);
    }
    if (d != NULL) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            fds += e->d_name[0] != '.';
        }
        closedir(d);
        fds--;   /* the directory's own */
    }
    family(f, "sluice_build_info", "gauge",
           "Always 1; the version is in its label");
    sample(f, "sluice_build_info", "version", SLUICE_VERSION, "1");
    family(f, "sluice_uptime_seconds", "gauge",
           "Seconds since the daemon started");
    sample(f, "sluice_uptime_seconds", NULL, NULL, "%llu",
           (unsigned long long)sl__admin_uptime());
    family(f, "sluice_process_resident_memory_bytes", "gauge",
           "Resident set size");
    sample(f, "sluice_process_resident_memory_bytes", NULL, NULL, "%lld",
           (long long)rss * sysconf(_SC_PAGESIZE));
    family(f, "sluice_process_open_fds", "gauge", "Open file descriptors");
    sample(f, "sluice_process_open_fds", NULL, NULL, "%ld", fds);
}

/* ---- servers ---- */

static const struct {
    uint32_t bit;
    const char *name;
} state_bits[] = {
    {SL_SRV_RUNNING, "running"}, {SL_SRV_MASTER, "master"},
    {SL_SRV_SLAVE, "slave"}, {SL_SRV_MAINT, "maintenance"},
    {SL_SRV_DRAINING, "draining"}, {SL_SRV_AUTH_ERROR, "auth_error"},
    {SL_SRV_RELAY, "relay"}, {SL_SRV_SYNCED, "synced"},
    {SL_SRV_MOVING, "primary_moving"},
};

/* gtid_current_pos "D-S-N,D-S-N": one sample per domain. */
static void
gtid_samples(FILE *f, const struct sl_server *s)
{
    char pos[256];
    char *save = NULL;

    sl_server_gtid_pos(s, pos, sizeof(pos));
    for (char *g = strtok_r(pos, ",", &save); g != NULL;
         g = strtok_r(NULL, ",", &save)) {
        unsigned long long dom, srv, seq;

        while (*g == ' ') {
            g++;
        }
        if (sscanf(g, "%llu-%llu-%llu", &dom, &srv, &seq) == 3) {
            fprintf(f, "sluice_server_gtid_sequence{server=\"");
            label_value(f, s->name);
            fprintf(f, "\",domain=\"%llu\"} %llu\n", dom, seq);
        }
    }
}

static void
server_metrics(FILE *f, const struct sl_config *c)
{
    family(f, "sluice_server_state", "gauge",
           "1 when the server has the state named by the label");
    for (size_t i = 0; i < c->nservers; i++) {
        uint32_t st = sl_server_status(c->servers[i]);

        for (size_t k = 0; k < SL_ARRAY_LEN(state_bits); k++) {
            fprintf(f, "sluice_server_state{server=\"");
            label_value(f, c->servers[i]->name);
            fprintf(f, "\",state=\"%s\"} %d\n", state_bits[k].name,
                    (st & state_bits[k].bit) != 0);
        }
    }
    family(f, "sluice_server_connections", "gauge",
           "Current connections from Sluice to the server");
    for (size_t i = 0; i < c->nservers; i++) {
        sample(f, "sluice_server_connections", "server", c->servers[i]->name,
               "%lld", (long long)sl_server_connections(c->servers[i]));
    }
    family(f, "sluice_server_connections_total", "counter",
           "Connections opened to the server");
    for (size_t i = 0; i < c->nservers; i++) {
        sample(f, "sluice_server_connections_total", "server",
               c->servers[i]->name, "%llu", (unsigned long long)
               sl_server_total_connections(c->servers[i]));
    }
    family(f, "sluice_server_routed_total", "counter",
           "Commands routed to the server, by kind (read or write)");
    for (size_t i = 0; i < c->nservers; i++) {
        struct sl_server *s = c->servers[i];

        fprintf(f, "sluice_server_routed_total{server=\"");
        label_value(f, s->name);
        fprintf(f, "\",kind=\"read\"} %llu\n", (unsigned long long)
                atomic_load(&s->routed_reads));
        fprintf(f, "sluice_server_routed_total{server=\"");
        label_value(f, s->name);
        fprintf(f, "\",kind=\"write\"} %llu\n", (unsigned long long)
                atomic_load(&s->routed_writes));
    }
    family(f, "sluice_server_replication_lag_seconds", "gauge",
           "Replication lag the monitor measured (absent when unknown)");
    for (size_t i = 0; i < c->nservers; i++) {
        int64_t lag = sl_server_replication_lag(c->servers[i]);

        if (lag != SL_SERVER_LAG_UNKNOWN) {
            sample(f, "sluice_server_replication_lag_seconds", "server",
                   c->servers[i]->name, "%lld", (long long)lag);
        }
    }
    family(f, "sluice_server_gtid_sequence", "gauge",
           "Sequence number of gtid_current_pos, per replication domain");
    for (size_t i = 0; i < c->nservers; i++) {
        gtid_samples(f, c->servers[i]);
    }
    family(f, "sluice_server_response_seconds", "histogram",
           "Time from a command written to the server to the end of its "
           "answer");
    for (size_t i = 0; i < c->nservers; i++) {
        struct sl_hist h;
        uint64_t err;

        sl__stats_obj_read(&c->servers[i]->stats, &h, &err);
        histogram(f, "sluice_server_response_seconds", "server",
                  c->servers[i]->name, &h);
    }
    family(f, "sluice_server_response_errors_total", "counter",
           "Answers from the server that were errors");
    for (size_t i = 0; i < c->nservers; i++) {
        struct sl_hist h;
        uint64_t err;

        sl__stats_obj_read(&c->servers[i]->stats, &h, &err);
        sample(f, "sluice_server_response_errors_total", "server",
               c->servers[i]->name, "%llu", (unsigned long long)err);
    }
}

/* ---- services, listeners, monitors ---- */

static void
service_metrics(FILE *f, const struct sl_config *c)
{
    family(f, "sluice_service_sessions", "gauge", "Current client sessions");
    for (size_t i = 0; i < c->nservices; i++) {
        sample(f, "sluice_service_sessions", "service", c->services[i]->name,
               "%lld", (long long)atomic_load(&c->services[i]->sessions));
    }
    family(f, "sluice_service_sessions_total", "counter",
           "Client sessions started");
    for (size_t i = 0; i < c->nservices; i++) {
        sample(f, "sluice_service_sessions_total", "service",
               c->services[i]->name, "%llu", (unsigned long long)
               atomic_load(&c->services[i]->total_sessions));
    }
    family(f, "sluice_service_response_seconds", "histogram",
           "Time from a client's command entering the service to the end "
           "of the answer sent to the client");
    for (size_t i = 0; i < c->nservices; i++) {
        struct sl_hist h;
        uint64_t err;

        sl__stats_obj_read(&c->services[i]->stats, &h, &err);
        histogram(f, "sluice_service_response_seconds", "service",
                  c->services[i]->name, &h);
    }
    family(f, "sluice_service_response_errors_total", "counter",
           "Answers to clients that were errors");
    for (size_t i = 0; i < c->nservices; i++) {
        struct sl_hist h;
        uint64_t err;

        sl__stats_obj_read(&c->services[i]->stats, &h, &err);
        sample(f, "sluice_service_response_errors_total", "service",
               c->services[i]->name, "%llu", (unsigned long long)err);
    }
    family(f, "sluice_listener_connections", "gauge",
           "Current client connections");
    for (size_t i = 0; i < c->nlisteners; i++) {
        sample(f, "sluice_listener_connections", "listener",
               c->listeners[i]->name, "%lld",
               (long long)atomic_load(&c->listeners[i]->connections));
    }
    family(f, "sluice_listener_connections_total", "counter",
           "Client connections accepted");
    for (size_t i = 0; i < c->nlisteners; i++) {
        sample(f, "sluice_listener_connections_total", "listener",
               c->listeners[i]->name, "%llu", (unsigned long long)
               atomic_load(&c->listeners[i]->connections_total));
    }
    family(f, "sluice_monitor_ticks_total", "counter",
           "Monitoring rounds completed");
    for (size_t i = 0; i < c->nmonitors; i++) {
        sample(f, "sluice_monitor_ticks_total", "monitor",
               c->monitors[i]->name, "%llu",
               (unsigned long long)atomic_load(&c->monitors[i]->ticks));
    }
}

/* ---- workers ---- */

struct wjob {
    struct {
        bool answered;
        uint64_t queue;
        uint64_t zombies;
        uint64_t dcbs;
    } w[256];
};

static void
wjob_on_worker(void *arg, int i)
{
    struct wjob *j = arg;
    struct sl_worker *w = sl_worker_current();
    uint64_t n = 0;

    if (i < 0 || i >= 256) {
        return;
    }
    pthread_mutex_lock(&w->dcb_lock);
    for (struct sl_dcb *d = w->dcbs; d != NULL; d = d->list_next) {
        n++;
    }
    pthread_mutex_unlock(&w->dcb_lock);
    j->w[i].answered = true;
    j->w[i].queue = w->evq->count;
    j->w[i].zombies = w->nzombies;
    j->w[i].dcbs = n;
}

static void
worker_metrics(FILE *f)
{
    struct wjob *j = calloc(1, sizeof(*j));
    int n = sl_worker_count();
    static const char *const names[3][2] = {
        {"sluice_worker_event_queue_length", "Events waiting in the queue"},
        {"sluice_worker_zombies", "Closed connections not freed yet"},
        {"sluice_worker_descriptors", "Connections the worker owns"},
    };

    if (j == NULL || sl__stats_on_workers(wjob_on_worker, j, free,
                                          WORKER_TIMEOUT_MS) < 0) {
        family(f, "sluice_worker_up", "gauge",
               "1 when the worker answered this scrape");
        return;
    }
    family(f, "sluice_worker_up", "gauge",
           "1 when the worker answered this scrape");
    for (int i = 0; i < n && i < 256; i++) {
        fprintf(f, "sluice_worker_up{worker=\"%d\"} %d\n", i,
                j->w[i].answered);
    }
    for (int k = 0; k < 3; k++) {
        family(f, names[k][0], "gauge", names[k][1]);
        for (int i = 0; i < n && i < 256; i++) {
            if (j->w[i].answered) {
                fprintf(f, "%s{worker=\"%d\"} %llu\n", names[k][0], i,
                        (unsigned long long)(k == 0 ? j->w[i].queue
                                             : k == 1 ? j->w[i].zombies
                                                      : j->w[i].dcbs));
            }
        }
    }
    free(j);
}

static void
digest_metrics(FILE *f)
{
    struct sl_digest_snapshot s;

    if (!sl__stats_cfg.digests || sl__digest_snapshot(&s) < 0) {
        return;
    }
    family(f, "sluice_query_digests", "gauge",
           "Query digest entries kept (all workers, before merging)");
    sample(f, "sluice_query_digests", NULL, NULL, "%llu",
           (unsigned long long)s.entries);
    family(f, "sluice_query_digest_evictions_total", "counter",
           "Digest entries evicted to stay within digest_max_entries "
           "(since start or the last reset)");
    sample(f, "sluice_query_digest_evictions_total", NULL, NULL, "%llu",
           (unsigned long long)s.evictions);
    sl__digest_snapshot_free(&s);
}

struct admin_resp
sl__rest_metrics_get(struct admin_req *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    (void)r;
    if (f == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    process_metrics(f);
    server_metrics(f, sl__config);
    service_metrics(f, sl__config);
    worker_metrics(f);
    digest_metrics(f);
    fclose(f);
    return (struct admin_resp){
        .status = 200, .text = text,
        .ctype = "text/plain; version=0.0.4; charset=utf-8"};
}

json_t *
sl__admin_hist_json(struct sl_obj_slots *const *slotsp)
{
    struct sl_hist h;
    uint64_t err;
    json_t *buckets = json_array();
    uint64_t cum = 0;

    sl__stats_obj_read(slotsp, &h, &err);
    for (int b = 0; b < SL_HIST_BUCKETS; b++) {
        cum += h.bucket[b];
        json_array_append_new(buckets, json_pack(
            "{s:s, s:I}", "le",
            b < SL_HIST_BUCKETS - 1 ? sl__hist_le_str[b] : "+Inf",
            "count", (json_int_t)cum));
    }
    return json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:o}",
                     "count", (json_int_t)h.count, "errors", (json_int_t)err,
                     "sum", (double)h.sum_ns / 1e9,
                     "p50", sl__hist_quantile(&h, 0.50, 0, 0),
                     "p95", sl__hist_quantile(&h, 0.95, 0, 0),
                     "p99", sl__hist_quantile(&h, 0.99, 0, 0),
                     "buckets", buckets);
}
