/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Event queue tests with real threads and fake work items, for both event
 * models: a private queue (pinned: one thread notifies and processes) and a
 * shared one (any thread notifies, several threads process).
 *
 *  - fairness: an item with endless work cannot delay a ready one by more
 *    than one budgeted turn (processing order is recorded);
 *  - an event arriving while an item is processed marks it PENDING and
 *    re-queues it at the tail when its turn ends;
 *  - shared: with several processing threads and a concurrent poller, no
 *    item is ever processed by two threads at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "evq.h"

#define EV_IN 1u
#define EV_OTHER 2u

struct fake {
    struct sl_evq_item it;   /* first */
    char name;
    bool endless;            /* always has work left after its budget */
    int turns;
    uint32_t last_events;
    atomic_int inside;       /* threads inside the handler right now */
};

static struct sl_evq q;
static char order[64];
static size_t norder;

/* Hooks run inside a handler on a given turn (scenario-specific). */
static void (*during)(struct fake *f);

static uint32_t
record_handler(struct sl_evq_item *it, uint32_t events)
{
    struct fake *f = (struct fake *)it;

    f->turns++;
    f->last_events = events;
    if (norder < sizeof(order) - 1) {
        order[norder++] = f->name;
    }
    if (during != NULL) {
        during(f);
    }
    return f->endless ? EV_IN : 0;
}

static void
fake_init(struct fake *f, char name, bool endless)
{
    memset(f, 0, sizeof(*f));
    sl__evq_item_init(&f->it, record_handler);
    f->name = name;
    f->endless = endless;
}

static void
reset(bool shared)
{
    sl__evq_init(&q, shared);
    memset(order, 0, sizeof(order));
    norder = 0;
    during = NULL;
}

/* Run fn on a fresh thread and wait: the queue is driven by a real thread
 * other than the test's main thread. */
static void
on_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;

    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

/* ---- fairness ---- */

static struct fake fa, fb, fc;

static void
notify_c_on_third_turn_of_a(struct fake *f)
{
    if (f == &fa && f->turns == 3) {
        sl__evq_notify(&q, &fc.it, EV_IN);
    }
}

static void *
fairness_body(void *arg)
{
    int i;

    fake_init(&fa, 'A', true);
    fake_init(&fb, 'B', true);
    fake_init(&fc, 'C', false);
    during = notify_c_on_third_turn_of_a;
    sl__evq_notify(&q, &fa.it, EV_IN);
    sl__evq_notify(&q, &fb.it, EV_IN);
    for (i = 0; i < 12; i++) {
        sl__evq_process_one(&q);
    }
    return NULL;
}

static void
run_fairness(bool shared)
{
    const char *c;

    reset(shared);
    on_thread(fairness_body, NULL);
    /* two endless items alternate; C, ready during A's third turn, runs
     * after B's pending turn and before A's next one */
    assert_string_equal(order, "ABABABCABABA");
    c = strchr(order, 'C');
    assert_non_null(c);
    assert_int_equal(fc.turns, 1);
    assert_int_equal(fc.last_events, EV_IN);
    sl__evq_destroy(&q);
}

static void
test_fairness_pinned(void **state)
{
    run_fairness(false);
}

static void
test_fairness_shared(void **state)
{
    run_fairness(true);
}

/* An endless item and one ready item: the ready one waits at most one
 * budgeted turn, whatever the order they were queued in. */
static void *
one_budget_body(void *arg)
{
    int i;

    fake_init(&fa, 'A', true);
    fake_init(&fb, 'B', false);
    sl__evq_notify(&q, &fa.it, EV_IN);
    sl__evq_notify(&q, &fb.it, EV_IN);
    for (i = 0; i < 5; i++) {
        sl__evq_process_one(&q);
    }
    /* a whole process() pass never runs the endless item twice */
    norder = 0;
    memset(order, 0, sizeof(order));
    sl__evq_notify(&q, &fb.it, EV_IN);
    sl__evq_process(&q, SIZE_MAX);
    return NULL;
}

static void
run_one_budget(bool shared)
{
    reset(shared);
    on_thread(one_budget_body, NULL);
    assert_string_equal(order, "AB");
    assert_int_equal(fb.turns, 2);
    sl__evq_destroy(&q);
}

static void
test_one_budget_pinned(void **state)
{
    run_one_budget(false);
}

static void
test_one_budget_shared(void **state)
{
    run_one_budget(true);
}

/* ---- an event during processing ---- */

static int state_seen;

static void
event_while_processing(struct fake *f)
{
    if (f == &fa && f->turns == 1) {
        sl__evq_notify(&q, &fb.it, EV_IN);      /* B becomes ready */
        sl__evq_notify(&q, &fa.it, EV_OTHER);   /* and A gets an event */
        state_seen = atomic_load(&fa.it.state);
    }
}

static void *
pending_body(void *arg)
{
    fake_init(&fa, 'A', false);
    fake_init(&fb, 'B', false);
    during = event_while_processing;
    sl__evq_notify(&q, &fa.it, EV_IN);
    while (sl__evq_process_one(&q)) {
    }
    return NULL;
}

static void
run_pending(bool shared)
{
    reset(shared);
    on_thread(pending_body, NULL);
    assert_int_equal(state_seen, SL_EVQ_PENDING);
    /* A's pending event put it behind B, not in front */
    assert_string_equal(order, "ABA");
    assert_int_equal(fa.turns, 2);
    assert_int_equal(fa.last_events, EV_OTHER);
    assert_int_equal(atomic_load(&fa.it.state), SL_EVQ_IDLE);
    assert_int_equal(atomic_load(&fb.it.state), SL_EVQ_IDLE);
    sl__evq_destroy(&q);
}

