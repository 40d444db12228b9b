/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the configuration loader: one test per kind of error
 * (each checks the exact "FILE:LINE: ..." message), valid configurations
 * built on the test modules (objects, references, instances, per-service
 * protocol data), the monitor runner, and a MaxScale-style configuration
 * on the real modules (skipped with a message until they are built).
 */
#define _GNU_SOURCE   /* pthread_timedjoin_np */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <sluice/log.h>
#include <sluice/server.h>
#include <sluice/service.h>

#include "config_int.h"
#include "module_int.h"

#ifndef SLUICE_TEST_MODULE_DIR
#error "SLUICE_TEST_MODULE_DIR must name the test module directory"
#endif

#ifndef SLUICE_BUILD_MODULE_DIR
#define SLUICE_BUILD_MODULE_DIR "/nonexistent"
#endif

static struct sl_cfg_diag diag;

static struct sl_config *
load_in(const char *text, bool instances, const char *dir)
{
    sl__cfg_diag_free(&diag);
    memset(&diag, 0, sizeof(diag));
    diag.file = "test.cnf";
    diag.quiet = true;
    diag.module_dir = dir;
    return sl__config_load_text(text, strlen(text), instances, &diag);
}

static struct sl_config *
load(const char *text)
{
    return load_in(text, false, SLUICE_TEST_MODULE_DIR);
}

/* The load must fail and its messages contain msg. */
static void
expect_error(const char *text, const char *msg)
{
    struct sl_config *cfg = load(text);

    assert_null(cfg);
    assert_true(diag.errors > 0);
    if (strstr(diag.text, msg) == NULL) {
        fail_msg("wanted '%s' in:\n%s", msg, diag.text);
    }
}

#define SERVER "[db1]\ntype=server\naddress=127.0.0.1\nport=3306\n"
#define SERVICE                                                                \
    "[svc]\ntype=service\nrouter=testmod_router\nservers=db1\nuser=u\n"       \
    "password=p\n"

static void
test_unknown_parameter(void **state)
{
    (void)state;
    expect_error("[db1]\ntype=server\nadress=127.0.0.1\n",
                 "test.cnf:3: unknown parameter 'adress' in server 'db1' "
                 "(did you mean 'address'?)");
}

static void
test_missing_mandatory(void **state)
{
    (void)state;
    expect_error(SERVER SERVICE "\n[rw-listener]\ntype=listener\n"
                 "protocol=testmod_proto\nport=4006\n",
                 "test.cnf:12: missing mandatory parameter 'service' in "
                 "listener 'rw-listener'");
    expect_error("[db1]\ntype=server\nport=3306\n",
                 "test.cnf:1: missing mandatory parameter 'address' (or "
                 "'socket') in server 'db1'");
    expect_error("[svc]\ntype=service\nrouter=testmod_router\nuser=u\n",
                 "test.cnf:1: missing mandatory parameter 'password' in "
                 "service 'svc'");
}

static void
test_unknown_server(void **state)
{
    (void)state;
    expect_error(SERVER "[svc]\ntype=service\nrouter=testmod_router\n"
                 "servers=db1, db9\nuser=u\npassword=p\n",
                 "test.cnf:8: parameter 'servers' of service 'svc' refers to "
                 "unknown server 'db9'");
    expect_error(SERVER "[mon]\ntype=monitor\nmodule=testmod_monitor\n"
                 "servers=db2\n",
                 "test.cnf:8: parameter 'servers' of monitor 'mon' refers to "
                 "unknown server 'db2'");
}

static void
test_unknown_service(void **state)
{
    (void)state;
    expect_error(SERVER SERVICE "[l1]\ntype=listener\nservice=svx\n"
                 "protocol=testmod_proto\nport=4006\n",
                 "test.cnf:13: parameter 'service' of listener 'l1' refers to "
                 "unknown service 'svx'");
}

static void
test_unknown_filter(void **state)
{
    (void)state;
    expect_error(SERVER SERVICE "filters=f1|f2\n"
                 "[f1]\ntype=filter\nmodule=testmod_goodfilter\nneeded=1\n",
                 "test.cnf:11: parameter 'filters' of service 'svc' refers to "
                 "unknown filter 'f2'");
}

