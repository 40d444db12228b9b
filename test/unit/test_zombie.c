/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Zombie reclamation with real workers, in both event models.
 *
 * Three workers: worker 0 closes a DCB, worker 1 is held inside a message
 * (it cannot start a new loop turn), worker 2 is idle in epoll_wait. The
 * closed DCB must not be freed while worker 1 is held, and must be freed
 * soon after it is released (the idle worker must not stall it). A DCB
 * with a reference held is not freed until the reference is dropped.
 *
 * The same epochs free unpublished configuration and retired module
 * instances (sl__worker_defer, generation.c): a deferred function does not
 * run while a worker has not started a new turn, and does soon after; a
 * retired instance is destroyed only when its last session lets go.
 *
 * Destroyed objects (sl__obj_destroyed): a service with a session and the
 * server it lists are both freed only when the session lets go, the
 * server after the service (ASan sees a use after free or a leak
 * otherwise); the REST counter of destroyed objects comes back to zero.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dcb_int.h"
#include "worker_int.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool held;
static bool release_hold;
static bool closed_done;
static struct sl_dcb *last_dcb;
static bool take_ref;

static uint64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Wait (bounded) until *flag under mu. */
static bool
wait_flag(bool *flag, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    bool v;

    for (;;) {
        pthread_mutex_lock(&mu);
        v = *flag;
        pthread_mutex_unlock(&mu);
        if (v || now_ms() > end) {
            return v;
        }
        sleep_ms(2);
    }
}

static bool
wait_freed(uint64_t target, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;

    while (sl__dcb_freed_count() < target) {
        if (now_ms() > end) {
            return false;
        }
        sleep_ms(2);
    }
    return true;
}

static void
hold_worker(void *arg)
{
    uint64_t end = now_ms() + 10000;

    pthread_mutex_lock(&mu);
    held = true;
    while (!release_hold && now_ms() < end) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    held = false;
    pthread_mutex_unlock(&mu);
}

static uint32_t
internal_fn(struct sl_dcb *dcb, uint32_t events, void *arg)
{
    return 0;
}

static void
make_and_close(void *arg)
{
    int sv[2];
    struct sl_dcb *dcb;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) {
        abort();
    }
    dcb = sl__dcb_new_internal(sv[0], internal_fn, NULL);
    if (dcb == NULL || sl__dcb_add(dcb) != 0) {
        abort();
    }
    if (take_ref) {
        sl_dcb_ref(dcb);
    }
    sl_dcb_close(dcb);
    close(sv[1]);
    pthread_mutex_lock(&mu);
    last_dcb = dcb;
    closed_done = true;
    pthread_mutex_unlock(&mu);
}

/* Idle workers sleep "forever" here: a zombie is freed only if its worker
 * nudges the sleepers, so the 5 s waits below just stop waiting and a
 * missing nudge fails (with the stock 1 s timeout it would pass). */
#define TEST_IDLE_TIMEOUT_MS (10 * 60 * 1000)

static void
start_workers(enum sl_event_model model)
{
    sl__worker_idle_timeout_ms = TEST_IDLE_TIMEOUT_MS;
    held = release_hold = closed_done = take_ref = false;
    last_dcb = NULL;
    assert_int_equal(sl__workers_init(3, model), 0);
    assert_int_equal(sl__workers_start(), 0);
}

static void
close_one_on_worker0(void)
{
    pthread_mutex_lock(&mu);
    closed_done = false;
    pthread_mutex_unlock(&mu);
    assert_int_equal(sl_worker_post(sl_worker_get(0), make_and_close, NULL),
                     0);
    assert_true(wait_flag(&closed_done, 5000));
}

static void
run_zombie(enum sl_event_model model)
{
    uint64_t freed0;
    uint64_t t0;

    start_workers(model);
    /* hold worker 1 inside a message: it cannot begin a new turn */
    assert_int_equal(sl_worker_post(sl_worker_get(1), hold_worker, NULL), 0);
    assert_true(wait_flag(&held, 5000));
    /* worker 2 goes idle in epoll_wait */
    t0 = now_ms();
    while (!atomic_load(&sl_worker_get(2)->sleeping) && now_ms() < t0 + 5000) {
        sleep_ms(1);
    }
    assert_true(atomic_load(&sl_worker_get(2)->sleeping));

    freed0 = sl__dcb_freed_count();
    close_one_on_worker0();
    assert_false(sl_dcb_is_open(last_dcb));
    /* worker 0 and the idle worker 2 pass their loops many times here */
    sleep_ms(300);
    assert_int_equal(sl__dcb_freed_count(), freed0);

    pthread_mutex_lock(&mu);
    release_hold = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    /* idle workers sleep 10 minutes: only the nudge frees it in time */
    assert_true(wait_freed(freed0 + 1, 5000));

    /* a held reference keeps the memory after every worker passed */
    take_ref = true;
    close_one_on_worker0();
    sleep_ms(300);
    assert_int_equal(sl__dcb_freed_count(), freed0 + 1);
    sl_dcb_unref(last_dcb);
    assert_true(wait_freed(freed0 + 2, 5000));

    sl__workers_finish();
    assert_int_equal(sl__dcb_count(), 0);
}

static void
test_zombie_pinned(void **state)
{
    run_zombie(SL_EVENT_MODEL_PINNED);
}

static void
test_zombie_shared(void **state)
{
    run_zombie(SL_EVENT_MODEL_SHARED);
}

/* Idle workers alone: a zombie is freed promptly even though two of the
 * three workers have nothing to do. */