static void
test_pending_pinned(void **state)
{
    run_pending(false);
}

static void
test_pending_shared(void **state)
{
    run_pending(true);
}

/* ---- no concurrent processing ---- */

#define NITEMS 8
#define NPROC 3
#define NOTIFIES 200000
#define TARGET_TURNS 100000

static struct fake items[NITEMS];
static atomic_int violations;
static atomic_long handled;
static atomic_bool stop_procs;
static atomic_uint rng_seed = 12345;

static uint32_t
concurrent_handler(struct sl_evq_item *it, uint32_t events)
{
    struct fake *f = (struct fake *)it;
    volatile int spin;
    unsigned r = atomic_fetch_add(&rng_seed, 2654435761u);

    if (atomic_fetch_add(&f->inside, 1) != 0) {
        atomic_fetch_add(&violations, 1);
    }
    for (spin = 0; spin < (int)(r % 200); spin++) {
    }
    f->turns++;   /* a data race (and a lost count) if two threads ran */
    atomic_fetch_sub(&f->inside, 1);
    atomic_fetch_add(&handled, 1);
    return (r >> 8) % 4 == 0 ? EV_IN : 0;   /* sometimes work left */
}

static void *
processor(void *arg)
{
    bool poller = arg != NULL;
    unsigned i = 0;

    while (!atomic_load(&stop_procs)) {
        if (poller) {
            /* a processing thread also polls, as workers do */
            sl__evq_notify(&q, &items[i++ % NITEMS].it, EV_OTHER);
        }
        if (!sl__evq_process_one(&q)) {
            sched_yield();
        }
    }
    return NULL;
}

static void *
notifier(void *arg)
{
    unsigned i = 0;

    while (!atomic_load(&stop_procs)) {
        sl__evq_notify(&q, &items[(i++ * 7) % NITEMS].it, EV_IN);
    }
    return NULL;
}

static void
test_no_concurrent_processing_shared(void **state)
{
    pthread_t procs[NPROC];
    pthread_t notif;
    int i;

    reset(true);
    for (i = 0; i < NITEMS; i++) {
        memset(&items[i], 0, sizeof(items[i]));
        sl__evq_item_init(&items[i].it, concurrent_handler);
    }
    atomic_store(&violations, 0);
    atomic_store(&handled, 0);
    atomic_store(&stop_procs, false);
    for (i = 0; i < NPROC; i++) {
        assert_int_equal(pthread_create(&procs[i], NULL, processor,
                                        i == 0 ? (void *)1 : NULL),
                         0);
    }
    assert_int_equal(pthread_create(&notif, NULL, notifier, NULL), 0);
    /* run until many turns were processed; the 240 s bound (under
     * ctest's timeout) only stops waiting on a stuck queue, it measures
     * no speed: a slow machine just takes longer */
    for (i = 0; i < 240000 && atomic_load(&handled) < TARGET_TURNS; i++) {
        struct timespec ms = {.tv_nsec = 1000000};

        nanosleep(&ms, NULL);
    }
    atomic_store(&stop_procs, true);
    pthread_join(notif, NULL);
    for (i = 0; i < NPROC; i++) {
        pthread_join(procs[i], NULL);
    }
    while (sl__evq_process_one(&q)) {
    }
    assert_int_equal(atomic_load(&violations), 0);
    print_message("handled %ld turns\n", (long)atomic_load(&handled));
    assert_true(atomic_load(&handled) >= TARGET_TURNS);
    long sum = 0;

    for (i = 0; i < NITEMS; i++) {
        assert_int_equal(atomic_load(&items[i].it.state), SL_EVQ_IDLE);
        assert_int_equal(atomic_load(&items[i].it.events), 0);
        sum += items[i].turns;
    }
    /* no lost updates of the unsynchronised counter */
    assert_int_equal(sum, atomic_load(&handled));
    sl__evq_destroy(&q);
}

/* Pinned: one thread notifies (also from inside handlers) and processes;
 * handlers never nest and every event is handled. */
static void *
pinned_body(void *arg)
{
    int i;

    for (i = 0; i < NITEMS; i++) {
        memset(&items[i], 0, sizeof(items[i]));
        sl__evq_item_init(&items[i].it, concurrent_handler);
    }
    for (i = 0; i < NOTIFIES / 10; i++) {
        sl__evq_notify(&q, &items[i % NITEMS].it, EV_IN);
        if (i % 3 == 0) {
            sl__evq_process(&q, SIZE_MAX);
        }
    }
    while (sl__evq_process_one(&q)) {
    }
    return NULL;
}

static void
test_no_concurrent_processing_pinned(void **state)
{
    int i;

    reset(false);
    atomic_store(&violations, 0);
    atomic_store(&handled, 0);
    on_thread(pinned_body, NULL);
    assert_int_equal(atomic_load(&violations), 0);
    for (i = 0; i < NITEMS; i++) {
        assert_int_equal(atomic_load(&items[i].it.state), SL_EVQ_IDLE);
        assert_true(items[i].turns > 0);
    }
    sl__evq_destroy(&q);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fairness_pinned),
        cmocka_unit_test(test_fairness_shared),
        cmocka_unit_test(test_one_budget_pinned),
        cmocka_unit_test(test_one_budget_shared),
        cmocka_unit_test(test_pending_pinned),
        cmocka_unit_test(test_pending_shared),
        cmocka_unit_test(test_no_concurrent_processing_pinned),
        cmocka_unit_test(test_no_concurrent_processing_shared),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
