/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sluice daemon: sl_daemon_main(), the one exported function that is
 * not module SDK (server/daemon/sluice.c's main() calls it).
 *
 *   parse options -> block signals -> log init -> load configuration
 *   -> workers init -> listeners start -> monitors start -> workers start
 *   -> REST API -> pid file -> READY=1 -> signal loop -> (SIGTERM/SIGINT)
 *   STOPPING=1 -> listeners stop -> drain -> monitors stop -> workers stop
 *   -> free -> exit 0
 *
 * Sluice always runs in the foreground (no fork): systemd, containers and
 * test scripts all supervise a foreground process better than a daemon.
 * Under systemd (Type=notify, NOTIFY_SOCKET set) it reports readiness,
 * reloads and stopping, and with WatchdogSec sends keep-alives only while
 * every worker answers (see struct watchdog); without NOTIFY_SOCKET the
 * sd_notify() calls do nothing.
 *
 * Signals: SIGTERM, SIGINT and SIGHUP are blocked before any thread exists,
 * so every thread inherits the mask and only the main thread receives them,
 * synchronously through sigtimedwait(): no async-signal-safety puzzles
 * (the timeout paces the watchdog checks). SIGHUP reopens the log
 * (rotation); SIGPIPE is ignored (writes report EPIPE).
 *
 * Context: main thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "main"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/worker.h>

#include "sluice_revision.h"   /* generated: cmake/revision.cmake */

#include "admin_int.h"
#include "config_int.h"
#include "dcb_int.h"
#include "history.h"
#include "internal.h"
#include "modcmd_int.h"
#include "module_int.h"
#include "splice_int.h"
#include "worker_int.h"

#define DEFAULT_CONFIG "/etc/sluice.cnf"

struct options {
    const char *config;
    const char *module_dir;
    const char *log_file;     /* NULL: decided by the configuration */
    bool log_stdout;
    int log_level;            /* -1: from the configuration */
    const char *pid_file;
    bool check;
};

static void
usage(FILE *out)
{
    fprintf(out,
            "Usage: sluice [options] [CONFIG]\n"
            "\n"
            "Options:\n"
            "  -f, --config FILE      configuration file (default "
            DEFAULT_CONFIG ")\n"
            "  -c, --config-check     validate the configuration and exit\n"
            "      --module-dir DIR   load modules from DIR\n"
            "      --log-file FILE    log to FILE\n"
            "      --log-stdout       log to standard output\n"
            "      --log-level LEVEL  error|warning|notice|info|debug\n"
            "      --pid-file FILE    write the process id to FILE\n"
            "  -d, --nodaemon         accepted; sluice never forks\n"
            "  -V, --version          print the version and exit\n"
            "  -h, --help             print this help and exit\n");
}

static int
parse_level(const char *s)
{
    static const char *const names[] = {"error", "warning", "notice",
                                        "info", "debug"};

    for (int i = 0; i < (int)SL_ARRAY_LEN(names); i++) {
        if (strcasecmp(s, names[i]) == 0) {
            return i;
        }
    }
    return strcasecmp(s, "warn") == 0 ? SL_LOG_WARN : -1;
}

/* 0 to go on, or the exit status + 1 (help, version, usage errors). */
static int
parse_options(int argc, char **argv, struct options *o)
{
    enum { O_MODDIR = 256, O_LOGFILE, O_LOGSTDOUT, O_LOGLEVEL, O_PIDFILE };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'f'},
        {"config-check", no_argument, NULL, 'c'},
        {"module-dir", required_argument, NULL, O_MODDIR},
        {"log-file", required_argument, NULL, O_LOGFILE},
        {"log-stdout", no_argument, NULL, O_LOGSTDOUT},
        {"log-level", required_argument, NULL, O_LOGLEVEL},
        {"pid-file", required_argument, NULL, O_PIDFILE},
        {"nodaemon", no_argument, NULL, 'd'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    while ((c = getopt_long(argc, argv, "f:cdVh", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            o->config = optarg;
            break;
        case 'c':
            o->check = true;
            break;
        case 'd':
            break;
        case O_MODDIR:
            o->module_dir = optarg;
            break;
        case O_LOGFILE:
            o->log_file = optarg;
            break;
        case O_LOGSTDOUT:
            o->log_stdout = true;
            break;
        case O_LOGLEVEL:
            o->log_level = parse_level(optarg);
            if (o->log_level < 0) {
                fprintf(stderr, "sluice: invalid log level '%s'\n", optarg);
                return 2;
            }
            break;
        case O_PIDFILE:
            o->pid_file = optarg;
            break;
        case 'V':
            printf("sluice %s (git %s) module ABI %d.%d\n", SLUICE_VERSION,
                   SLUICE_REVISION, SL_MODULE_ABI_MAJOR, SL_MODULE_ABI_MINOR);
            return 1;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        o->config = argv[optind++];
    }
    if (optind < argc) {
        fprintf(stderr, "sluice: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

static int
config_check(const struct options *o)
{
    struct sl_config *cfg;
    struct sl_cfg_diag d = {0};

    sl__log_init(NULL, o->log_level >= 0 ? o->log_level : SL_LOG_WARN);
    cfg = sl__config_load_diag(o->config, false, &d);
    if (d.nignored > 0) {
        /* The summary the issue asks for: what was accepted but has no
         * effect, and why (each line also came as a warning above). */
        printf("%d parameter(s) accepted for MaxScale compatibility and "
               "ignored:\n%s", d.nignored, d.ignored);
    }
    if (cfg == NULL) {
        fprintf(stderr, "%s: configuration check failed\n", o->config);
    } else {
        printf("%s: OK\n", o->config);
    }
    sl__config_free(cfg);
    sl__cfg_diag_free(&d);
    sl__splice_finish();
    sl__modules_unload();
    sl__log_finish();
    return cfg ? 0 : 1;
}

/* mkdir -p path (mode 0750 for what it creates): 0 or -errno. */
static int
mkdir_p(const char *path)
{
    char buf[4096];
    struct stat st;
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(buf)) {
        return -ENAMETOOLONG;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;

            *p = '\0';
            if (mkdir(buf, 0750) < 0 && errno != EEXIST) {
                return -errno;
            }
            *p = c;
            if (c == '\0') {
                break;
            }
        }
    }
    if (stat(path, &st) < 0) {
        return -errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/*
 * The runtime directories exist before anything needs them (MaxScale
 * creates them too): datadir (REST users, .secrets), persistdir (objects
 * created at run time), logdir and cachedir when set. A directory that
 * cannot be created stops the start-up, naming the parameter and path.
 */
static int
ensure_runtime_dirs(const struct sl_config *cfg)
{
    const struct sl_global *g = &cfg->global;
    const struct {
        const char *param;
        const char *path;
    } dirs[] = {
        {"datadir", g->datadir},
        {"persistdir", g->persistdir},
        {"logdir", sl__params_line(g->params, "logdir") > 0 ? g->logdir
                                                             : NULL},
        {"cachedir", sl_params_get(g->params, "cachedir")},
    };

    for (size_t i = 0; i < SL_ARRAY_LEN(dirs); i++) {
        int rc;

        if (dirs[i].path == NULL || dirs[i].path[0] == '\0') {
            continue;
        }
        rc = mkdir_p(dirs[i].path);
        if (rc < 0) {
            sl_log_error("cannot create the %s directory '%s': %s; refusing "
                         "to start", dirs[i].param, dirs[i].path,
                         strerror(-rc));
            fprintf(stderr, "sluice: cannot create the %s directory '%s': "
                    "%s; refusing to start\n", dirs[i].param, dirs[i].path,
                    strerror(-rc));
            return rc;
        }
    }
    return 0;
}

/* Switch to the log file the configuration names, unless the command line
 * chose the destination. Returns 0 or -errno. */
static int
apply_log_config(const struct options *o, const struct sl_config *cfg,
                 int level)
{
    int rc = 0;

    if (!o->log_file && !o->log_stdout && cfg->global.log_file[0]) {
        sl__log_finish();
        rc = sl__log_init(cfg->global.log_file, level);
        if (rc < 0) {
            fprintf(stderr, "sluice: cannot open log file '%s': %s\n",
                    cfg->global.log_file, strerror(-rc));
            return rc;
        }
    }
    atomic_store(&sl_log_max_level, level);
    return 0;
}

static void
pid_path(const struct options *o, const struct sl_config *cfg, char *buf,
         size_t len)
{
    buf[0] = '\0';
    if (o->pid_file) {
        snprintf(buf, len, "%s", o->pid_file);
    } else if (sl__params_line(cfg->global.params, "piddir") > 0) {
        snprintf(buf, len, "%.4000s/sluice.pid", cfg->global.piddir);
    }
}

static int
write_pid(const char *path)
{
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        sl_log_error("cannot write pid file '%s': %s", path, strerror(errno));
        return -errno;
    }
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
    return 0;
}

static void
stop_listeners(struct sl_config *cfg, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sl__listener_stop(cfg->listeners[i]);
    }
}

/* Workers, listeners, monitors; on failure everything started is stopped.
 * 0 or -errno. */
static int
start_runtime(struct sl_config *cfg)
{
    const struct sl_global *g = &cfg->global;
    size_t i;
    int rc = sl__workers_init(g->threads, g->event_model);

    if (rc < 0) {
        sl_log_error("cannot create %d worker threads: %s", g->threads,
                     strerror(-rc));
        return rc;
    }
    for (i = 0; i < cfg->nlisteners; i++) {
        rc = sl__listener_start(cfg->listeners[i]);
        if (rc < 0) {
            sl_log_error("cannot start listener '%s': %s",
                         cfg->listeners[i]->name, strerror(-rc));
            goto out_listeners;
        }
    }
    rc = sl__monitors_start(cfg);
    if (rc < 0) {
        goto out_listeners;
    }
    rc = sl__workers_start();
    if (rc < 0) {
        sl_log_error("cannot start the worker threads: %s", strerror(-rc));
        goto out_monitors;
    }
    return 0;

out_monitors:
    sl__monitors_stop(cfg);
out_listeners:
    stop_listeners(cfg, i);
    sl__workers_finish();
    return rc;
}

/* ---- systemd supervision (all a no-op without NOTIFY_SOCKET) ---- */

/*
 * The watchdog proves every worker still turns its loop: at each check
 * (half of WatchdogSec) the main thread sends WATCHDOG=1 only if every
 * worker answered the previous ping, then posts the next one. A worker
 * stuck in a callback never runs its messages, the keep-alives stop and
 * systemd restarts Sluice. Pings carry a generation; a worker stores the
 * last one it ran in watchdog_answered. The struct is the main thread's.
 */
struct watchdog {
    uint64_t interval_ms;           /* between checks; 0: no watchdog */
    uint64_t next_ms;               /* monotonic time of the next check */
    uint64_t gen;                   /* the ping in flight */
    uint64_t silent_since_ms;       /* 0, or when a check first failed */
    int nworkers;
};

/* Per worker: the last ping generation it ran. Written by the workers,
 * read by the main thread; freed only after the workers stopped. */
static atomic_uint_fast64_t *watchdog_answered;

/* Posted to every worker with the ping's generation; runs on it. */
static void
watchdog_pong(void *arg)
{
    int i = sl_worker_index(sl_worker_current());

    atomic_store(&watchdog_answered[i], (uint64_t)(uintptr_t)arg);
}

/* A ping of generation gen + 1. When posting fails the generation stays,
 * so workers that did get the message still count as answering. */
static void
watchdog_ping(struct watchdog *wd)
{
    wd->gen++;
    if (sl_worker_broadcast(watchdog_pong, (void *)(uintptr_t)wd->gen)) {
        sl_log_warn("watchdog: cannot post the ping to every worker");
        wd->gen--;
    }
}

/* Index of a worker that has not run the ping in flight, or -1. */
static int
watchdog_silent_worker(const struct watchdog *wd)
{
    for (int i = 0; i < wd->nworkers; i++) {
        if (atomic_load(&watchdog_answered[i]) < wd->gen) {
            return i;
        }
    }
    return -1;
}

/* 0 (no watchdog or ready), or -ENOMEM. Main only, after the workers
 * started. */
static int
watchdog_init(struct watchdog *wd)
{
    uint64_t usec = 0;

    *wd = (struct watchdog){0};
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec < 2000) {
        return 0;
    }
    wd->nworkers = sl_worker_count();
    watchdog_answered = calloc((size_t)wd->nworkers,
                               sizeof(*watchdog_answered));
    if (watchdog_answered == NULL) {
        return -ENOMEM;
    }
    wd->interval_ms = usec / 2000;
    wd->next_ms = sl_monotonic_ms() + wd->interval_ms;
    sl_log_notice("systemd watchdog: checking the %d workers every %llu ms",
                  wd->nworkers, (unsigned long long)wd->interval_ms);
    watchdog_ping(wd);
    return 0;
}

/* Main only, after the workers stopped (no ping can run any more). */
static void
watchdog_finish(void)
{
    free(watchdog_answered);
    watchdog_answered = NULL;
}

/* One check: the keep-alive and the next ping when every worker answered;
 * otherwise no keep-alive, an error once and a STATUS= line each time. */
static void
watchdog_check(struct watchdog *wd)
{
    uint64_t now = sl_monotonic_ms();
    int silent = watchdog_silent_worker(wd);

    wd->next_ms = now + wd->interval_ms;
    if (silent >= 0) {
        if (wd->silent_since_ms == 0) {
            wd->silent_since_ms = now - wd->interval_ms;
            sl_log_error("watchdog: worker %d does not answer: no "
                         "WATCHDOG=1 until it does (systemd restarts Sluice "
                         "after WatchdogSec)", silent);
        }
        sd_notifyf(0, "STATUS=Worker %d has not answered the watchdog for "
                   "%llu ms", silent,
                   (unsigned long long)(now - wd->silent_since_ms));
        return;
    }
    sd_notify(0, "WATCHDOG=1");
    if (wd->silent_since_ms != 0) {
        sl_log_notice("watchdog: every worker answers again");
        sd_notify(0, "STATUS=Running");
        wd->silent_since_ms = 0;
    }
    watchdog_ping(wd);
}

/* How long sigtimedwait may block: until the next check, or forever
 * (NULL) without a watchdog. */
static const struct timespec *
watchdog_timeout(const struct watchdog *wd, struct timespec *ts)
{
    uint64_t now;
    uint64_t left;

    if (wd->interval_ms == 0) {
        return NULL;
    }
    now = sl_monotonic_ms();
    left = wd->next_ms > now ? wd->next_ms - now : 0;
    ts->tv_sec = (time_t)(left / 1000);
    ts->tv_nsec = (long)(left % 1000) * 1000000;
    return ts;
}

/* ---- signals ---- */

/* SIGHUP: reopen the log (rotation), framed as a reload for systemd. */
static void
on_sighup(void)
{
    sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
               (unsigned long long)sl_monotonic_ms() * 1000);
    sl_log_notice("SIGHUP: reopening the log");
    sl__log_reopen();
    sl_log_notice("log reopened");
    sd_notify(0, "READY=1\nSTATUS=Running");
}

/* SIGUSR1: the live object counts (leak checks in tests). */
static void
on_sigusr1(void)
{
    sl_log_notice("SIGUSR1: live dcbs=%lld sessions=%lld",
                  (long long)sl__dcb_count(), (long long)sl__session_count());
}

/*
 * Runs until SIGTERM or SIGINT, checking the workers for the systemd
 * watchdog between signals when one is configured.
 */
static void
wait_for_signals(struct watchdog *wd)
{
    struct timespec ts;
    sigset_t set;
    int sig;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    for (;;) {
        sig = sigtimedwait(&set, NULL, watchdog_timeout(wd, &ts));
        if (wd->interval_ms != 0 && sl_monotonic_ms() >= wd->next_ms) {
            watchdog_check(wd);
        }
        if (sig == SIGHUP) {
            on_sighup();
        } else if (sig == SIGUSR1) {
            on_sigusr1();
        } else if (sig == SIGTERM || sig == SIGINT) {
            /* systemd disarms the watchdog once it leaves "running" */
            sd_notify(0, "STOPPING=1\nSTATUS=Shutting down");
            sl_log_notice("%s: shutting down", strsignal(sig));
            return;
        }
    }
}

/* ---- graceful shutdown ---- */

static atomic_llong drain_busy;
static atomic_int drain_replies;

static void
drain_worker(void *arg)
{
    (void)arg;
    atomic_fetch_add(&drain_busy, sl__dcb_drain_clients(sl_worker_current()));
    atomic_fetch_add(&drain_replies, 1);
}

static void
sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000};

    nanosleep(&ts, NULL);
}

