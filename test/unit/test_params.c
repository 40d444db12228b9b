/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for params.c: every value parser, the typed getters, defaults,
 * and the validator's messages (unknown name with suggestion, bad values,
 * missing mandatory parameters, ignored and deprecated flags).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/disk_space.h>

#include "config_int.h"

/* disk_space_threshold: the list syntax, the limit that applies to a
 * path, when a disk counts as exhausted, and the core's check of the
 * parameter wherever it is declared. */
static void
test_disk_space_threshold(void **state)
{
    static const char *const bad[] = {
        "/data", "*:101", ":50", "/:ten", "/:80,,*:90", "/:80,/:70",
        "*:1,*:2", "/:-1", "/:1000", ",", "/:", "/:8 0",
    };
    static const struct sl_param_spec spec = {
        "disk_space_threshold", SL_PARAM_STRING, NULL, 0, NULL, ""};
    static const struct sl_param_spec other = {
        "some_string", SL_PARAM_STRING, NULL, 0, NULL, ""};
    struct sl_disk_limits l;
    char why[256];

    (void)state;
    assert_int_equal(sl_disk_limits_parse("", &l, why, sizeof(why)), 0);
    assert_false(sl_disk_limits_set(&l));
    assert_int_equal(sl_disk_limits_parse(" /data1:80 , /data2 : 60,*:90",
                                          &l, why, sizeof(why)), 0);
    assert_true(sl_disk_limits_set(&l));
    assert_int_equal(l.n, 2);
    assert_int_equal(sl_disk_limit_for(&l, "/data1"), 80);
    assert_int_equal(sl_disk_limit_for(&l, "/data2"), 60);
    assert_int_equal(sl_disk_limit_for(&l, "/"), 90);      /* the * entry */
    assert_int_equal(sl_disk_limits_parse("/data:0", &l, why, sizeof(why)),
                     0);
    assert_int_equal(sl_disk_limit_for(&l, "/"), -1);      /* no * entry */
    assert_int_equal(sl_disk_limits_parse("/a:b:100", &l, why,
                                          sizeof(why)), 0);
    assert_int_equal(sl_disk_limit_for(&l, "/a:b"), 100);  /* last colon */
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        why[0] = '\0';
        assert_int_equal(sl_disk_limits_parse(bad[i], &l, why, sizeof(why)),
                         -EINVAL);
        assert_true(why[0] != '\0');
        assert_int_equal(sl__param_check(&spec, bad[i], why, sizeof(why)),
                         -EINVAL);
        assert_int_equal(sl__param_check(&other, bad[i], why, sizeof(why)),
                         0);
    }
    assert_int_equal(sl__param_check(&spec, "*:80", why, sizeof(why)), 0);
    /* exhausted: the used share (total - available) above the limit */
    assert_false(sl_disk_exhausted(1000, 200, 80));   /* 80 % used */
    assert_true(sl_disk_exhausted(1000, 199, 80));    /* 80.1 % */
    assert_false(sl_disk_exhausted(1000, 0, 100));    /* full, *:100 */
    assert_true(sl_disk_exhausted(1000, 999, 0));
    assert_false(sl_disk_exhausted(1000, 1000, 0));   /* empty */
    assert_false(sl_disk_exhausted(0, 0, 0));         /* no size known */
    assert_false(sl_disk_exhausted(1000, 10, -1));    /* no limit */
    assert_false(sl_disk_exhausted(1000, 2000, 1));   /* nonsense row */
}

static void
test_bool(void **state)
{
    static const char *const yes[] = {"true", "TRUE", "yes", "on", "1", "On"};
    static const char *const no[] = {"false", "no", "off", "0", "NO"};
    static const char *const bad[] = {"", "2", "truee", "y", " true"};
    bool b;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(yes); i++) {
        b = false;
        assert_int_equal(sl_param_parse_bool(yes[i], &b), 0);
        assert_true(b);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(no); i++) {
        b = true;
        assert_int_equal(sl_param_parse_bool(no[i], &b), 0);
        assert_false(b);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        assert_int_equal(sl_param_parse_bool(bad[i], &b), -EINVAL);
    }
}

