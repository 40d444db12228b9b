/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of mariadbmon's decisions (mmon_decide.c, compiled in
 * directly: pure functions over per-server views): GTID parsing and
 * ordering, primary choice whatever the config order, replica detection,
 * verify_master_failure, promotion choice with servers_no_promotion, and
 * the rejoin check that keeps a diverged server out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/modules/monitor/mariadbmon/mmon_decide.c"

static struct mmon_gtid_pos
pos(const char *s)
{
    struct mmon_gtid_pos p;

    assert_int_equal(mmon_gtid_parse(s, &p), 0);
    return p;
}

/* A running server; master = index it replicates from or -1. */
static struct mmon_view
srv(bool read_only, int master, const char *io_pos)
{
    struct mmon_view v;

    memset(&v, 0, sizeof(v));
    v.running = true;
    v.read_only = read_only;
    v.slave.master = master;
    if (master >= 0) {
        v.slave.present = true;
        v.slave.io_running = true;
        v.slave.sql_running = true;
        v.slave.io_pos = pos(io_pos);
        v.current_pos = pos(io_pos);
    }
    return v;
}

static void
test_gtid_parse_format(void **state)
{
    struct mmon_gtid_pos p;
    char buf[128];

    (void)state;
    p = pos("0-1-100,1-2-5");
    assert_int_equal(p.n, 2);
    assert_int_equal(p.g[1].domain, 1);
    assert_int_equal(p.g[1].server_id, 2);
    assert_int_equal(p.g[1].seq, 5);
    assert_string_equal(mmon_gtid_format(&p, buf, sizeof(buf)),
                        "0-1-100,1-2-5");
    assert_int_equal(pos("").n, 0);
    assert_int_equal(mmon_gtid_parse("0-1", &p), -EINVAL);
    assert_int_equal(mmon_gtid_parse("x-1-2", &p), -EINVAL);
}

static void
test_gtid_compare(void **state)
{
    struct mmon_gtid_pos a = pos("0-1-100");
    struct mmon_gtid_pos b = pos("0-1-99");
    struct mmon_gtid_pos c = pos("0-1-100,1-1-1");
    struct mmon_gtid_pos e = pos("");

    (void)state;
    assert_true(mmon_gtid_compare(&a, &b) > 0);
    assert_true(mmon_gtid_compare(&b, &a) < 0);
    assert_int_equal(mmon_gtid_compare(&a, &a), 0);
    assert_true(mmon_gtid_compare(&c, &a) > 0);
    assert_true(mmon_gtid_compare(&e, &b) < 0);
}

static void
test_primary_any_order(void **state)
{
    /* Config order db3, db1, db2: db1 (index 1) is the writable top. */
    struct mmon_view v[3] = {
        srv(true, 1, "0-1-5"), srv(false, -1, ""), srv(true, 1, "0-1-5"),
    };

    (void)state;
    assert_int_equal(mmon_pick_primary(v, 3, -1), 1);
    assert_true(mmon_is_replica(v, 3, 0));
    assert_true(mmon_is_replica(v, 3, 2));
    assert_false(mmon_is_replica(v, 3, 1));
    assert_int_equal(mmon_count_replicas(v, 3, 1), 2);
}

static void
test_no_usable_primary(void **state)
{
    struct mmon_view v[3] = {
        srv(false, -1, ""), srv(true, 0, "0-1-5"), srv(true, 0, "0-1-5"),
    };

    (void)state;
    v[0].running = false;
    assert_int_equal(mmon_pick_primary(v, 3, 0), -1);
    /* All read-only: still none (no writes routed). */
    v[0].running = true;
    v[0].read_only = true;
    assert_int_equal(mmon_pick_primary(v, 3, -1), -1);
    /* Maintenance excludes it too. */
    v[0].read_only = false;
    v[0].maint = true;
    assert_int_equal(mmon_pick_primary(v, 3, -1), -1);
}

static void
test_primary_ties_and_stickiness(void **state)
{
    /* Two writable servers: the one with replicas wins; without replicas
     * config order decides; the current primary keeps the role. */
    struct mmon_view v[3] = {
        srv(false, -1, ""), srv(false, -1, ""), srv(true, 1, "0-2-5"),
    };

    (void)state;
    assert_int_equal(mmon_pick_primary(v, 3, -1), 1);
    v[2] = srv(true, -1, "");
    assert_int_equal(mmon_pick_primary(v, 3, -1), 0);
    assert_int_equal(mmon_pick_primary(v, 3, 1), 1);
    /* A writable server replicating from a live one is not the top. */
    v[1] = srv(false, 0, "0-1-5");
    assert_int_equal(mmon_pick_primary(v, 3, 1), 0);
}

