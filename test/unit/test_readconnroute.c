/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of readconnroute's server selection (rcr_select.c, compiled in
 * directly: the function is pure and hidden inside the module).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../server/modules/routing/readconnroute/rcr_select.c"

#define UP SL_SRV_RUNNING
#define MASTER (SL_SRV_RUNNING | SL_SRV_MASTER)
#define SLAVE (SL_SRV_RUNNING | SL_SRV_SLAVE)

/* Start `count` sessions one after another, as new_session would. */
static void
start_sessions(struct rcr_candidate *c, size_t n, uint32_t opts, int count)
{
    for (int i = 0; i < count; i++) {
        int idx = rcr_select(c, n, opts, 0);
        assert_true(idx >= 0);
        c[idx].sessions++;
    }
}

static void
test_least_connections(void **state)
{
    struct rcr_candidate c[] = {
        {UP, 1, 5, 0, 0}, {UP, 1, 2, 0, 0}, {UP, 1, 3, 0, 0},
    };

    assert_int_equal(rcr_select(c, 3, RCR_OPT_RUNNING, 0), 1);
    c[1].sessions = 3;
    /* Tie between servers 1 and 2: the first in config order wins. */
    assert_int_equal(rcr_select(c, 3, RCR_OPT_RUNNING, 0), 1);
}

static void
test_even_spread(void **state)
{
    struct rcr_candidate c[] = {
        {UP, 1, 0, 0, 0}, {SLAVE, 1, 0, 0, 0}, {MASTER, 1, 0, 0, 0},
    };

    start_sessions(c, 3, RCR_OPT_RUNNING, 300);
    assert_int_equal(c[0].sessions, 100);
    assert_int_equal(c[1].sessions, 100);
    assert_int_equal(c[2].sessions, 100);
}

static void
test_weights(void **state)
{
    struct rcr_candidate c[] = {
        {SLAVE, 3, 0, 0, 0}, {SLAVE, 1, 0, 0, 0},
    };

    start_sessions(c, 2, RCR_OPT_SLAVE, 1000);
    assert_int_equal(c[0].sessions, 750);
    assert_int_equal(c[1].sessions, 250);
}

static void
test_weight_zero_last_resort(void **state)
{
    struct rcr_candidate c[] = {
        {SLAVE, 0, 0, 0, 0}, {SLAVE, 1, 1000, 0, 0},
    };

    assert_int_equal(rcr_select(c, 2, RCR_OPT_SLAVE, 0), 1);
    c[1].status = 0;   /* down: the weight-0 server is all that is left */
    assert_int_equal(rcr_select(c, 2, RCR_OPT_SLAVE, 0), 0);

    /* Only weight-0 servers: least sessions among them. */
    struct rcr_candidate z[] = {
        {UP, 0, 4, 0, 0}, {UP, 0, 2, 0, 0}, {UP, -1, 3, 0, 0},
    };
    assert_int_equal(rcr_select(z, 3, RCR_OPT_RUNNING, 0), 1);
}

static void
test_maintenance_draining_down(void **state)
{
    struct rcr_candidate c[] = {
        {UP | SL_SRV_MAINT, 1, 0, 0, 0},
        {UP | SL_SRV_DRAINING, 1, 0, 0, 0},
        {SL_SRV_SLAVE, 1, 0, 0, 0},   /* slave bit but not running */
        {UP, 1, 50, 0, 0},
    };

    assert_int_equal(rcr_select(c, 4, RCR_OPT_RUNNING, 0), 3);
    c[3].status |= SL_SRV_MAINT;
    assert_int_equal(rcr_select(c, 4, RCR_OPT_RUNNING, 0), -1);
    assert_false(rcr_eligible(MASTER | SL_SRV_DRAINING, RCR_OPT_MASTER));
    assert_false(rcr_eligible(MASTER | SL_SRV_MAINT, RCR_OPT_MASTER));
    assert_true(rcr_eligible(MASTER | SL_SRV_AUTH_ERROR, RCR_OPT_MASTER));
}

static void
test_master_only(void **state)
{
    struct rcr_candidate c[] = {
        {SLAVE, 1, 0, 0, 0}, {MASTER, 1, 100, 0, 0}, {UP, 1, 0, 0, 0},
    };

    assert_int_equal(rcr_select(c, 3, RCR_OPT_MASTER, 0), 1);
    c[1].status = SLAVE;   /* demoted: a master service has nothing */
    assert_int_equal(rcr_select(c, 3, RCR_OPT_MASTER, 0), -1);
}

static void
test_slave_only_and_fallback(void **state)
{
    struct rcr_candidate c[] = {
        {MASTER, 1, 0, 0, 0}, {SLAVE, 1, 10, 0, 0}, {MASTER | SL_SRV_SLAVE, 1, 0, 0, 0},
    };

    /* Servers that are master (even if also slave) are skipped. */
    assert_int_equal(rcr_select(c, 3, RCR_OPT_SLAVE, 0), 1);
    c[1].status |= SL_SRV_MAINT;
    /* No slave left: fall back to the least loaded master. */
    assert_int_equal(rcr_select(c, 3, RCR_OPT_SLAVE, 0), 0);
    c[0].sessions = 5;
    assert_int_equal(rcr_select(c, 3, RCR_OPT_SLAVE, 0), 2);
    /* A draining master is not a fallback either. */
    c[0].status |= SL_SRV_DRAINING;
    c[2].status = 0;
    assert_int_equal(rcr_select(c, 3, RCR_OPT_SLAVE, 0), -1);
}

