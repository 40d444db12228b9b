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
#include <strings.h>
#include <unistd.h>

#include <sluice/router.h>
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

/* This scrape is in OpenMetrics 1.0 (else the text format 0.0.4). One
 * scrape at a time per libmicrohttpd thread. */
static _Thread_local bool om;

/* Counters whose name without _total is a gauge's: OpenMetrics names a
 * counter family without the suffix, so these would clash; they are
 * "unknown" there, under their full name (the series are the same). */
static const char *const om_clash[] = {
    "sluice_server_connections_total", "sluice_service_sessions_total",
    "sluice_listener_connections_total",
};

static void
family(FILE *f, const char *name, const char *type, const char *help)
{
    size_t n = strlen(name);

    if (om && strcmp(type, "counter") == 0) {
        for (size_t i = 0; i < SL_ARRAY_LEN(om_clash); i++) {
            if (strcmp(name, om_clash[i]) == 0) {
                fprintf(f, "# HELP %s %s\n# TYPE %s unknown\n", name, help,
                        name);
                return;
            }
        }
        if (n > 6 && strcmp(name + n - 6, "_total") == 0) {
            n -= 6;
        }
    }
    fprintf(f, "# HELP %.*s %s\n# TYPE %.*s %s\n", (int)n, name, help,
            (int)n, name, type);
}

/* q of the best media range in an Accept header matching want ("a/b"),
 * or -1. "a/ *" and "* / *" (no spaces) match with wild=true. */
static double
accept_q(const char *accept, const char *want, bool wild)
{
    double best = -1;
    const char *p = accept;

    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        char item[256];
        char *semi;
        char *type;
        double q = 1.0;

        if (len >= sizeof(item)) {
            len = sizeof(item) - 1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        p = end != NULL ? end + 1 : NULL;
        semi = strchr(item, ';');
        if (semi != NULL) {
            char *qp = strstr(semi, "q=");

            if (qp != NULL && (qp[-1] == ';' || qp[-1] == ' ')) {
                q = strtod(qp + 2, NULL);
            }
            *semi = '\0';
        }
        type = item;
        while (*type == ' ' || *type == '\t') {
            type++;
        }
        for (char *t = type + strlen(type); t > type && t[-1] == ' ';) {
            *--t = '\0';
        }
        if (strcasecmp(type, want) == 0 ||
            (wild && (strcmp(type, "*/*") == 0 ||
                      (strncasecmp(type, want, strcspn(want, "/") + 1) == 0
                       && strcmp(type + strcspn(want, "/") + 1, "*") == 0)))) {
            if (q > best) {
                best = q;
            }
        }
    }
    return best;
}

/* OpenMetrics when the client prefers it (Prometheus asks with q=1 for
 * OpenMetrics and q=0.5 for the text format). */