static void
test_verify_master_failure(void **state)
{
    struct mmon_view v[3] = {
        srv(false, -1, ""), srv(true, 0, "0-1-5"), srv(true, 0, "0-1-5"),
    };

    (void)state;
    v[0].running = false;   /* Sluice cannot reach it ... */
    v[1].slave.event_age_ms = 500;
    v[2].slave.event_age_ms = 500;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, -1), 1);
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), 1);
    /* master_failure_timeout: only a replica with a recent event counts
     * (the boundary included); an unknown age never does. */
    v[1].slave.event_age_ms = 10001;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), 2);
    v[2].slave.event_age_ms = 10000;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), 2);
    v[2].slave.event_age_ms = -1;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), -1);
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, -1), 1);
    /* An idle live primary sends a heartbeat each period: the window is
     * at least two periods, so 10001 ms with a 30 s period still holds
     * (MaxScale would fail it over), and 60001 ms does not. */
    v[1].slave.heartbeat_period_ms = 30000;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), 1);
    v[1].slave.event_age_ms = 60001;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), -1);
    v[1].slave.heartbeat_period_ms = 1000;   /* shorter: the timeout rules */
    v[1].slave.event_age_ms = 10001;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), -1);
    v[1].slave.heartbeat_period_ms = 0;
    v[1].slave.event_age_ms = 0;
    v[2].slave.event_age_ms = 0;
    /* ... and once the replicas lose it too, it is really down. */
    v[1].slave.io_running = false;
    v[1].slave.io_connecting = true;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), 2);
    v[2].slave.io_running = false;
    v[2].slave.io_connecting = true;
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, 10000), -1);
    assert_int_equal(mmon_primary_still_replicating(v, 3, 0, -1), -1);
    /* Replicas whose IO thread only reconnects still count as replicas. */
    assert_true(mmon_is_replica(v, 3, 1));
}

static void
test_promotion_choice(void **state)
{
    struct mmon_view v[3] = {
        srv(false, -1, ""), srv(true, 0, "0-1-99"), srv(true, 0, "0-1-100"),
    };
    char why[256];

    (void)state;
    v[0].running = false;
    /* The most advanced replica wins over config order. */
    assert_int_equal(mmon_pick_promotion(v, 3, 0, why, sizeof(why)), 2);
    /* Equal positions: config order. */
    v[1] = srv(true, 0, "0-1-100");
    assert_int_equal(mmon_pick_promotion(v, 3, 0, why, sizeof(why)), 1);
    /* servers_no_promotion is never promoted, even when ahead. */
    v[1] = srv(true, 0, "0-1-101");
    v[1].no_promotion = true;
    assert_int_equal(mmon_pick_promotion(v, 3, 0, why, sizeof(why)), 2);
    v[2].no_promotion = true;
    assert_int_equal(mmon_pick_promotion(v, 3, 0, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "servers_no_promotion"));
    /* A down replica is no candidate. */
    v[2].no_promotion = false;
    v[2].running = false;
    assert_int_equal(mmon_pick_promotion(v, 3, 0, why, sizeof(why)), -1);
    /* Disk space: the GTID first, then the one not low on disk space;
     * the switchover_on_low_disk_space choice skips those low on it. */
    v[1] = srv(true, 0, "0-1-100");
    v[2] = srv(true, 0, "0-1-100");
    v[1].disk_low = true;
    assert_int_equal(mmon_pick_promotion(v, 3, 0, why, sizeof(why)), 2);
    v[2] = srv(true, 0, "0-1-99");
    assert_int_equal(mmon_pick_promotion(v, 3, 0, why, sizeof(why)), 1);
    assert_int_equal(mmon_pick_promotion_disk_ok(v, 3, 0, why, sizeof(why)),
                     2);
    v[2].disk_low = true;
    assert_int_equal(mmon_pick_promotion_disk_ok(v, 3, 0, why, sizeof(why)),
                     -1);
    assert_non_null(strstr(why, "2 low on disk space"));
}