static void
test_duplicates(void **state)
{
    (void)state;
    expect_error(SERVER "\n[db1]\ntype=server\naddress=x\n",
                 "test.cnf:6: duplicate section '[db1]' (first defined at "
                 "line 1)");
    expect_error(SERVER "port=3307\n",
                 "test.cnf:5: duplicate parameter 'port' in section 'db1' "
                 "(first set at line 4)");
}

static void
test_bad_values(void **state)
{
    (void)state;
    expect_error("[db1]\ntype=server\naddress=h\nport=abc\n",
                 "test.cnf:4: invalid value 'abc' for parameter 'port' in "
                 "server 'db1' (expected an integer)");
    expect_error("[db1]\ntype=server\naddress=h\nport=70000\n",
                 "test.cnf:4: invalid value '70000' for parameter 'port'");
    expect_error(SERVER SERVICE "enable_root_user=maybe\n",
                 "test.cnf:11: invalid value 'maybe' for parameter "
                 "'enable_root_user' in service 'svc' (expected a boolean");
    expect_error("[maxscale]\nwriteq_high_water=12Q\n",
                 "test.cnf:2: invalid value '12Q' for parameter "
                 "'writeq_high_water' in section 'maxscale' (expected a "
                 "size");
    expect_error(SERVER "[mon]\ntype=monitor\nmodule=testmod_monitor\n"
                 "monitor_interval=fast\n",
                 "test.cnf:8: invalid value 'fast' for parameter "
                 "'monitor_interval' in monitor 'mon' (expected a duration");
    expect_error("[maxscale]\nevent_model=fancy\n",
                 "test.cnf:2: invalid value 'fancy' for parameter "
                 "'event_model' in section 'maxscale' (expected one of "
                 "'pinned', 'shared')");
    expect_error("[maxscale]\nthreads=0\n",
                 "test.cnf:2: invalid value '0' for parameter 'threads'");
    expect_error(SERVER SERVICE "opt_count=-1\n",
                 "test.cnf:11: invalid value '-1' for parameter 'opt_count' "
                 "in service 'svc' (expected a non-negative integer)");
}

static void
test_unknown_module(void **state)
{
    (void)state;
    expect_error(SERVER "[svc]\ntype=service\nrouter=readconroute\nuser=u\n"
                 "password=p\n",
                 "test.cnf:7: unknown router module 'readconroute' in "
                 "service 'svc': cannot open '" SLUICE_TEST_MODULE_DIR
                 "/libreadconroute.so'");
    expect_error("[f]\ntype=filter\nmodule=testmod_badmagic\n",
                 "test.cnf:3: unknown filter module 'testmod_badmagic' in "
                 "filter 'f': refusing '" SLUICE_TEST_MODULE_DIR
                 "/libtestmod_badmagic.so': not a Sluice module");
}

static void
test_types(void **state)
{
    (void)state;
    expect_error("[db1]\ntype=sever\naddress=x\n",
                 "test.cnf:2: unknown object type 'sever' in section 'db1' "
                 "(expected server, service, listener, monitor or filter) "
                 "(did you mean 'server'?)");
    expect_error("\n[db1]\naddress=x\n",
                 "test.cnf:2: missing mandatory parameter 'type' in section "
                 "'db1'");
    expect_error("[bad name]\ntype=server\naddress=x\n",
                 "test.cnf:1: invalid section name 'bad name'");
}

static void
test_syntax(void **state)
{
    (void)state;
    expect_error("address=x\n", "test.cnf:1: parameter outside of any "
                 "section");
    expect_error("[db1\n", "test.cnf:1: missing ']'");
    expect_error(SERVER "garbage line\n", "test.cnf:5: expected "
                 "'name=value'");
}

static void
test_ssl(void **state)
{
    struct sl_config *cfg;

    (void)state;
    /* TLS parameters are checked in tls.c, with the line of the culprit */
    expect_error(SERVER "ssl=true\nssl_ca=/nonexistent/ca.pem\n",
                 "test.cnf:6: cannot load ssl_ca '/nonexistent/ca.pem' of "
                 "server 'db1'");
    expect_error(SERVER "ssl=true\nssl_version=SSLv3\n",
                 "test.cnf:6: invalid value 'SSLv3' for parameter "
                 "'ssl_version' in server 'db1'");
    expect_error(SERVER "ssl=maybe\n", "test.cnf:5:");
    /* a server may use TLS without a client certificate */
    cfg = load(SERVER "ssl=true\nssl_version=TLSv12,TLSv13\n");
    assert_non_null(cfg);
    assert_non_null(cfg->servers[0]->tls);
    sl__config_free(cfg);
    cfg = load(SERVER "ssl=false\nssl_cert=/ignored\n");
    assert_non_null(cfg);
    assert_null(cfg->servers[0]->tls);
    sl__config_free(cfg);
}

