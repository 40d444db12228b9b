/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of mariadbmon's monitor scripts (mmon_script.c, compiled in):
 * the event of every status change MaxScale names, the command line split
 * into argv without a shell (quotes, backslashes, an unclosed quote), the
 * $VARIABLE substitution ($LIST vs $NODELIST, unknown names kept, values
 * with spaces stay one argument), and real runs: the exit status, a
 * program that does not exist, and a script that outlives script_timeout
 * and ignores SIGTERM is killed within the timeout plus one second.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/modules/monitor/mariadbmon/mmon_script.c"

#define R SL_SRV_RUNNING
#define M SL_SRV_MASTER
#define S SL_SRV_SLAVE

static void
test_events(void **state)
{
    (void)state;
    assert_int_equal(mmon_event_of(R | S, 0), MMON_EV_SLAVE_DOWN);
    assert_int_equal(mmon_event_of(0, R | S), MMON_EV_SLAVE_UP);
    assert_int_equal(mmon_event_of(R | M, SL_SRV_AUTH_ERROR),
                     MMON_EV_MASTER_DOWN);
    assert_int_equal(mmon_event_of(0, R | M), MMON_EV_MASTER_UP);
    assert_int_equal(mmon_event_of(R, 0), MMON_EV_SERVER_DOWN);
    assert_int_equal(mmon_event_of(0, R), MMON_EV_SERVER_UP);
    assert_int_equal(mmon_event_of(R | M, R), MMON_EV_LOST_MASTER);
    assert_int_equal(mmon_event_of(R | S, R), MMON_EV_LOST_SLAVE);
    assert_int_equal(mmon_event_of(R, R | M), MMON_EV_NEW_MASTER);
    assert_int_equal(mmon_event_of(R, R | S), MMON_EV_NEW_SLAVE);
    /* switchover: the old primary lost its role, the replica too */
    assert_int_equal(mmon_event_of(R | M, R | S), MMON_EV_LOST_MASTER);
    assert_int_equal(mmon_event_of(R | S, R | M), MMON_EV_LOST_SLAVE);
    /* a relay that keeps being a slave: no event */
    assert_int_equal(mmon_event_of(R | S, R | S | SL_SRV_RELAY),
                     MMON_EV_NONE);
    /* administrators' bits and Moving are no events */
    assert_int_equal(mmon_event_of(R | M, R | M | SL_SRV_MAINT),
                     MMON_EV_NONE);
    assert_int_equal(mmon_event_of(R | M, R | M | SL_SRV_MOVING),
                     MMON_EV_NONE);
    assert_int_equal(mmon_event_of(0, SL_SRV_AUTH_ERROR), MMON_EV_NONE);
    assert_string_equal(mmon_event_names[MMON_EV_NEW_DONOR], "new_donor");
    assert_string_equal(mmon_event_names[MMON_EV_COUNT], "all");
}

static void
split_ok(const char *cmd, const char *const *want)
{
    char **argv = NULL;
    char err[128];
    int n = 0;

    assert_int_equal(mmon_script_split(cmd, &argv, err, sizeof(err)), 0);
    for (; want[n] != NULL; n++) {
        assert_non_null(argv[n]);
        assert_string_equal(argv[n], want[n]);
    }
    assert_null(argv[n]);
    mmon_script_free_argv(argv);
}

static void
test_split(void **state)
{
    char **argv = (char **)1;
    char err[128];

    (void)state;
    split_ok("/bin/x a b", (const char *[]){"/bin/x", "a", "b", NULL});
    split_ok("  /bin/x\t a  ", (const char *[]){"/bin/x", "a", NULL});
    split_ok("/bin/x 'a b' \"c 'd\" e\\ f g\\\"h",
             (const char *[]){"/bin/x", "a b", "c 'd", "e f", "g\"h", NULL});
    split_ok("/bin/x ev=$EVENT;rm -rf /",
             (const char *[]){"/bin/x", "ev=$EVENT;rm", "-rf", "/", NULL});
    split_ok("/bin/x pre'mid dle'post",
             (const char *[]){"/bin/x", "premid dlepost", NULL});
    assert_int_equal(mmon_script_split("/bin/x 'open", &argv, err,
                                       sizeof(err)), -EINVAL);
    assert_null(argv);
    assert_non_null(strstr(err, "unclosed"));
    assert_int_equal(mmon_script_split("   ", &argv, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "empty"));
}

static void
test_subst(void **state)
{
    struct mmon_script_vars v = {
        .initiator = "[127.0.0.1]:3312", .parent = "[127.0.0.1]:3311",
        .children = "", .event = "slave_down", .credentials = "u:p w",
        .nodelist = "[a]:1,[b]:2", .list = "[a]:1,[b]:2,[c]:3",
        .masterlist = "[a]:1", .slavelist = "[b]:2", .syncedlist = NULL,
    };
    char *s;

    (void)state;
    s = mmon_script_subst("i=$INITIATOR p=$PARENT c=$CHILDREN", &v);
    assert_string_equal(s, "i=[127.0.0.1]:3312 p=[127.0.0.1]:3311 c=");
    free(s);
    s = mmon_script_subst("$NODELIST|$LIST|$MASTERLIST|$SLAVELIST|"
                          "$SYNCEDLIST|$EVENT|$CREDENTIALS", &v);
    assert_string_equal(s, "[a]:1,[b]:2|[a]:1,[b]:2,[c]:3|[a]:1|[b]:2||"
                           "slave_down|u:p w");
    free(s);
    s = mmon_script_subst("$HOME $ $$EVENT$", &v);
    assert_string_equal(s, "$HOME $ $slave_down$");
    free(s);
    /* many short names, each with a long value: no overflow */
    s = mmon_script_subst("$LIST$LIST$LIST$LIST$LIST$LIST", &v);
    assert_int_equal(strlen(s), 6 * strlen(v.list));
    free(s);
}

static void
test_run(void **state)
{
    char *ok[] = {"/bin/sh", "-c", "echo warning: hello; echo plain", NULL};
    char *fail[] = {"sh", "-c", "echo error : bad >&2; exit 3", NULL};
    char *missing[] = {"/nonexistent/script", NULL};
    char *stubborn[] = {"/bin/sh", "-c",
                        "trap '' TERM; while :; do sleep 0.1; done", NULL};
    uint64_t t0;

    (void)state;
    assert_int_equal(mmon_script_run(ok, 5000, "t", NULL), 0);
    assert_int_equal(mmon_script_run(fail, 5000, "t", "bad"), 3);
    assert_int_equal(mmon_script_run(missing, 5000, "t", NULL), -1);
    assert_true(mmon_script_executable("sh"));
    assert_true(mmon_script_executable("/bin/sh"));
    assert_false(mmon_script_executable("/nonexistent/script"));
    assert_false(mmon_script_executable("no-such-program-here"));
    t0 = sl_monotonic_ms();
    assert_int_equal(mmon_script_run(stubborn, 300, "t", NULL), -2);
    /* SIGTERM at 300 ms is ignored; SIGKILL one second later */
    assert_true(sl_monotonic_ms() - t0 >= 1300);
    assert_true(sl_monotonic_ms() - t0 < 10000);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_subst),
        cmocka_unit_test(test_run),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