static void
test_size(void **state)
{
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"0", 0}, {"65536", 65536}, {"1k", 1024}, {"1K", 1024},
        {"64Ki", 65536}, {"16M", 16u << 20}, {"16Mi", 16u << 20},
        {"1G", 1u << 30}, {"2Gi", 2ull << 30}, {"1T", 1ull << 40},
        {"3MB", 3u << 20},
    };
    static const char *const bad[] = {"", "k", "-1", "1x", "1Kix", "1.5M",
                                      " 1", "99999999999999999999",
                                      "99999999999999T"};
    uint64_t v;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(ok); i++) {
        assert_int_equal(sl_param_parse_size(ok[i].s, &v), 0);
        assert_int_equal(v, ok[i].v);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        assert_int_equal(sl_param_parse_size(bad[i], &v), -EINVAL);
    }
}

static void
test_duration(void **state)
{
    uint64_t ms;

    (void)state;
    assert_int_equal(sl_param_parse_duration("2000", false, &ms), 0);
    assert_int_equal(ms, 2000);
    assert_int_equal(sl_param_parse_duration("3", true, &ms), 0);
    assert_int_equal(ms, 3000);
    assert_int_equal(sl_param_parse_duration("500ms", true, &ms), 0);
    assert_int_equal(ms, 500);
    assert_int_equal(sl_param_parse_duration("10s", false, &ms), 0);
    assert_int_equal(ms, 10000);
    assert_int_equal(sl_param_parse_duration("5m", false, &ms), 0);
    assert_int_equal(ms, 300000);
    assert_int_equal(sl_param_parse_duration("2h", false, &ms), 0);
    assert_int_equal(ms, 7200000);
    assert_int_equal(sl_param_parse_duration("1H", false, &ms), 0);
    assert_int_equal(ms, 3600000);
    assert_int_equal(sl_param_parse_duration("", false, &ms), -EINVAL);
    assert_int_equal(sl_param_parse_duration("s", false, &ms), -EINVAL);
    assert_int_equal(sl_param_parse_duration("10x", false, &ms), -EINVAL);
    assert_int_equal(sl_param_parse_duration("-1s", false, &ms), -EINVAL);
    assert_int_equal(sl_param_parse_duration("1.5s", false, &ms), -EINVAL);
}

