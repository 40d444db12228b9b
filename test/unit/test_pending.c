/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the pending-login counts (server/core/pending.c): the
 * per-host cap, counting against max_connections together with open
 * sessions, per-service separation, and release.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static void
test_per_host_cap(void **state)
{
    struct sl_service a = {.max_pending_logins_per_host = 3};
    struct sl_service b = {.max_pending_logins_per_host = 3};

    (void)state;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl__pending_admit(&a, "10.0.0.1", true), 0);
    }
    assert_int_equal(sl__pending_admit(&a, "10.0.0.1", true), -EUSERS);
    /* uncapped (unix sockets): counted, never refused */
    assert_int_equal(sl__pending_admit(&a, "10.0.0.1", false), 0);
    sl__pending_done(&a, "10.0.0.1");
    /* other hosts and other services are counted apart */
    assert_int_equal(sl__pending_admit(&a, "10.0.0.2", true), 0);
    assert_int_equal(sl__pending_admit(&b, "10.0.0.1", true), 0);
    assert_int_equal(atomic_load(&a.pending_logins), 4);
    /* one going frees one place */
    sl__pending_done(&a, "10.0.0.1");
    assert_int_equal(sl__pending_admit(&a, "10.0.0.1", true), 0);
    for (int i = 0; i < 3; i++) {
        sl__pending_done(&a, "10.0.0.1");
    }
    sl__pending_done(&a, "10.0.0.2");
    sl__pending_done(&b, "10.0.0.1");
    assert_int_equal(atomic_load(&a.pending_logins), 0);
    assert_int_equal(atomic_load(&b.pending_logins), 0);
    /* the entries were freed: a fresh start */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl__pending_admit(&a, "10.0.0.1", true), 0);
    }
    for (int i = 0; i < 3; i++) {
        sl__pending_done(&a, "10.0.0.1");
    }
}

static void
test_max_connections(void **state)
{
    struct sl_service s = {.max_connections = 4};
    struct sl_service open = {0};

    (void)state;
    atomic_store(&s.sessions, 2);
    assert_int_equal(sl__pending_admit(&s, "h", true), 0);
    assert_int_equal(sl__pending_admit(&s, "h", true), 0);
    assert_int_equal(sl__pending_admit(&s, "h", true), -EMFILE);
    /* a pending client logging in becomes a session: still full */
    sl__pending_done(&s, "h");
    atomic_fetch_add(&s.sessions, 1);
    assert_int_equal(sl__pending_admit(&s, "h", true), -EMFILE);
    atomic_fetch_sub(&s.sessions, 1);
    assert_int_equal(sl__pending_admit(&s, "h", true), 0);
    sl__pending_done(&s, "h");
    sl__pending_done(&s, "h");
    /* 0 = no caps at all */
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(sl__pending_admit(&open, "x", true), 0);
    }
    for (int i = 0; i < 1000; i++) {
        sl__pending_done(&open, "x");
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_host_cap),
        cmocka_unit_test(test_max_connections),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