static bool
wants_openmetrics(const char *accept)
{
    double omq;

    if (accept == NULL) {
        return false;
    }
    omq = accept_q(accept, "application/openmetrics-text", false);
    return omq > 0 && omq >= accept_q(accept, "text/plain", true);
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
    family(f, "sluice_server_pooled_connections", "gauge",
           "Idle connections to the server in the backend connection pools");
    for (size_t i = 0; i < c->nservers; i++) {
        sample(f, "sluice_server_pooled_connections", "server",
               c->servers[i]->name, "%lld",
               (long long)atomic_load(&c->servers[i]->pool_size));
    }
    family(f, "sluice_server_pool_reused_total", "counter",
           "Connections to the server taken from a pool instead of opened");
    for (size_t i = 0; i < c->nservers; i++) {
        sample(f, "sluice_server_pool_reused_total", "server",
               c->servers[i]->name, "%llu", (unsigned long long)
               atomic_load(&c->servers[i]->pool_reused));
    }
    family(f, "sluice_server_routing_connections_refused_total", "counter",
           "Connections to the server not opened: max_routing_connections "
           "reached");
    for (size_t i = 0; i < c->nservers; i++) {
        sample(f, "sluice_server_routing_connections_refused_total",
               "server", c->servers[i]->name, "%llu", (unsigned long long)
               atomic_load(&c->servers[i]->routing_conns_refused));
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
    family(f, "sluice_server_received_bytes_total", "counter",
           "Bytes read from the server's connections (not those kernel "
           "forwarding moved)");
    for (size_t i = 0; i < c->nservers; i++) {
        uint64_t in, out;

        sl__stats_obj_bytes(&c->servers[i]->stats, &in, &out);
        sample(f, "sluice_server_received_bytes_total", "server",
               c->servers[i]->name, "%llu", (unsigned long long)in);
    }
    family(f, "sluice_server_sent_bytes_total", "counter",
           "Bytes written to the server's connections (not those kernel "
           "forwarding moved)");
    for (size_t i = 0; i < c->nservers; i++) {
        uint64_t in, out;

        sl__stats_obj_bytes(&c->servers[i]->stats, &in, &out);
        sample(f, "sluice_server_sent_bytes_total", "server",
               c->servers[i]->name, "%llu", (unsigned long long)out);
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
    family(f, "sluice_service_queries_total", "counter",
           "Text statements by kind (read, write, session, other)");
    for (size_t i = 0; i < c->nservices; i++) {
        uint64_t q[SL_STATS_Q_KINDS];

        if (!(c->services[i]->router->capabilities & SL_RCAP_QUERY_KINDS) &&
            !sl__stats_cfg.digests) {
            continue;   /* nobody counts them: no sample, not a 0 */
        }
        sl__stats_obj_queries(&c->services[i]->stats, q);
        for (int k = 0; k < SL_STATS_Q_KINDS; k++) {
            fprintf(f, "sluice_service_queries_total{service=\"");
            label_value(f, c->services[i]->name);
            fprintf(f, "\",kind=\"%s\"} %llu\n", sl__stats_q_names[k],
                    (unsigned long long)q[k]);
        }
    }
    family(f, "sluice_service_auth_failures_total", "counter",
           "Client logins refused, by reason");
    for (size_t i = 0; i < c->nservices; i++) {
        for (int r = 0; r < SL_AUTH_FAIL_COUNT; r++) {
            fprintf(f, "sluice_service_auth_failures_total{service=\"");
            label_value(f, c->services[i]->name);
            fprintf(f, "\",reason=\"%s\"} %llu\n",
                    sl_auth_failure_name((enum sl_auth_failure)r),
                    (unsigned long long)atomic_load_explicit(
                        &c->services[i]->auth_failures[r],
                        memory_order_relaxed));
        }
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
    family(f, "sluice_monitor_operations_total", "counter",
           "Cluster operations the monitor ran (automatic or commanded), "
           "by operation and result");
    for (size_t i = 0; i < c->nmonitors; i++) {
        static const char *const ops[SL_MONITOR_OP_COUNT] = {
            "switchover", "failover", "rejoin"};

        for (int o = 0; o < SL_MONITOR_OP_COUNT; o++) {
            for (int ok = 1; ok >= 0; ok--) {
                fprintf(f, "sluice_monitor_operations_total{monitor=\"");
                label_value(f, c->monitors[i]->name);
                fprintf(f, "\",operation=\"%s\",result=\"%s\"} %llu\n",
                        ops[o], ok ? "ok" : "error",
                        (unsigned long long)atomic_load(
                            ok ? &c->monitors[i]->ops_ok[o]
                               : &c->monitors[i]->ops_failed[o]));
            }
        }
    }
    family(f, "sluice_monitor_errors_total", "counter",
           "Servers the monitor could not reach or query in a tick");
    for (size_t i = 0; i < c->nmonitors; i++) {
        sample(f, "sluice_monitor_errors_total", "monitor",
               c->monitors[i]->name, "%llu",
               (unsigned long long)atomic_load(&c->monitors[i]->errors));
    }
}

/* ---- workers ---- */

struct wjob {
    struct {
        bool answered;
        uint64_t queue;
        uint64_t zombies;
        uint64_t dcbs;
        uint64_t busy_us;
        uint64_t idle_us;
        uint64_t timers_run;
        uint64_t timer_lag_us;
        uint64_t events;
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
    j->w[i].busy_us = w->busy_us;
    j->w[i].idle_us = w->idle_us;
    j->w[i].timers_run = w->timers_run;
    j->w[i].timer_lag_us = w->timer_lag_us;
    j->w[i].events = w->events;
}

/* Counters in microseconds, printed in seconds. */
static void
worker_loop_metrics(FILE *f, const struct wjob *j, int n)
{
    static const char *const names[5][3] = {
        {"sluice_worker_busy_seconds_total", "counter",
         "Time the worker's event loop spent working (not in epoll_wait)"},
        {"sluice_worker_idle_seconds_total", "counter",
         "Time the worker's event loop spent waiting in epoll_wait"},
        {"sluice_worker_timers_total", "counter",
         "Timer callbacks the worker ran"},
        {"sluice_worker_timer_lag_seconds_total", "counter",
         "Loop lag: how late the worker ran its timers past their "
         "deadlines, summed (divide by sluice_worker_timers_total)"},
        {"sluice_worker_events_total", "counter",
         "Events epoll reported for the worker's connections and "
         "listeners"},
    };

    for (int k = 0; k < 5; k++) {
        family(f, names[k][0], names[k][1], names[k][2]);
        for (int i = 0; i < n && i < 256; i++) {
            if (!j->w[i].answered) {
                continue;
            }
            if (k == 2 || k == 4) {
                fprintf(f, "%s{worker=\"%d\"} %llu\n", names[k][0], i,
                        (unsigned long long)(k == 2 ? j->w[i].timers_run
                                                    : j->w[i].events));
            } else {
                uint64_t us = k == 0 ? j->w[i].busy_us
                              : k == 1 ? j->w[i].idle_us
                                       : j->w[i].timer_lag_us;

                fprintf(f, "%s{worker=\"%d\"} %.6f\n", names[k][0], i,
                        (double)us / 1e6);
            }
        }
    }
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
    worker_loop_metrics(f, j, n);
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

    om = wants_openmetrics(sl__admin_header(r, "Accept"));
    if (f == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    process_metrics(f);
    server_metrics(f, sl__config);
    service_metrics(f, sl__config);
    worker_metrics(f);
    digest_metrics(f);
    if (om) {
        fputs("# EOF\n", f);
    }
    fclose(f);
    return (struct admin_resp){
        .status = 200, .text = text,
        .ctype = om ? "application/openmetrics-text; version=1.0.0; "
                      "charset=utf-8"
                    : "text/plain; version=0.0.4; charset=utf-8"};
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