/* One pass over every worker: idle sessions closed, busy ones counted.
 * -1 when the workers did not answer within a second. */
static int64_t
drain_pass(void)
{
    int n = sl_worker_count();

    atomic_store(&drain_busy, 0);
    atomic_store(&drain_replies, 0);
    if (sl_worker_broadcast(drain_worker, NULL) != 0) {
        return -1;
    }
    for (int i = 0; i < 100 && atomic_load(&drain_replies) < n; i++) {
        sleep_ms(10);
    }
    return atomic_load(&drain_replies) < n ? -1 : atomic_load(&drain_busy);
}

/*
 * After the listeners closed: close idle sessions at once and let busy
 * ones (a statement in flight, output queued) finish, for up to
 * shutdown_timeout; what is left is closed by the workers' shutdown.
 */
static void
drain_sessions(const struct sl_config *cfg)
{
    uint64_t timeout = sl_params_duration_ms(cfg->global.params,
                                             "shutdown_timeout");
    uint64_t waited = 0;
    int64_t busy;

    while ((busy = drain_pass()) > 0 && waited < timeout) {
        if (waited == 0) {
            sl_log_notice("waiting up to %llu ms for %lld busy sessions",
                          (unsigned long long)timeout, (long long)busy);
        }
        sleep_ms(100);
        waited += 100;
    }
    if (busy > 0) {
        sl_log_warn("shutdown_timeout: closing %lld busy sessions",
                    (long long)busy);
    }
}