static void
run_idle(enum sl_event_model model)
{
    uint64_t freed0;
    uint64_t t0;

    start_workers(model);
    sleep_ms(50);
    freed0 = sl__dcb_freed_count();
    t0 = now_ms();
    close_one_on_worker0();
    assert_true(wait_freed(freed0 + 1, 5000));
    print_message("freed after %llu ms\n",
                  (unsigned long long)(now_ms() - t0));
    sl__workers_finish();
    assert_int_equal(sl__dcb_count(), 0);
}

static void
test_idle_pinned(void **state)
{
    run_idle(SL_EVENT_MODEL_PINNED);
}

static void
test_idle_shared(void **state)
{
    run_idle(SL_EVENT_MODEL_SHARED);
}

static int deferred_ran;

static void
deferred_fn(void *arg)
{
    deferred_ran++;
}

/* Reclaim (as the admin thread does) until n deferred functions ran. */
static bool
reclaim_until(int n, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;

    while (deferred_ran < n) {
        sl__worker_reclaim(false);
        if (now_ms() > end) {
            return false;
        }
        sleep_ms(2);
    }
    return true;
}

static int destroyed;

static void
fake_destroy(void *inst)
{
    destroyed++;
}

static void
run_deferred(enum sl_event_model model)
{
    static const struct sl_router_ops ops = {.destroy_instance = fake_destroy};
    static int instance;
    struct sl_inst_ref *ref;
    struct sl_inst_ref *slot;
    struct sl_inst_ref *ses;
    long live0 = sl__inst_live();

    start_workers(model);
    deferred_ran = 0;
    destroyed = 0;
    assert_int_equal(sl_worker_post(sl_worker_get(1), hold_worker, NULL), 0);
    assert_true(wait_flag(&held, 5000));
    assert_int_equal(sl__worker_defer(deferred_fn, NULL), 0);
    /* worker 1 is held inside a turn that began before the defer */
    sleep_ms(300);
    assert_int_equal(sl__worker_reclaim(false), 0);
    assert_int_equal(deferred_ran, 0);
    pthread_mutex_lock(&mu);
    release_hold = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    /* idle workers sleep 10 minutes: only the defer's nudge lets it run */
    assert_true(reclaim_until(1, 5000));

    /* an instance with one session: retired, it outlives the object's
     * reference and is destroyed once the session lets go (and an epoch
     * passed) */
    ref = sl__inst_ref_new(&instance, &ops, NULL);
    assert_non_null(ref);
    slot = ref;
    ses = sl__inst_ref_get(&slot);   /* a session's reference */
    assert_ptr_equal(ses, ref);
    assert_ptr_equal(sl__inst_ref_instance(ses), &instance);
    sl__inst_ref_retire(ref, NULL, NULL, malloc(16), 0);
    sleep_ms(100);
    while (sl__worker_reclaim(false) > 0) {
    }
    assert_int_equal(destroyed, 0);
    assert_int_equal(sl__inst_live(), live0 + 1);
    sl__inst_ref_put(ses);
    for (uint64_t end = now_ms() + 5000;
         destroyed == 0 && now_ms() < end; sleep_ms(2)) {
        sl__worker_reclaim(false);
    }
    assert_int_equal(destroyed, 1);
    assert_int_equal(sl__inst_live(), live0);
    sl__workers_finish();
    assert_int_equal(sl__worker_deferred(), 0);
}

/* Reclaim until nothing is left or ms passed: the deferred count. */
static size_t
reclaim_all(int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;

    while (sl__worker_deferred() > 0 && now_ms() < end) {
        sl__worker_reclaim(false);
        sleep_ms(2);
    }
    return sl__worker_deferred();
}

static void
run_destroyed(enum sl_event_model model)
{
    struct sl_service *svc = calloc(1, sizeof(*svc));
    struct sl_server *srv = calloc(1, sizeof(*srv));
    long live0 = sl__obj_destroyed_live();

    assert_non_null(svc);
    assert_non_null(srv);
    svc->servers = calloc(1, sizeof(*svc->servers));
    assert_non_null(svc->servers);
    svc->servers[0] = srv;
    svc->nservers = 1;
    start_workers(model);
    sl__service_hold_links(svc, true);
    sl__obj_ref(SL_OBJ_SERVICE, svc);   /* a session's */
    sl__obj_destroyed(SL_OBJ_SERVICE, svc);
    sl__obj_destroyed(SL_OBJ_SERVER, srv);
    assert_int_equal(reclaim_all(5000), 0);
    /* both held: the service by its session, the server by the service */
    assert_int_equal(sl__obj_destroyed_live(), live0 + 2);
    assert_int_equal(atomic_load(&svc->refs), 0);
    assert_int_equal(atomic_load(&srv->refs), 0);
    sl__obj_unref(SL_OBJ_SERVICE, svc);   /* the session ends */
    assert_int_equal(reclaim_all(5000), 0);
    assert_int_equal(sl__obj_destroyed_live(), live0);
    sl__workers_finish();
}

static void
test_destroyed_pinned(void **state)
{
    run_destroyed(SL_EVENT_MODEL_PINNED);
}

static void
test_destroyed_shared(void **state)
{
    run_destroyed(SL_EVENT_MODEL_SHARED);
}

static void
test_deferred_pinned(void **state)
{
    run_deferred(SL_EVENT_MODEL_PINNED);
}

static void
test_deferred_shared(void **state)
{
    run_deferred(SL_EVENT_MODEL_SHARED);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zombie_pinned),
        cmocka_unit_test(test_zombie_shared),
        cmocka_unit_test(test_idle_pinned),
        cmocka_unit_test(test_idle_shared),
        cmocka_unit_test(test_deferred_pinned),
        cmocka_unit_test(test_destroyed_pinned),
        cmocka_unit_test(test_destroyed_shared),
        cmocka_unit_test(test_deferred_shared),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