static void
test_rejoin(void **state)
{
    char why[256] = "";
    /* New primary db3 (id 3) was promoted after applying 0-1-100 from the
     * old primary db1 and has written up to 0-3-150 since. */
    struct mmon_gtid_pos pb = pos("0-3-150");
    struct mmon_gtid_pos ps = pos("0-1-100");
    struct mmon_gtid_pos old_ok = pos("0-1-100");
    struct mmon_gtid_pos old_behind = pos("0-1-90");
    struct mmon_gtid_pos old_diverged = pos("0-1-101");
    struct mmon_gtid_pos replica_of_new = pos("0-3-120");
    struct mmon_gtid_pos other_domain = pos("0-1-100,5-1-1");

    (void)state;
    assert_true(mmon_can_rejoin(&old_ok, &pb, &ps, 3, why, sizeof(why)));
    assert_true(mmon_can_rejoin(&old_behind, &pb, &ps, 3, why,
                                sizeof(why)));
    assert_true(mmon_can_rejoin(&replica_of_new, &pb, &ps, 3, why,
                                sizeof(why)));
    assert_false(mmon_can_rejoin(&old_diverged, &pb, &ps, 3, why,
                                 sizeof(why)));
    assert_non_null(strstr(why, "0-1-101"));
    assert_false(mmon_can_rejoin(&other_domain, &pb, &ps, 3, why,
                                 sizeof(why)));
    /* Same sequence, other server: two different transactions. */
    struct mmon_gtid_pos same_seq = pos("0-1-150");
    assert_false(mmon_can_rejoin(&same_seq, &pb, &ps, 3, why, sizeof(why)));
}

static void
test_locks_needed(void **state)
{
    (void)state;
    /* three servers, all up: two locks, either way */
    assert_int_equal(mmon_locks_needed(true, 3, 3), 2);
    assert_int_equal(mmon_locks_needed(false, 3, 3), 2);
    /* the primary died: majority_of_running needs both survivors,
     * majority_of_all still two of three */
    assert_int_equal(mmon_locks_needed(false, 3, 2), 2);
    assert_int_equal(mmon_locks_needed(true, 3, 2), 2);
    /* one server left: of_running can act on it, of_all cannot */
    assert_int_equal(mmon_locks_needed(false, 3, 1), 1);
    assert_int_equal(mmon_locks_needed(true, 3, 1), 2);
    /* an even split is no majority */
    assert_int_equal(mmon_locks_needed(false, 4, 4), 3);
    /* nothing reachable: holding no lock never makes a primary */
    assert_int_equal(mmon_locks_needed(false, 3, 0), 1);
}

/* auto_failover=safe: the candidate must have received (or applied)
 * every GTID of the primary's last seen binlog position, in each domain. */
static void
test_failover_safe(void **state)
{
    struct mmon_gtid_pos primary = pos("0-1-100,1-1-7");
    struct mmon_view c = srv(true, 0, "0-1-100,1-1-7");
    char why[256] = "";

    (void)state;
    assert_true(mmon_failover_safe(&primary, &c, why, sizeof(why)));
    /* received but not yet applied counts: failover applies it first */
    c.current_pos = pos("0-1-90,1-1-7");
    assert_true(mmon_failover_safe(&primary, &c, why, sizeof(why)));
    /* applied ahead of a stale IO position counts too */
    c = srv(true, 0, "0-1-90,1-1-7");
    c.current_pos = pos("0-1-100,1-1-7");
    assert_true(mmon_failover_safe(&primary, &c, why, sizeof(why)));
    /* one domain behind: refused, and why says where */
    c = srv(true, 0, "0-1-100,1-1-5");
    assert_false(mmon_failover_safe(&primary, &c, why, sizeof(why)));
    assert_non_null(strstr(why, "domain 1"));
    assert_non_null(strstr(why, "1-1-7"));
    assert_non_null(strstr(why, "2 transaction(s) would be lost"));
    /* a domain the candidate never saw */
    c = srv(true, 0, "0-1-100");
    assert_false(mmon_failover_safe(&primary, &c, why, sizeof(why)));
    /* a primary that never wrote anything: nothing to lose */
    primary = pos("");
    assert_true(mmon_failover_safe(&primary, &c, why, sizeof(why)));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gtid_parse_format),
        cmocka_unit_test(test_gtid_compare),
        cmocka_unit_test(test_primary_any_order),
        cmocka_unit_test(test_no_usable_primary),
        cmocka_unit_test(test_primary_ties_and_stickiness),
        cmocka_unit_test(test_verify_master_failure),
        cmocka_unit_test(test_promotion_choice),
        cmocka_unit_test(test_rejoin),
        cmocka_unit_test(test_locks_needed),
        cmocka_unit_test(test_failover_safe),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