/* Many connections need many descriptors: take the hard limit. */
static void
raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The longest wait for the monitors' first tick before READY=1. */
#define FIRST_TICK_WAIT_MS 60000

/*
 * Wait until every running monitor finished its first tick, so that a
 * client connecting right after READY=1 finds the servers' roles known
 * (not "no eligible servers"). A monitor slower than FIRST_TICK_WAIT_MS
 * is logged and not waited for: systemd's start timeout is the limit.
 */
static void
wait_first_monitor_ticks(const struct sl_config *cfg)
{
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        const struct sl_monitor *m = cfg->monitors[i];
        int waited = 0;

        while (m->running && sl_monitor_ticks(m) == 0 &&
               waited < FIRST_TICK_WAIT_MS) {
            sleep_ms(10);
            waited += 10;
        }
        if (m->running && sl_monitor_ticks(m) == 0) {
            sl_log_warn("monitor '%s' has not finished its first check "
                        "after %d ms; ready anyway", m->name, waited);
        }
    }
}

/* Tell systemd (Type=notify) that Sluice serves: every listener is open,
 * the workers run, the REST API is up and the monitors have looked at
 * the servers once. Without NOTIFY_SOCKET nothing is waited for. */
static void
notify_ready(const struct sl_config *cfg)
{
    if (getenv("NOTIFY_SOCKET") == NULL) {
        return;
    }
    wait_first_monitor_ticks(cfg);
    sd_notifyf(0, "READY=1\nSTATUS=Running: %zu listeners, %d threads",
               cfg->nlisteners, cfg->global.threads);
}

