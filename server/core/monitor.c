/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Monitor accessors and the monitor runner: one thread per monitor.
 *
 *   sl__monitor_start -> thread: start() -> [tick(); ticks++; sleep]* ->
 *                                stop() -> exit
 *   sl__monitor_stop  -> set stop, wake the sleepers, join
 *
 * sl__monitors_start/stop do the same for every monitor of a
 * configuration (stop: one wake-up for all, then the joins). `running`
 * says whether a monitor has a thread, so monitors stopped through the
 * REST API are skipped and a monitor can be stopped and started again.
 *
 * The sleep is a condition-variable wait with a deadline on the monotonic
 * clock, so stopping never waits for the rest of a long monitor_interval.
 * One mutex/condvar pair serves all monitors: stop wakes them all at once
 * and nothing else signals it.
 *
 * Context: accessors from any thread; start/stop from the main thread,
 * or from the admin thread while the daemon runs.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "monitor"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sluice/log.h>
#include <sluice/monitor.h>

#include "internal.h"

static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond;
static pthread_once_t sleep_once = PTHREAD_ONCE_INIT;

const char *
sl_monitor_name(const struct sl_monitor *mon)
{
    return mon->name;
}

struct sl_server *const *
sl_monitor_servers(const struct sl_monitor *mon, size_t *count)
{
    if (count) {
        *count = mon->nservers;
    }
    return mon->servers;
}

const char *
sl_monitor_user(const struct sl_monitor *mon)
{
    return mon->user;
}

const char *
sl_monitor_password(const struct sl_monitor *mon)
{
    return mon->password;
}

const struct sl_params *
sl_monitor_params(const struct sl_monitor *mon)
{
    return mon->params;
}

uint64_t
sl_monitor_interval_ms(const struct sl_monitor *mon)
{
    return mon->interval_ms;
}

uint64_t
sl_monitor_connect_timeout_ms(const struct sl_monitor *m)
{
    return m->connect_timeout_ms;
}

uint64_t
sl_monitor_read_timeout_ms(const struct sl_monitor *mon)
{
    return mon->read_timeout_ms;
}

/* passive: read by every monitor thread, written by config load and the
 * admin thread. */
static atomic_bool passive;

bool
sl_monitor_passive(void)
{
    return atomic_load(&passive);
}

void
sl__monitor_set_passive(bool on)
{
    if (atomic_exchange(&passive, on) != on) {
        sl_log_notice("passive mode %s: monitors %s", on ? "on" : "off",
                      on ? "keep monitoring but do not change the cluster "
                           "(no failover, switchover, rejoin or read_only "
                           "enforcement)"
                         : "may change the cluster again");
    }
}

uint64_t
sl_monitor_ticks(const struct sl_monitor *mon)
{
    return atomic_load_explicit(&mon->ticks, memory_order_acquire);
}

void
sl_monitor_count_op(struct sl_monitor *mon, enum sl_monitor_op op, bool ok)
{
    if (mon == NULL || (unsigned)op >= SL_MONITOR_OP_COUNT) {
        return;
    }
    atomic_fetch_add_explicit(ok ? &mon->ops_ok[op] : &mon->ops_failed[op],
                              1, memory_order_relaxed);
}

void
sl_monitor_count_error(struct sl_monitor *mon)
{
    if (mon != NULL) {
        atomic_fetch_add_explicit(&mon->errors, 1, memory_order_relaxed);
    }
}

static void
init_cond(void)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&sleep_cond, &attr);
    pthread_condattr_destroy(&attr);
}

/* Sleep interval_ms, or less if the monitor is asked to stop. */
static void
sleep_interval(struct sl_monitor *m)
{
    struct timespec deadline;

    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += (time_t)(m->interval_ms / 1000);
    deadline.tv_nsec += (long)(m->interval_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&sleep_lock);
    while (!atomic_load(&m->stop)) {
        if (pthread_cond_timedwait(&sleep_cond, &sleep_lock, &deadline) ==
            ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&sleep_lock);
}

static void *
monitor_main(void *arg)
{
    struct sl_monitor *m = arg;
    const struct sl_monitor_ops *ops = m->ops;
    char tname[16];

    snprintf(tname, sizeof(tname), "mon-%.11s", m->name);
    pthread_setname_np(pthread_self(), tname);
    if (ops->start) {
        ops->start(m->instance);
    }
    while (!atomic_load(&m->stop)) {
        if (ops->tick) {
            ops->tick(m->instance);
        }
        atomic_fetch_add_explicit(&m->ticks, 1, memory_order_release);
        sleep_interval(m);
    }
    if (ops->stop) {
        ops->stop(m->instance);
    }
    return NULL;
}

int
sl__monitor_start(struct sl_monitor *m)
{
    sigset_t all;
    sigset_t old;
    int rc;

    if (m->running) {
        return 0;
    }
    pthread_once(&sleep_once, init_cond);
    /* Monitor threads never take signals: main sigwaits for them. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    atomic_store(&m->stop, false);
    rc = pthread_create(&m->thread, NULL, monitor_main, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        sl_log_error("cannot start a thread for monitor '%s': %s", m->name,
                     strerror(rc));
        return -rc;
    }
    m->running = true;
    sl_log_notice("started monitor '%s' (%zu servers, interval %llu ms)",
                  m->name, m->nservers, (unsigned long long)m->interval_ms);
    return 0;
}

/* Ask m to stop; the caller broadcasts and joins. */
static void
request_stop(struct sl_monitor *m)
{
    if (m->running) {
        atomic_store(&m->stop, true);
    }
}

static void
join(struct sl_monitor *m)
{
    if (m->running) {
        pthread_join(m->thread, NULL);
        m->running = false;
    }
}

void
sl__monitor_stop(struct sl_monitor *m)
{
    pthread_once(&sleep_once, init_cond);
    pthread_mutex_lock(&sleep_lock);
    request_stop(m);
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
    if (m->running) {
        join(m);
        sl_log_notice("stopped monitor '%s'", m->name);
    }
}

int
sl__monitors_start(struct sl_config *cfg)
{
    int rc = 0;

    for (size_t i = 0; i < cfg->nmonitors && rc == 0; i++) {
        rc = sl__monitor_start(cfg->monitors[i]);
    }
    if (rc != 0) {
        sl__monitors_stop(cfg);
    }
    return rc;
}

/* Stop every running monitor at once: one broadcast, then the joins. */
void
sl__monitors_stop(struct sl_config *cfg)
{
    pthread_once(&sleep_once, init_cond);
    pthread_mutex_lock(&sleep_lock);
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        request_stop(cfg->monitors[i]);
    }
    pthread_cond_broadcast(&sleep_cond);
    pthread_mutex_unlock(&sleep_lock);
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        join(cfg->monitors[i]);
    }
}