static void
test_accumulates(void **state)
{
    struct sl_config *cfg;

    (void)state;
    cfg = load("[maxscale]\nthreads=x\n[db1]\ntype=server\nadress=h\n"
               "[db2]\ntype=server\naddress=h\nport=no\n[l]\n"
               "type=listener\n");
    assert_null(cfg);
    assert_true(diag.errors >= 5);
    assert_non_null(strstr(diag.text, "test.cnf:2:"));
    assert_non_null(strstr(diag.text, "test.cnf:5:"));
    assert_non_null(strstr(diag.text, "test.cnf:9:"));
    assert_non_null(strstr(diag.text, "test.cnf:10:"));
}

static void
test_global(void **state)
{
    struct sl_config *cfg;

    (void)state;
    cfg = load("[maxscale]\nthreads=auto\nevent_model=shared\n"
               "log_info=true\nlogdir=/tmp/x\nquery_classifier=qc_sqlite\n"
               "writeq_high_water=16Mi\nwriteq_low_water=8Ki\n");
    assert_non_null(cfg);
    assert_true(cfg->global.threads >= 1);
    assert_int_equal(cfg->global.event_model, SL_EVENT_MODEL_SHARED);
    assert_int_equal(cfg->global.log_level, SL_LOG_INFO);
    assert_string_equal(cfg->global.log_file, "/tmp/x/sluice.log");
    assert_string_equal(cfg->global.module_dir, SLUICE_TEST_MODULE_DIR);
    assert_int_equal(cfg->global.writeq_high_water, 16u << 20);
    assert_int_equal(cfg->global.writeq_low_water, 8192);
    assert_string_equal(cfg->global.admin_host, "127.0.0.1");
    assert_int_equal(cfg->global.admin_port, 8989);
    sl__config_free(cfg);
    /* No [maxscale] at all: defaults, stdout log. */
    cfg = load("");
    assert_non_null(cfg);
    assert_int_equal(cfg->global.event_model, SL_EVENT_MODEL_PINNED);
    assert_string_equal(cfg->global.log_file, "");
    assert_int_equal(cfg->global.log_level, SL_LOG_NOTICE);
    sl__config_free(cfg);
}

/* local_address: a numeric IPv4 or IPv6 address, else file:line. */
static void
test_local_address(void **state)
{
    struct sl_config *cfg;

    (void)state;
    cfg = load("[maxscale]\nlocal_address=127.0.0.2\n");
    assert_non_null(cfg);
    sl__config_free(cfg);
    cfg = load("[maxscale]\nlocal_address=::1\n");
    assert_non_null(cfg);
    sl__config_free(cfg);
    expect_error("[maxscale]\nthreads=1\nlocal_address=db.example\n",
                 "test.cnf:3: invalid value 'db.example' for parameter "
                 "'local_address' in section 'maxscale' (expected an IPv4 "
                 "or IPv6 address)");
}

/* threads_max caps threads=auto and bounds an explicit threads. */
static void
test_threads_max(void **state)
{
    struct sl_config *cfg;

    (void)state;
    cfg = load("[maxscale]\nthreads=auto\nthreads_max=1\n");
    assert_non_null(cfg);
    assert_int_equal(cfg->global.threads, 1);
    sl__config_free(cfg);
    cfg = load("[maxscale]\nthreads=2\nthreads_max=2\n");
    assert_non_null(cfg);
    assert_int_equal(cfg->global.threads, 2);
    sl__config_free(cfg);
    assert_null(load("[maxscale]\nthreads=3\nthreads_max=2\n"));
    assert_non_null(strstr(diag.text, "test.cnf:2: invalid value '3' for "
                                      "parameter 'threads' in section "
                                      "'maxscale' (expected 'auto' or a "
                                      "number from 1 to threads_max=2)"));
    assert_null(load("[maxscale]\nthreads_max=0\n"));
    assert_non_null(strstr(diag.text, "test.cnf:2: invalid value '0' for "
                                      "parameter 'threads_max'"));
}

