/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of mariadbmon's master_conditions and slave_conditions
 * (mmon_conds.c, compiled in with mmon_decide.c): each condition against
 * views of a primary with replicas connecting, connected, stopped, down
 * (judged as last seen), relays, a down or non-Master primary, and the
 * cooperative primary_monitor_master check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/modules/monitor/mariadbmon/mmon_conds.c"
#include "../../server/modules/monitor/mariadbmon/mmon_decide.c"

/* A running server replicating from `master` (-1: none) with the IO
 * thread 'Y'es, 'C'onnecting or 'N'o. */
static struct mmon_view
srv(int master, char io)
{
    struct mmon_view v;

    memset(&v, 0, sizeof(v));
    v.running = true;
    v.slave.master = master;
    if (master >= 0) {
        v.slave.present = true;
        v.slave.io_running = io == 'Y';
        v.slave.io_connecting = io == 'C';
        v.slave.sql_running = true;
    }
    return v;
}

static bool
master_ok(struct mmon_view *v, int n, unsigned conds, bool coop_ok)
{
    struct mmon_slave_conn last[8];
    char why[256] = "";
    bool ok;

    for (int i = 0; i < n; i++) {
        last[i] = v[i].slave;
    }
    ok = mmon_master_conds_ok(v, last, n, 0, conds, coop_ok, why,
                              sizeof(why));
    assert_true(ok || why[0] != '\0');
    return ok;
}

static void
test_master_conditions(void **state)
{
    struct mmon_view v[3] = {srv(-1, 0), srv(0, 'C'), srv(0, 'N')};
    struct mmon_slave_conn last[3];
    char why[256];

    (void)state;
    assert_string_equal(mmon_master_cond_names[4], "primary_monitor_master");
    /* none, and the default, hold without replicas connected */
    assert_true(master_ok(v, 3, MMON_MC_NONE, false));
    assert_true(master_ok(v, 3, MMON_MC_PRIMARY_MONITOR_MASTER |
                          MMON_MC_DISK_SPACE_OK, true));
    assert_false(master_ok(v, 3, MMON_MC_PRIMARY_MONITOR_MASTER, false));
    /* db2 connecting: enough for connecting_slave, not connected_slave */
    assert_true(master_ok(v, 3, MMON_MC_CONNECTING_SLAVE, true));
    assert_false(master_ok(v, 3, MMON_MC_CONNECTED_SLAVE, true));
    assert_true(master_ok(v, 3, MMON_MC_RUNNING_SLAVE, true));
    v[2].slave.io_running = true;
    assert_true(master_ok(v, 3, MMON_MC_CONNECTED_SLAVE, true));
    /* one replica must satisfy all: db2 connecting, db3 connected */
    assert_true(master_ok(v, 3, MMON_MC_CONNECTED_SLAVE |
                          MMON_MC_RUNNING_SLAVE, true));
    v[2].running = false;   /* down: judged as last seen, except running */
    assert_true(master_ok(v, 3, MMON_MC_CONNECTED_SLAVE, true));
    assert_false(master_ok(v, 3, MMON_MC_CONNECTED_SLAVE |
                           MMON_MC_RUNNING_SLAVE, true));
    /* SQL thread stopped: no replica at all */
    v[1].slave.sql_running = false;
    v[2].slave.sql_running = false;
    assert_false(master_ok(v, 3, MMON_MC_CONNECTING_SLAVE, true));
    /* a replica of another server does not count */
    v[1] = srv(2, 'Y');
    v[2] = srv(-1, 0);
    assert_false(master_ok(v, 3, MMON_MC_CONNECTING_SLAVE, true));
    /* no candidate */
    for (int i = 0; i < 3; i++) {
        last[i] = v[i].slave;
    }
    assert_false(mmon_master_conds_ok(v, last, 3, -1, MMON_MC_NONE, true,
                                      why, sizeof(why)));
}

