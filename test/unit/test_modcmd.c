/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for module commands (server/core/modcmd.c): registration and
 * duplicates, iteration, argument count and type checks, resolution of
 * object names against the running configuration (a hand-built
 * struct sl_config), optional arguments, a command's own error, and the
 * REST API's checked call refusing state-changing commands.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include <sluice/modcmd.h>

#include "internal.h"
#include "modcmd_int.h"

static struct sl_server db1 = {.name = "db1"};
static struct sl_server db2 = {.name = "db2"};
static struct sl_server *servers[] = {&db1, &db2};
static struct sl_monitor mon = {.name = "Cluster-Monitor"};
static struct sl_monitor *monitors[] = {&mon};
static struct sl_config cfg = {
    .servers = servers, .nservers = 2,
    .monitors = monitors, .nmonitors = 1,
};

/* What the last call of echo() saw. */
static struct sl_modcmd_arg seen[4];
static int seen_n;

static int
echo(const struct sl_modcmd_arg *args, int nargs, void **output,
     char **error)
{
    (void)error;
    seen_n = nargs;
    memcpy(seen, args, sizeof(*args) * (size_t)nargs);
    *output = json_pack("{s:i}", "nargs", nargs);
    return 0;
}

static int
refuse(const struct sl_modcmd_arg *args, int nargs, void **output,
       char **error)
{
    (void)args;
    (void)nargs;
    (void)output;
    *error = strdup("refused on purpose");
    return -EIO;
}

static const struct sl_modcmd_arg_spec echo_args[] = {
    {SL_MODCMD_ARG_MONITOR, false, "monitor"},
    {SL_MODCMD_ARG_SERVER, true, "server"},
    {SL_MODCMD_ARG_BOOL, true, "flag"},
};

static int
setup(void **state)
{
    (void)state;
    sl__config = &cfg;
    assert_int_equal(sl_modcmd_register("testmod", "echo", SL_MODCMD_ACTIVE,
                                        echo, echo_args, 3, "echo"), 0);
    assert_int_equal(sl_modcmd_register("testmod", "refuse",
                                        SL_MODCMD_PASSIVE, refuse, NULL, 0,
                                        "always fails"), 0);
    return 0;
}

static void
test_duplicate_and_iteration(void **state)
{
    size_t it = 0;
    const char *m, *c, *d;
    enum sl_modcmd_kind k;
    const struct sl_modcmd_arg_spec *a;
    int n, found = 0;

    (void)state;
    assert_int_equal(sl_modcmd_register("TestMod", "ECHO", SL_MODCMD_ACTIVE,
                                        echo, echo_args, 3, "again"),
                     -EEXIST);
    while (sl_modcmd_next(&it, &m, &c, &d, &k, &a, &n)) {
        if (strcmp(m, "testmod") == 0 && strcmp(c, "echo") == 0) {
            found++;
            assert_int_equal(n, 3);
            assert_int_equal(a[1].type, SL_MODCMD_ARG_SERVER);
            assert_int_equal(k, SL_MODCMD_ACTIVE);
        }
    }
    assert_int_equal(found, 1);
}

static void
test_resolve(void **state)
{
    const char *argv[] = {"Cluster-Monitor", "db2", "yes"};
    void *out = NULL;
    char *err = NULL;

    (void)state;
    assert_int_equal(sl_modcmd_call("testmod", "echo", argv, 3, &out, &err),
                     0);
    assert_null(err);
    assert_int_equal(json_integer_value(json_object_get(out, "nargs")), 3);
    json_decref(out);
    assert_ptr_equal(seen[0].v.monitor, &mon);
    assert_ptr_equal(seen[1].v.server, &db2);
    assert_true(seen[2].v.boolean);
    /* Optional arguments left out are NULL strings. */
    assert_int_equal(sl_modcmd_call("testmod", "echo", argv, 1, &out, &err),
                     0);
    json_decref(out);
    assert_null(seen[1].string);
    assert_null(seen[2].string);
}

static void
test_errors(void **state)
{
    const char *bad_server[] = {"Cluster-Monitor", "db9"};
    const char *bad_bool[] = {"Cluster-Monitor", "db1", "maybe"};
    const char *bad_mon[] = {"db1"};
    const char *too_many[] = {"Cluster-Monitor", "db1", "1", "x"};
    void *out = NULL;
    char *err = NULL;

    (void)state;
    assert_int_equal(sl_modcmd_call("testmod", "nope", NULL, 0, &out, &err),
                     -ENOENT);
    free(err);
    assert_int_equal(sl_modcmd_call("testmod", "echo", NULL, 0, &out, &err),
                     -EINVAL);
    assert_non_null(strstr(err, "1 to 3 arguments"));
    free(err);
    assert_int_equal(sl_modcmd_call("testmod", "echo", too_many, 4, &out,
                                    &err), -EINVAL);
    free(err);
    assert_int_equal(sl_modcmd_call("testmod", "echo", bad_server, 2, &out,
                                    &err), -EINVAL);
    assert_non_null(strstr(err, "no server named 'db9'"));
    free(err);
    assert_int_equal(sl_modcmd_call("testmod", "echo", bad_bool, 3, &out,
                                    &err), -EINVAL);
    assert_non_null(strstr(err, "not a boolean"));
    free(err);
    assert_int_equal(sl_modcmd_call("testmod", "echo", bad_mon, 1, &out,
                                    &err), -EINVAL);
    assert_non_null(strstr(err, "no monitor named 'db1'"));
    free(err);
    assert_int_equal(sl_modcmd_call("testmod", "refuse", NULL, 0, &out,
                                    &err), -EIO);
    assert_string_equal(err, "refused on purpose");
    free(err);
}

/* The REST API's call for a GET or a read-only user: an ACTIVE command is
 * refused before it runs (echo would record its arguments), a PASSIVE one
 * runs. */
static void
test_may_modify(void **state)
{
    const char *argv[] = {"Cluster-Monitor"};
    void *out = NULL;
    char *err = NULL;

    (void)state;
    seen_n = -1;
    assert_int_equal(sl__modcmd_call("testmod", "echo", false, argv, 1, &out,
                                     &err), -EACCES);
    assert_non_null(strstr(err, "changes state"));
    assert_null(out);
    assert_int_equal(seen_n, -1);
    free(err);
    assert_int_equal(sl__modcmd_call("testmod", "refuse", false, NULL, 0,
                                     &out, &err), -EIO);
    assert_string_equal(err, "refused on purpose");
    free(err);
    assert_int_equal(sl__modcmd_call("testmod", "echo", true, argv, 1, &out,
                                     &err), 0);
    assert_int_equal(seen_n, 3);
    json_decref(out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duplicate_and_iteration),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_may_modify),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