static const char full_config[] =
    "[maxscale]\nthreads=1\n"
    "[db1]\ntype=server\naddress=127.0.0.1\nport=3306\n"
    "protocol=MariaDBBackend\npersistpoolmax=0\n"
    "[db2]\ntype=server\nsocket=/tmp/db2.sock\nweight=3\n"
    "[f1]\ntype=filter\nmodule=TestFilterAlias\nneeded=yes\nmode=slow\n"
    "[svc]\ntype=service\nrouter=testmod_router\n"
    "servers=db1,\n    db2\nuser=u\npassword=p\nfilters=f1 | f1\n"
    "max_connections=10\nconnection_timeout=30\n"
    "[l1]\ntype=listener\nservice=svc\nprotocol=TestClient\n"
    "address=127.0.0.1\nport=4006\n"
    "[l2]\ntype=listener\nservice=svc\nprotocol=testmod_proto\n"
    "socket=/tmp/sluice-test.sock\n"
    "[mon]\ntype=monitor\nmodule=testmod_monitor\nservers=db1,db2\n"
    "user=m\npassword=mp\nmonitor_interval=10s\n"
    "backend_connect_timeout=2\n";

static void
test_valid_objects(void **state)
{
    int (*created)(void);
    struct sl_config *cfg;
    struct sl_service *svc;
    size_t n;

    (void)state;
    cfg = load_in(full_config, true, SLUICE_TEST_MODULE_DIR);
    if (cfg == NULL) {
        fail_msg("%s", diag.text);
    }
    assert_int_equal(cfg->nservers, 2);
    assert_string_equal(sl_server_address(cfg->servers[0]), "127.0.0.1");
    assert_null(sl_server_socket(cfg->servers[0]));
    assert_string_equal(sl_server_socket(cfg->servers[1]), "/tmp/db2.sock");
    assert_int_equal(sl_server_weight(cfg->servers[1]), 3);
    assert_int_equal(sl_server_replication_lag(cfg->servers[0]),
                     SL_SERVER_LAG_UNKNOWN);
    svc = cfg->services[0];
    assert_ptr_equal(sl_service_servers(svc, &n)[1], cfg->servers[1]);
    assert_int_equal(n, 2);
    assert_int_equal(svc->nfilters, 2);
    assert_ptr_equal(svc->filters[0], cfg->filters[0]);
    assert_non_null(cfg->filters[0]->instance);
    assert_int_equal(sl_params_enum(cfg->filters[0]->params, "mode"), 1);
    assert_string_equal(sl_service_user(svc), "u");
    assert_int_equal(svc->max_connections, 10);
    assert_int_equal(sl_params_duration_ms(svc->params,
                                           "connection_timeout"), 30000);
    assert_int_equal(sl_params_count(svc->params, "opt_count"), 7);
    assert_non_null(sl_service_router_instance(svc));
    assert_non_null(sl_service_protocol_data(svc));
    assert_int_equal(cfg->nlisteners, 2);
    assert_ptr_equal(sl_listener_service(cfg->listeners[1]), svc);
    assert_int_equal(cfg->listeners[0]->port, 4006);
    assert_string_equal(cfg->listeners[1]->socket, "/tmp/sluice-test.sock");
    assert_int_equal(cfg->listeners[0]->fd, -1);
    /* Two listeners, one service: data created once. */
    *(void **)&created = dlsym(cfg->listeners[0]->protocol_module->handle,
                               "testmod_proto_created");
    assert_non_null(created);
    assert_int_equal(created(), 1);
    assert_int_equal(sl_monitor_interval_ms(cfg->monitors[0]), 10000);
    assert_int_equal(sl_monitor_connect_timeout_ms(cfg->monitors[0]), 2000);
    assert_int_equal(sl_monitor_read_timeout_ms(cfg->monitors[0]), 3000);
    assert_string_equal(sl_monitor_user(cfg->monitors[0]), "m");
    sl__config_free(cfg);
}

/* The finders (internal.h) over every object array, and
 * sl_service_find, which uses them on the current generation. */
