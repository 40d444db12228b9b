/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the response-time histograms (stats.c) and the query digests
 * (digest.c) share (stats.h): their configuration, the histogram's bucket
 * bounds, and running a function on every worker and waiting for it (the
 * admin side of both). A unit of its own so that stats.c, which feeds
 * digest.c on the hot path, and digest.c do not call each other.
 *
 * Context: sl__stats_configure on main before the workers start; the
 * tables are read-only; sl__stats_on_workers on the admin thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "stats"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include <sluice/params.h>
#include <sluice/worker.h>

#include "internal.h"
#include "stats.h"

struct sl_stats_config sl__stats_cfg = {true, true, 1000};

const uint64_t sl__hist_le_ns[SL_HIST_BUCKETS - 1] = {
    10000ULL, 25000ULL, 50000ULL, 100000ULL, 250000ULL, 500000ULL,
    1000000ULL, 2500000ULL, 5000000ULL, 10000000ULL, 25000000ULL,
    50000000ULL, 100000000ULL, 250000000ULL, 500000000ULL,
    1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL,
    30000000000ULL,
};
const char *const sl__hist_le_str[SL_HIST_BUCKETS - 1] = {
    "1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001",
    "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
    "2.5", "5", "10", "30",
};

void
sl__stats_configure(const struct sl_global *g)
{
    sl__stats_cfg.histograms = sl_params_bool(g->params,
                                              "latency_histograms");
    sl__stats_cfg.digests = sl_params_bool(g->params, "query_digests");
    sl__stats_cfg.max_entries =
        sl_params_count(g->params, "digest_max_entries");
}

/* ---- running a function on every worker ---- */

struct on_workers {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int pending;
    int refs;
    void (*fn)(void *arg, int worker);
    void *arg;
    void (*arg_free)(void *arg);
    bool abandoned;           /* the caller gave up: free arg at the end */
};

static void
ow_unref(struct on_workers *o)
{
    bool last;

    pthread_mutex_lock(&o->lock);
    last = --o->refs == 0;
    pthread_mutex_unlock(&o->lock);
    if (last) {
        if (o->abandoned && o->arg_free != NULL) {
            o->arg_free(o->arg);
        }
        pthread_mutex_destroy(&o->lock);
        pthread_cond_destroy(&o->cond);
        free(o);
    }
}

static void
ow_run(void *p)
{
    struct on_workers *o = p;

    o->fn(o->arg, sl_worker_index(sl_worker_current()));
    pthread_mutex_lock(&o->lock);
    o->pending--;
    pthread_cond_broadcast(&o->cond);
    pthread_mutex_unlock(&o->lock);
    ow_unref(o);
}

int
sl__stats_on_workers(void (*fn)(void *arg, int worker), void *arg,
                     void (*arg_free)(void *arg), int timeout_ms)
{
    struct on_workers *o = calloc(1, sizeof(*o));
    int n = sl_worker_count();
    struct timespec dl;
    int rc = 0;

    if (o == NULL) {
        return -1;
    }
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    o->fn = fn;
    o->arg = arg;
    o->arg_free = arg_free;
    o->refs = 1;
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&o->lock);
        o->refs++;
        o->pending++;
        pthread_mutex_unlock(&o->lock);
        if (sl_worker_post(sl_worker_get(i), ow_run, o) != 0) {
            pthread_mutex_lock(&o->lock);
            o->refs--;
            o->pending--;
            pthread_mutex_unlock(&o->lock);   /* stopping: its part is 0 */
        }
    }
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&o->lock);
    while (o->pending > 0) {
        if (pthread_cond_timedwait(&o->cond, &o->lock, &dl) == ETIMEDOUT) {
            break;
        }
    }
    if (o->pending > 0) {
        o->abandoned = true;
        rc = -1;
    }
    pthread_mutex_unlock(&o->lock);
    ow_unref(o);
    return rc;
}
