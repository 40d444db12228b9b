/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of readwritesplit's replica choice (rws_select.c, compiled in
 * directly: the function is pure and hidden inside the module).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../server/modules/routing/readwritesplit/rws_select.c"

static void
test_none_ok(void **state)
{
    struct rws_cand c[2] = {{.ok = false}, {.ok = false}};

    (void)state;
    assert_int_equal(rws_select(c, 2, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, -1),
                     -1);
    assert_int_equal(rws_select(c, 0, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, -1),
                     -1);
    assert_int_equal(rws_select(c, 2, RWS_ADAPTIVE_ROUTING, 0, 0, -1), -1);
}

static void
test_least_operations_and_rotation(void **state)
{
    struct rws_cand c[3] = {
        {.ok = false, .operations = 0},
        {.ok = true, .connected = true, .operations = 3},
        {.ok = true, .connected = true, .operations = 1},
    };

    (void)state;
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, -1),
                     2);
    c[1].operations = 1;
    /* A tie: the rotate-th of the two equally good ones (the server that
     * may not take the read does not count), so consecutive sessions
     * start on different replicas, evenly. */
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, -1),
                     1);
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 1, 0, -1),
                     2);
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 2, 0, -1),
                     1);
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 3, 0, -1),
                     2);
}

static void
test_prefer_last_used(void **state)
{
    struct rws_cand c[3] = {
        {.ok = true, .connected = true, .operations = 0},
        {.ok = true, .connected = true, .operations = 4},
        {.ok = true, .connected = true, .operations = 5},
    };

    (void)state;
    /* One operation busier than the best: stay. */
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, 2),
                     0);
    c[0].operations = 4;
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, 2),
                     2);
    /* Two busier: move. */
    c[0].operations = 3;
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, 2),
                     0);
    /* A preferred server that may not take the read, or is not connected,
     * or an index out of range, is ignored. */
    c[0].operations = 5;
    c[1].ok = false;
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, 1),
                     0);
    c[2].connected = false;
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, 2),
                     0);
    assert_int_equal(rws_select(c, 3, RWS_LEAST_CURRENT_OPERATIONS, 0, 0, 7),
                     0);
    /* Other criteria keep it only on an exact tie. */
    c[0] = (struct rws_cand){.ok = true, .connected = true, .router_conns = 2};
    c[1] = (struct rws_cand){.ok = true, .connected = true, .router_conns = 3};
    assert_int_equal(rws_select(c, 2, RWS_LEAST_ROUTER_CONNECTIONS, 0, 0, 1),
                     0);
    c[1].router_conns = 2;
    assert_int_equal(rws_select(c, 2, RWS_LEAST_ROUTER_CONNECTIONS, 0, 0, 1),
                     1);
}

static void
test_connected_wins_ties(void **state)
{
    struct rws_cand c[2] = {
        {.ok = true, .connected = false, .router_conns = 4},
        {.ok = true, .connected = true, .router_conns = 4},
    };

    (void)state;
    assert_int_equal(rws_select(c, 2, RWS_LEAST_ROUTER_CONNECTIONS, 0, 0, -1),
                     1);
    c[0].router_conns = 3;
    assert_int_equal(rws_select(c, 2, RWS_LEAST_ROUTER_CONNECTIONS, 0, 0, -1),
                     0);
}

static void
test_criteria(void **state)
{
    struct rws_cand c[3] = {
        {.ok = true, .lag = 5, .global_conns = 1, .router_conns = 9},
        {.ok = true, .lag = -1, .global_conns = 7, .router_conns = 1},
        {.ok = true, .lag = 2, .global_conns = 3, .router_conns = 5},
    };

    (void)state;
    /* Unknown lag counts as the worst. */
    assert_int_equal(rws_select(c, 3, RWS_LEAST_BEHIND_MASTER, 0, 0, -1), 2);
    assert_int_equal(rws_select(c, 3, RWS_LEAST_GLOBAL_CONNECTIONS, 0, 0, -1), 0);
    assert_int_equal(rws_select(c, 3, RWS_LEAST_ROUTER_CONNECTIONS, 0, 0, -1), 1);
}

static void
test_adaptive(void **state)
{
    struct rws_cand c[2] = {
        {.ok = true, .resp_us = 1000},    /* 1 ms: weight 1 */
        {.ok = true, .resp_us = 10000},   /* 10 ms: weight 1/100 */
    };
    int first = 0;

    (void)state;
    for (uint32_t r = 0; r < 1000; r++) {
        int idx = rws_select(c, 2, RWS_ADAPTIVE_ROUTING, 0,
                             r * (UINT32_MAX / 1000), -1);
        assert_true(idx == 0 || idx == 1);
        first += idx == 0;
    }
    assert_true(first > 980 && first < 1000);
    /* An unmeasured server is tried first. */
    c[1].resp_us = 0;
    assert_int_equal(rws_select(c, 2, RWS_ADAPTIVE_ROUTING, 0, 0, -1), 1);
    c[1].ok = false;
    assert_int_equal(rws_select(c, 2, RWS_ADAPTIVE_ROUTING, 0, 0, -1), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_ok),
        cmocka_unit_test(test_least_operations_and_rotation),
        cmocka_unit_test(test_prefer_last_used),
        cmocka_unit_test(test_connected_wins_ties),
        cmocka_unit_test(test_criteria),
        cmocka_unit_test(test_adaptive),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