static void
test_int_count(void **state)
{
    int64_t i;
    uint64_t u;

    (void)state;
    assert_int_equal(sl__param_parse_int("-12", &i), 0);
    assert_int_equal(i, -12);
    assert_int_equal(sl__param_parse_int("+5", &i), 0);
    assert_int_equal(i, 5);
    assert_int_equal(sl__param_parse_int("abc", &i), -EINVAL);
    assert_int_equal(sl__param_parse_int("12a", &i), -EINVAL);
    assert_int_equal(sl__param_parse_int("", &i), -EINVAL);
    assert_int_equal(sl__param_parse_int("99999999999999999999", &i),
                     -EINVAL);
    assert_int_equal(sl__param_parse_count("18446744073709551615", &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(sl__param_parse_count("-1", &u), -EINVAL);
    assert_int_equal(sl__param_parse_count(" 1", &u), -EINVAL);
}

static const char *const colors[] = {"red", "green", "blue", NULL};

static const struct sl_param_spec specs[] = {
    {"name", SL_PARAM_STRING, NULL, SL_PARAM_F_MANDATORY, NULL, ""},
    {"port", SL_PARAM_INT, "3306", 0, NULL, ""},
    {"count", SL_PARAM_COUNT, "5", 0, NULL, ""},
    {"flag", SL_PARAM_BOOL, "yes", 0, NULL, ""},
    {"size", SL_PARAM_SIZE, "1Ki", 0, NULL, ""},
    {"timeout", SL_PARAM_DURATION, "3", SL_PARAM_F_SECONDS, NULL, ""},
    {"interval", SL_PARAM_DURATION, "2000", 0, NULL, ""},
    {"color", SL_PARAM_ENUM, "green", 0, colors, ""},
    {"colors", SL_PARAM_ENUM_MASK, NULL, 0, colors, ""},
    {"servers", SL_PARAM_SERVERS, NULL, 0, NULL, ""},
    {"filters", SL_PARAM_FILTERS, NULL, 0, NULL, ""},
    {"match", SL_PARAM_REGEX, NULL, 0, NULL, ""},
    {"old", SL_PARAM_STRING, NULL, SL_PARAM_F_DEPRECATED, NULL, ""},
    {"compat", SL_PARAM_STRING, NULL, SL_PARAM_F_IGNORED, NULL,
     "cosmetic here"},
    {"unsafe", SL_PARAM_BOOL, "false", SL_PARAM_F_REFUSED, NULL,
     "unsafe mode is not implemented"},
    SL_PARAM_END,
};

static int
run_validate(struct sl_params *p, struct sl_cfg_diag *d)
{
    const struct sl_param_spec *tables[] = {specs};

    d->file = "t.cnf";
    d->quiet = true;
    return sl__params_validate(p, tables, 1, d, "thing 'x'", 3);
}

static void
test_getters_and_defaults(void **state)
{
    struct sl_params *p = sl__params_new();
    struct sl_cfg_diag d = {0};
    size_t it = 0;
    const char *n;
    const char *v;
    size_t count = 0;

    (void)state;
    assert_int_equal(sl__params_set(p, "name", "db1", 4), 0);
    assert_int_equal(sl__params_set(p, "colors", "red, blue", 5), 0);
    assert_int_equal(sl__params_set(p, "timeout", "500ms", 6), 0);
    assert_int_equal(sl__params_set(p, "color", "BLUE", 7), 0);
    assert_int_equal(run_validate(p, &d), 0);
    assert_int_equal(d.errors, 0);
    assert_string_equal(sl_params_string(p, "name"), "db1");
    assert_int_equal(sl_params_int(p, "port"), 3306);
    assert_int_equal(sl_params_count(p, "count"), 5);
    assert_true(sl_params_bool(p, "flag"));
    assert_int_equal(sl_params_size(p, "size"), 1024);
    assert_int_equal(sl_params_duration_ms(p, "timeout"), 500);
    assert_int_equal(sl_params_duration_ms(p, "interval"), 2000);
    assert_int_equal(sl_params_enum(p, "color"), 2);
    assert_int_equal(sl_params_enum_mask(p, "colors"), 5);
    assert_false(sl_params_has(p, "servers"));
    assert_null(sl_params_get(p, "servers"));
    assert_int_equal(sl_params_enum(p, "nope"), -1);
    assert_int_equal(sl__params_line(p, "timeout"), 6);
    assert_int_equal(sl__params_line(p, "port"), 0);
    while (sl_params_next(p, &it, &n, &v)) {
        count++;
    }
    assert_int_equal(count, 10);   /* 9 + the default of "unsafe" */
    sl__params_free(p);
    sl__cfg_diag_free(&d);
}

static void
test_bare_seconds_default(void **state)
{
    struct sl_params *p = sl__params_new();
    struct sl_cfg_diag d = {0};

    (void)state;
    sl__params_set(p, "name", "x", 1);
    run_validate(p, &d);
    assert_int_equal(sl_params_duration_ms(p, "timeout"), 3000);
    sl__params_free(p);
    sl__cfg_diag_free(&d);
}

/* One bad value: exactly one error mentioning the expectation. */
static void
expect_bad(const char *name, const char *value, const char *expect)
{
    struct sl_params *p = sl__params_new();
    struct sl_cfg_diag d = {0};

    sl__params_set(p, "name", "x", 1);
    sl__params_set(p, name, value, 9);
    assert_int_equal(run_validate(p, &d), 1);
    assert_non_null(strstr(d.text, "t.cnf:9: invalid value"));
    assert_non_null(strstr(d.text, name));
    if (strstr(d.text, expect) == NULL) {
        fail_msg("'%s' not in '%s'", expect, d.text);
    }
    sl__params_free(p);
    sl__cfg_diag_free(&d);
}

static void
test_bad_values(void **state)
{
    (void)state;
    expect_bad("port", "abc", "(expected an integer)");
    expect_bad("count", "-3", "non-negative integer");
    expect_bad("flag", "maybe", "expected a boolean");
    expect_bad("size", "12Q", "expected a size");
    expect_bad("timeout", "10 parsecs", "expected a duration");
    expect_bad("color", "purple", "one of 'red', 'green', 'blue'");
    expect_bad("colors", "red,purple", "'blue'");
    expect_bad("servers", "a,,b", "comma separated");
    expect_bad("filters", "a||b", "separated by '|'");
    expect_bad("match", "(unclosed", "regular expression");
}

static void
test_unknown_and_missing(void **state)
{
    struct sl_params *p = sl__params_new();
    struct sl_cfg_diag d = {0};

    (void)state;
    sl__params_set(p, "prot", "1", 12);
    sl__params_set(p, "zzzzzzzz", "1", 13);
    assert_int_equal(run_validate(p, &d), 3);
    assert_non_null(strstr(d.text, "t.cnf:12: unknown parameter 'prot' in "
                                   "thing 'x' (did you mean 'port'?)"));
    assert_non_null(strstr(d.text, "t.cnf:13: unknown parameter 'zzzzzzzz' "
                                   "in thing 'x'\n"));
    assert_non_null(strstr(d.text, "t.cnf:3: missing mandatory parameter "
                                   "'name' in thing 'x'"));
    sl__params_free(p);
    sl__cfg_diag_free(&d);
}

static void
test_deprecated_and_ignored(void **state)
{
    struct sl_params *p = sl__params_new();
    struct sl_cfg_diag d = {0};

    (void)state;
    sl__params_set(p, "name", "x", 1);
    sl__params_set(p, "old", "1", 2);
    sl__params_set(p, "compat", "1", 3);
    sl__params_set(p, "unsafe", "no", 4);
    assert_int_equal(run_validate(p, &d), 0);
    /* deprecated and ignored both warn; the ignored one gives its reason
     * and is listed for --config-check's summary; a refused parameter at
     * the value Sluice implements (its default) is accepted silently */
    assert_int_equal(d.warnings, 2);
    assert_non_null(strstr(d.text, "t.cnf:2: warning: parameter 'old'"));
    assert_non_null(strstr(d.text, "t.cnf:3: warning: parameter 'compat' "
                                   "in thing 'x' is accepted for MaxScale "
                                   "compatibility and ignored: cosmetic "
                                   "here"));
    assert_int_equal(d.nignored, 1);
    assert_non_null(strstr(d.ignored, "t.cnf:3: "));
    sl__params_free(p);
    sl__cfg_diag_free(&d);
}

static void
test_refused(void **state)
{
    struct sl_params *p = sl__params_new();
    struct sl_cfg_diag d = {0};

    (void)state;
    sl__params_set(p, "name", "x", 1);
    sl__params_set(p, "unsafe", "true", 7);
    assert_int_equal(run_validate(p, &d), 1);
    assert_non_null(strstr(d.text, "t.cnf:7: parameter 'unsafe' in thing "
                                   "'x' is not supported by Sluice: unsafe "
                                   "mode is not implemented"));
    sl__params_free(p);
    sl__cfg_diag_free(&d);
}

/* Two names of one setting (params.c same_setting): either sets both
 * (the derived one at line 0, like a default), both is an error at the
 * later line, and unset removes a name. */
static void
test_same_setting(void **state)
{
    static const struct sl_param_spec lag[] = {
        {"max_slave_replication_lag", SL_PARAM_DURATION, "0s",
         SL_PARAM_F_SECONDS, NULL, ""},
        {"max_replication_lag", SL_PARAM_DURATION, "0s", SL_PARAM_F_SECONDS,
         NULL, ""},
        SL_PARAM_END,
    };
    const struct sl_param_spec *tables[] = {lag};
    const char *names[] = {"max_replication_lag",
                           "max_slave_replication_lag"};
    struct sl_cfg_diag d = {.file = "t.cnf", .quiet = true};
    struct sl_params *p;

    (void)state;
    assert_string_equal(sl__params_same_setting(names[0]), names[1]);
    assert_string_equal(sl__params_same_setting(names[1]), names[0]);
    assert_null(sl__params_same_setting("port"));
    for (int i = 0; i < 2; i++) {
        p = sl__params_new();
        sl__params_set(p, names[i], "7", 4);
        assert_int_equal(sl__params_validate(p, tables, 1, &d, "thing 'x'",
                                             3), 0);
        assert_int_equal(sl_params_duration_ms(p, names[0]), 7000);
        assert_int_equal(sl_params_duration_ms(p, names[1]), 7000);
        assert_int_equal(sl__params_line(p, names[i]), 4);
        assert_int_equal(sl__params_line(p, names[1 - i]), 0);
        sl__params_unset(p, names[i]);
        assert_false(sl_params_has(p, names[i]));
        assert_true(sl_params_has(p, names[1 - i]));
        sl__params_free(p);
    }
    p = sl__params_new();
    sl__params_set(p, names[0], "7", 4);
    sl__params_set(p, names[1], "7", 9);
    assert_int_equal(sl__params_validate(p, tables, 1, &d, "thing 'x'", 3),
                     1);
    assert_non_null(strstr(d.text, "t.cnf:9: parameters "
                                   "'max_replication_lag' and "
                                   "'max_slave_replication_lag' in thing "
                                   "'x' are the same setting"));
    sl__params_free(p);
    sl__cfg_diag_free(&d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_size),
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_int_count),
        cmocka_unit_test(test_getters_and_defaults),
        cmocka_unit_test(test_bare_seconds_default),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_unknown_and_missing),
        cmocka_unit_test(test_deprecated_and_ignored),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_same_setting),
        cmocka_unit_test(test_disk_space_threshold),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