static void
test_slave_conditions(void **state)
{
    /* db1 primary, db2 replica (IO connecting), db3 replica of db2 */
    struct mmon_view v[3] = {srv(-1, 0), srv(0, 'C'), srv(1, 'Y')};

    (void)state;
    assert_true(mmon_slave_conds_ok(v, 3, 1, 0, true, MMON_SC_NONE, false));
    assert_true(mmon_slave_conds_ok(v, 3, 1, 0, true,
                                    MMON_SC_RUNNING_MASTER |
                                    MMON_SC_WRITABLE_MASTER, true));
    /* linked_master: db2's IO thread only connecting */
    assert_false(mmon_slave_conds_ok(v, 3, 1, 0, true,
                                     MMON_SC_LINKED_MASTER, true));
    /* db3 behind the relay db2: the whole chain must be linked */
    assert_false(mmon_slave_conds_ok(v, 3, 2, 0, true,
                                     MMON_SC_LINKED_MASTER, true));
    v[1].slave.io_running = true;
    assert_true(mmon_slave_conds_ok(v, 3, 1, 0, true,
                                    MMON_SC_LINKED_MASTER, true));
    assert_true(mmon_slave_conds_ok(v, 3, 2, 0, true,
                                    MMON_SC_LINKED_MASTER, true));
    /* the primary not Master (read-only, master_conditions): writable */
    assert_false(mmon_slave_conds_ok(v, 3, 1, 0, false,
                                     MMON_SC_WRITABLE_MASTER, true));
    assert_true(mmon_slave_conds_ok(v, 3, 1, 0, false,
                                    MMON_SC_RUNNING_MASTER, true));
    /* the primary down: running_master fails, none still holds */
    v[0].running = false;
    assert_false(mmon_slave_conds_ok(v, 3, 1, 0, false,
                                     MMON_SC_RUNNING_MASTER, true));
    assert_true(mmon_slave_conds_ok(v, 3, 1, 0, false, MMON_SC_NONE, true));
    assert_false(mmon_slave_conds_ok(v, 3, 1, -1, false,
                                     MMON_SC_RUNNING_MASTER, true));
    assert_false(mmon_slave_conds_ok(v, 3, 1, 0, true,
                                     MMON_SC_PRIMARY_MONITOR_MASTER, false));
}

/* disk_space_ok: only a server low on disk space fails it. */
static void
test_disk_space_ok(void **state)
{
    struct mmon_view v[3] = {srv(-1, 0), srv(0, 'Y'), srv(0, 'Y')};
    struct mmon_slave_conn last[3];
    char why[256] = "";

    (void)state;
    assert_true(master_ok(v, 3, MMON_MC_DISK_SPACE_OK, true));
    assert_true(mmon_slave_conds_ok(v, 3, 1, 0, true, MMON_SC_DISK_SPACE_OK,
                                    true));
    v[0].disk_low = true;
    for (int i = 0; i < 3; i++) {
        last[i] = v[i].slave;
    }
    assert_false(mmon_master_conds_ok(v, last, 3, 0, MMON_MC_DISK_SPACE_OK |
                                      MMON_MC_PRIMARY_MONITOR_MASTER, true,
                                      why, sizeof(why)));
    assert_non_null(strstr(why, "low on disk space"));
    assert_true(master_ok(v, 3, MMON_MC_PRIMARY_MONITOR_MASTER, true));
    /* a replica low on disk space keeps Slave unless asked */
    v[0].disk_low = false;
    v[2].disk_low = true;
    assert_true(master_ok(v, 3, MMON_MC_DISK_SPACE_OK, true));
    assert_true(mmon_slave_conds_ok(v, 3, 2, 0, true, MMON_SC_NONE, true));
    assert_false(mmon_slave_conds_ok(v, 3, 2, 0, true, MMON_SC_DISK_SPACE_OK,
                                     true));
    assert_true(mmon_slave_conds_ok(v, 3, 1, 0, true, MMON_SC_DISK_SPACE_OK,
                                    true));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_conditions),
        cmocka_unit_test(test_slave_conditions),
        cmocka_unit_test(test_disk_space_ok),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