static void
test_find_by_name(void **state)
{
    struct sl_config *cfg;

    (void)state;
    cfg = load(full_config);
    if (cfg == NULL) {
        fail_msg("%s", diag.text);
    }
    assert_ptr_equal(sl__find_server(cfg, "db2"), cfg->servers[1]);
    assert_ptr_equal(sl__find_service(cfg, "svc"), cfg->services[0]);
    assert_ptr_equal(sl__find_listener(cfg, "l2"), cfg->listeners[1]);
    assert_ptr_equal(sl__find_monitor(cfg, "mon"), cfg->monitors[0]);
    assert_ptr_equal(sl__find_filter(cfg, "f1"), cfg->filters[0]);
    /* another kind's name, a prefix, another case, no generation */
    assert_null(sl__find_server(cfg, "svc"));
    assert_null(sl__find_service(cfg, "db1"));
    assert_null(sl__find_server(cfg, "db"));
    assert_null(sl__find_listener(cfg, "L1"));
    assert_null(sl__find_filter(NULL, "f1"));
    assert_null(sl_service_find("svc"));
    sl__config_set_initial(cfg);
    assert_ptr_equal(sl_service_find("svc"), cfg->services[0]);
    assert_null(sl_service_find("mon"));
    sl__config_set_initial(NULL);
    sl__config_free(cfg);
}

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *
stop_monitors_thread(void *cfg)
{
    sl__monitors_stop(cfg);
    return NULL;
}

/* Run sl__monitors_stop(cfg) on a thread; true if it returned within
 * seconds. On false the thread is left behind (the test fails anyway). */
static bool
stop_monitors_within(struct sl_config *cfg, int seconds)
{
    pthread_t t;
    struct timespec deadline;

    assert_int_equal(pthread_create(&t, NULL, stop_monitors_thread, cfg), 0);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    return pthread_timedjoin_np(t, NULL, &deadline) == 0;
}

static void
test_monitor_runner(void **state)
{
    const int *(*st)(void);
    struct sl_config *cfg;
    struct sl_monitor *mon;
    uint64_t t0;

    (void)state;
    cfg = load_in(SERVER "[mon]\ntype=monitor\nmodule=testmod_monitor\n"
                  "servers=db1\nmonitor_interval=20ms\n", true,
                  SLUICE_TEST_MODULE_DIR);
    assert_non_null(cfg);
    mon = cfg->monitors[0];
    *(void **)&st = dlsym(mon->module->handle, "testmod_monitor_state");
    assert_non_null(st);
    assert_int_equal(sl__monitors_start(cfg), 0);
    t0 = now_ms();
    while (sl_monitor_ticks(mon) < 3 && now_ms() - t0 < 5000) {
        usleep(5000);
    }
    assert_true(sl_monitor_ticks(mon) >= 3);
    assert_true(sl_server_status(cfg->servers[0]) & SL_SRV_MASTER);
    sl__monitors_stop(cfg);
    assert_int_equal(st()[0], 1);
    assert_int_equal(st()[1], 1);
    sl__config_free(cfg);

    /* A long interval must not delay stopping. */
    cfg = load_in(SERVER "[mon]\ntype=monitor\nmodule=testmod_monitor\n"
                  "servers=db1\nmonitor_interval=1h\n", true,
                  SLUICE_TEST_MODULE_DIR);
    assert_non_null(cfg);
    assert_int_equal(sl__monitors_start(cfg), 0);
    t0 = now_ms();
    while (sl_monitor_ticks(cfg->monitors[0]) < 1 && now_ms() - t0 < 5000) {
        usleep(1000);
    }
    /* stop on another thread: a stop that waited for the interval would
     * take an hour; the 60 s deadline only stops waiting for it */
    assert_true(stop_monitors_within(cfg, 60));
    sl__config_free(cfg);
}

static void
test_monitored_twice(void **state)
{
    (void)state;
    expect_error(SERVER "[m1]\ntype=monitor\nmodule=testmod_monitor\n"
                 "servers=db1\n[m2]\ntype=monitor\nmodule=testmod_monitor\n"
                 "servers=db1\n",
                 "test.cnf:12: server 'db1' is monitored by both monitor "
                 "'m1' and monitor 'm2'");
}