static void
test_master_or_slave_and_synced(void **state)
{
    struct rcr_candidate c[] = {
        {UP, 1, 0, 0, 0}, {SLAVE, 1, 3, 0, 0}, {MASTER, 1, 2, 0, 0},
        {UP | SL_SRV_SYNCED, 1, 9, 0, 0},
    };

    assert_int_equal(rcr_select(c, 4, RCR_OPT_MASTER | RCR_OPT_SLAVE, 0), 2);
    assert_int_equal(rcr_select(c, 4, RCR_OPT_SYNCED, 0), 3);
    c[3].status = UP;
    /* Nothing synced: the master is the fallback. */
    assert_int_equal(rcr_select(c, 4, RCR_OPT_SYNCED, 0), 2);
}

static void
test_max_replication_lag(void **state)
{
    struct rcr_candidate c[] = {
        {MASTER, 1, 0, SL_SERVER_LAG_UNKNOWN, 0},
        {SLAVE, 1, 0, 30, 0},
        {SLAVE, 1, 5, 2, 0},
        {SLAVE, 1, 0, SL_SERVER_LAG_UNKNOWN, 0},
    };

    /* 0: lag is not looked at; the least loaded replica wins. */
    assert_int_equal(rcr_select(c, 4, RCR_OPT_SLAVE, 0), 1);
    /* 10 s: the lagging replica and the one of unknown lag are skipped. */
    assert_int_equal(rcr_select(c, 4, RCR_OPT_SLAVE, 10), 2);
    c[2].lag = 10;   /* exactly the limit still qualifies */
    assert_int_equal(rcr_select(c, 4, RCR_OPT_SLAVE, 10), 2);
    c[2].lag = 11;
    /* No replica qualifies: the primary (whose lag never counts). */
    assert_int_equal(rcr_select(c, 4, RCR_OPT_SLAVE, 10), 0);
    /* running: the primary qualifies, a lagging replica does not. */
    c[0].sessions = 50;
    c[2].lag = 0;
    assert_int_equal(rcr_select(c, 4, RCR_OPT_RUNNING, 10), 2);
}

/* rank (MaxScale: readconnroute uses primary-rank servers before
 * secondary ones as long as they match router_options). */
static void
test_rank(void **state)
{
    struct rcr_candidate c[] = {
        {MASTER, 1, 0, 0, 0},
        {SLAVE, 1, 50, 0, 0},
        {SLAVE, 1, 0, 0, 1},   /* secondary, idle */
    };

    /* The busy primary-rank replica beats the idle secondary one. */
    assert_int_equal(rcr_select(c, 3, RCR_OPT_SLAVE, 0), 1);
    start_sessions(c, 3, RCR_OPT_SLAVE, 20);
    assert_int_equal(c[2].sessions, 0);
    /* Its replica gone: the secondary replica, not the master fallback. */
    c[1].status |= SL_SRV_MAINT;
    assert_int_equal(rcr_select(c, 3, RCR_OPT_SLAVE, 0), 2);
    /* Both ranks equal again: least loaded. */
    c[1].status = SLAVE;
    c[2].rank = 0;
    start_sessions(c, 3, RCR_OPT_SLAVE, 70);
    assert_int_equal(c[1].sessions, 70);   /* 50 + the 20 above */
    assert_int_equal(c[2].sessions, 70);

    /* router_options=master with several masters (MXS-4132): the best
     * rank first, in configuration order. */
    struct rcr_candidate m[] = {
        {MASTER, 1, 9, 0, 1}, {MASTER, 1, 5, 0, 0}, {MASTER, 1, 0, 0, 1},
    };
    assert_int_equal(rcr_select(m, 3, RCR_OPT_MASTER, 0), 1);
    m[1].status = SLAVE;
    assert_int_equal(rcr_select(m, 3, RCR_OPT_MASTER, 0), 2);
    /* A replica service's master fallback is rank-ordered too. */
    m[0].rank = 0;
    assert_int_equal(rcr_select(m, 3, RCR_OPT_SYNCED, 0), 0);
}

static void
test_empty(void **state)
{
    assert_int_equal(rcr_select(NULL, 0, RCR_OPT_RUNNING, 0), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_least_connections),
        cmocka_unit_test(test_even_spread),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_weight_zero_last_resort),
        cmocka_unit_test(test_maintenance_draining_down),
        cmocka_unit_test(test_master_only),
        cmocka_unit_test(test_slave_only_and_fallback),
        cmocka_unit_test(test_master_or_slave_and_synced),
        cmocka_unit_test(test_max_replication_lag),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_empty),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