static int
run(const struct options *o)
{
    struct watchdog wd;
    struct sl_config *cfg;
    char pidfile[4200];
    int level = o->log_level >= 0 ? o->log_level : SL_LOG_NOTICE;

    int rc = sl__log_init(o->log_stdout ? NULL : o->log_file, level);

    if (rc < 0) {
        fprintf(stderr, "sluice: cannot open log file '%s': %s\n",
                o->log_file, strerror(-rc));
        return 1;
    }
    sl__config_errors_to_log = o->log_file != NULL && !o->log_stdout;
    cfg = sl__config_load(o->config, true);
    if (cfg == NULL) {
        sl_log_error("errors in '%s': refusing to start", o->config);
        fprintf(stderr, "sluice: errors in '%s': refusing to start\n",
                o->config);
        goto out_modules;
    }
    if (ensure_runtime_dirs(cfg) < 0 ||
        apply_log_config(o, cfg, o->log_level >= 0 ? o->log_level
                                                    : cfg->global.log_level)) {
        goto out_config;
    }
    sl__config_set_initial(cfg);
    sl__config_loading_done();   /* published: sl_global_params reads it */
    sl__monitor_set_passive(sl_params_bool(cfg->global.params, "passive"));
    /* validated at load; before any worker or monitor thread starts */
    sl__local_address_set(sl_params_get(cfg->global.params,
                                        "local_address"));
    sl__stats_configure(&cfg->global);
    sl__history_configure(&cfg->global);
    sl__log_set_destinations(sl_params_bool(cfg->global.params, "syslog"),
                             sl_params_bool(cfg->global.params, "maxlog"));
    sl__log_set_throttling(cfg->global.log_throttle_count,
                           cfg->global.log_throttle_window_ms,
                           cfg->global.log_throttle_suppress_ms);
    if (start_runtime(cfg) < 0) {
        fprintf(stderr, "sluice: startup failed, see the log\n");
        goto out_config;
    }
    /* main reads cfg until READY=1: no generation is freed before */
    sl__worker_reclaim_hold(true);
    /* config_sync replays changes through the REST API's handlers */
    sl__csync_set_routing(sl__admin_route_find, sl__admin_split_path);
    if (sl__csync_start(cfg) < 0) {
        sl_log_error("configuration synchronization is not running");
    }
    if (sl__admin_start(cfg) < 0) {
        sl_log_error("the REST API is not available");   /* not fatal */
    }
    pid_path(o, cfg, pidfile, sizeof(pidfile));
    if (pidfile[0] && write_pid(pidfile) < 0) {
        pidfile[0] = '\0';
    }
    sl_log_notice("Sluice %s (git %s) started (%d threads, event model %s, "
                  "config %s)", SLUICE_VERSION, SLUICE_REVISION,
                  cfg->global.threads,
                  cfg->global.event_model == SL_EVENT_MODEL_SHARED
                      ? "shared" : "pinned", o->config);
    sl__modcmd_test_hook_start();   /* tests only: see modcmd.c */
    if (watchdog_init(&wd) < 0) {
        sl_log_error("watchdog: out of memory; not supervising the workers");
    }
    notify_ready(cfg);
    sl__worker_reclaim_hold(false);
    wait_for_signals(&wd);
    sl__modcmd_test_hook_stop();
    sl__csync_stop();
    sl__admin_stop();
    /* REST changes published later generations: stop what is current */
    cfg = sl__config_current();
    stop_listeners(cfg, cfg->nlisteners);
    drain_sessions(cfg);
    sl__monitors_stop(cfg);
    sl__workers_stop();
    sl__workers_finish();
    watchdog_finish();
    sl__admin_finish();
    if (pidfile[0]) {
        unlink(pidfile);
    }
    sl_log_notice("Sluice stopped");
    sl__config_set_initial(NULL);
    sl__config_free(cfg);
    sl__splice_finish();
    sl__modules_unload();
    sl__log_finish();
    return 0;

out_config:
    sl__config_set_initial(NULL);
    sl__config_loading_done();
    sl__config_free(cfg);
out_modules:
    /* systemd sees the exit status; this is what `systemctl status` shows */
    sd_notify(0, "STATUS=Startup failed, see the log");
    sl__splice_finish();
    sl__modules_unload();
    sl__log_finish();
    return 1;
}

/*
 * The daemon's entry point, called by main() in server/daemon/sluice.c.
 * It lives in libsluice, not in the executable, because it drives the
 * core's internals (configuration, workers, listeners, REST API), which
 * libsluice does not export: the daemon links the same shared library as
 * the modules (one copy of the core's globals) and, like a module, sees
 * only exported symbols. Not for modules (docs/design.md, "ABI rules").
 */
SL_EXPORT int sl_daemon_main(int argc, char **argv);

int
sl_daemon_main(int argc, char **argv)
{
    struct options o = {.config = DEFAULT_CONFIG, .log_level = -1};
    sigset_t set;
    int rc = parse_options(argc, argv, &o);

    if (rc != 0) {
        return rc - 1;
    }
    if (o.module_dir && setenv("SLUICE_MODULE_DIR", o.module_dir, 1) != 0) {
        perror("sluice: setenv");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    raise_nofile();
    return o.check ? config_check(&o) : run(&o);
}