static void
test_missing_file(void **state)
{
    struct sl_cfg_diag d = {.quiet = true};

    (void)state;
    assert_null(sl__config_load_diag("/nonexistent/sluice.cnf", false, &d));
    assert_non_null(strstr(d.text, "/nonexistent/sluice.cnf: cannot open"));
    sl__cfg_diag_free(&d);
}

/* test/data, from ctest's environment; NULL skips the test. */
static const char *
data_dir(void)
{
    const char *data = getenv("SLUICE_TEST_DATA");

    if (data == NULL || data[0] == '\0') {
        print_message("skipped: SLUICE_TEST_DATA is not set (run through "
                      "ctest)\n");
    }
    return data;
}

static const char *
real_module_dir(void)
{
    const char *env = getenv("SLUICE_MODULE_DIR");

    return env && env[0] ? env : SLUICE_BUILD_MODULE_DIR;
}

static bool
real_modules_built(void)
{
    char path[4200];

    snprintf(path, sizeof(path), "%s/libreadconnroute.so", real_module_dir());
    if (access(path, R_OK) != 0) {
        return false;
    }
    snprintf(path, sizeof(path), "%s/libmariadbprotocol.so",
             real_module_dir());
    return access(path, R_OK) == 0;
}

/* The MaxScale-style file in test/data on the real modules. */
static void
test_maxscale_style(void **state)
{
    const char *data = data_dir();
    char path[4200];
    struct sl_cfg_diag d = {.quiet = true};
    struct sl_config *cfg;

    (void)state;
    if (data == NULL) {
        skip();
    }
    if (!real_modules_built()) {
        print_message("skipped: readconnroute/mariadbprotocol are not built "
                      "in %s\n", real_module_dir());
        skip();
    }
    snprintf(path, sizeof(path), "%s/maxscale_basic.cnf",
             data);
    d.module_dir = real_module_dir();
    cfg = sl__config_load_diag(path, false, &d);
    if (cfg == NULL) {
        fail_msg("%s", d.text);
    }
    assert_int_equal(cfg->nservices, 1);
    assert_int_equal(cfg->services[0]->nservers, 2);
    assert_string_equal(cfg->listeners[0]->protocol_module->info->name,
                        "mariadbprotocol");
    assert_string_equal(sl_params_get(cfg->services[0]->params,
                                      "router_options"), "master");
    sl__config_free(cfg);
    sl__cfg_diag_free(&d);
}

static void
test_errors_file(void **state)
{
    const char *data = data_dir();
    char path[4200];
    struct sl_cfg_diag d = {.quiet = true};

    (void)state;
    if (data == NULL) {
        skip();
    }
    snprintf(path, sizeof(path), "%s/errors.cnf",
             data);
    d.module_dir = real_module_dir();
    assert_null(sl__config_load_diag(path, false, &d));
    assert_non_null(strstr(d.text, "errors.cnf:2: invalid value 'many' for "
                                   "parameter 'threads'"));
    assert_non_null(strstr(d.text, "errors.cnf:6: unknown parameter "
                                   "'adress' in server 'db1' (did you mean "
                                   "'address'?)"));
    assert_non_null(strstr(d.text, "errors.cnf:7: invalid value 'abc' for "
                                   "parameter 'port' in server 'db1'"));
    assert_non_null(strstr(d.text, "errors.cnf:16: missing mandatory "
                                   "parameter 'service' in listener "
                                   "'rw-listener'"));
    sl__cfg_diag_free(&d);
}

static int
teardown(void **state)
{
    (void)state;
    sl__cfg_diag_free(&diag);
    sl__modules_unload();
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_parameter),
        cmocka_unit_test(test_missing_mandatory),
        cmocka_unit_test(test_unknown_server),
        cmocka_unit_test(test_unknown_service),
        cmocka_unit_test(test_unknown_filter),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_find_by_name),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_unknown_module),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_syntax),
        cmocka_unit_test(test_ssl),
        cmocka_unit_test(test_accumulates),
        cmocka_unit_test(test_global),
        cmocka_unit_test(test_local_address),
        cmocka_unit_test(test_threads_max),
        cmocka_unit_test(test_valid_objects),
        cmocka_unit_test(test_monitor_runner),
        cmocka_unit_test(test_monitored_twice),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_errors_file),
        cmocka_unit_test(test_maxscale_style),
    };

    return cmocka_run_group_tests(tests, NULL, teardown);
}
