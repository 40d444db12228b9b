/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the module loader: a good module loads once (by name, any
 * case, or alias), and each bad test module in test/modules/ is refused
 * with a message naming the file and the reason. The modules are built
 * into build/test-modules (SLUICE_TEST_MODULE_DIR).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/filter.h>

#include "internal.h"
#include "module_int.h"

#ifndef SLUICE_TEST_MODULE_DIR
#error "SLUICE_TEST_MODULE_DIR must name the test module directory"
#endif
#define DIR SLUICE_TEST_MODULE_DIR

static void
test_good_module(void **state)
{
    char err[1024] = "";
    const struct sl_loaded_module *a;
    const struct sl_loaded_module *b;

    (void)state;
    a = sl__module_load_err(DIR, "testmod_goodfilter", SL_MODULE_FILTER, err,
                            sizeof(err));
    assert_non_null(a);
    assert_string_equal(a->info->name, "testmod_goodfilter");
    assert_non_null(strstr(a->path, "libtestmod_goodfilter.so"));
    b = sl__module_load_err(DIR, "TESTMOD_GoodFilter", SL_MODULE_FILTER, err,
                            sizeof(err));
    assert_ptr_equal(a, b);
    b = sl__module_load_err(DIR, "testfilteralias", SL_MODULE_FILTER, err,
                            sizeof(err));
    assert_ptr_equal(a, b);
    assert_true(sl__module_count() >= 1);
}

static void
test_alias_by_scan(void **state)
{
    char err[1024] = "";
    const struct sl_loaded_module *m;

    (void)state;
    /* Not loaded yet and no libtestclient.so: found by scanning. */
    m = sl__module_load_err(DIR, "TestClient", SL_MODULE_PROTOCOL, err,
                            sizeof(err));
    assert_non_null(m);
    assert_string_equal(m->info->name, "testmod_proto");
}

static void
expect_refused(const char *name, enum sl_module_type type, const char *why)
{
    char err[1024] = "";
    char file[256];

    assert_null(sl__module_load_err(DIR, name, type, err, sizeof(err)));
    snprintf(file, sizeof(file), "lib%s.so", name);
    if (strstr(err, file) == NULL || strstr(err, why) == NULL) {
        fail_msg("refusal of %s: got '%s', wanted '%s' and '%s'", name, err,
                 file, why);
    }
}

static void
test_refusals(void **state)
{
    (void)state;
    expect_refused("testmod_badmagic", SL_MODULE_FILTER, "wrong magic");
    expect_refused("testmod_badmajor", SL_MODULE_FILTER, "major version");
    expect_refused("testmod_newminor", SL_MODULE_FILTER, "newer minor");
    expect_refused("testmod_badsig", SL_MODULE_FILTER, "build signature");
    expect_refused("testmod_noops", SL_MODULE_FILTER, "no operations table");
    expect_refused("testmod_smallops", SL_MODULE_FILTER, "too small");
    expect_refused("testmod_badtype", SL_MODULE_FILTER, "expected type");
    expect_refused("testmod_noentry", SL_MODULE_FILTER, "sl_module_entry");
    expect_refused("testmod_failinit", SL_MODULE_FILTER, "initialise");
    /* A good filter asked for as a router is the wrong type. */
    expect_refused("testmod_router", SL_MODULE_FILTER, "expected type");
    expect_refused("nosuchmodule", SL_MODULE_ROUTER, "No such file");
}

static void
test_bad_names(void **state)
{
    char err[256];

    (void)state;
    assert_null(sl__module_load_err(DIR, "../etc/x", SL_MODULE_ROUTER, err,
                                    sizeof(err)));
    assert_non_null(strstr(err, "invalid module name"));
    assert_null(sl__module_load_err(DIR, "", SL_MODULE_ROUTER, err,
                                    sizeof(err)));
}

static void *
create(const char *n, const struct sl_params *p)
{
    (void)n;
    (void)p;
    return NULL;
}

static void
test_check_descriptor(void **state)
{
    struct sl_filter_ops ops = {.size = sizeof(ops), .create_instance = create};
    struct sl_module m = {
        SL_MODULE_HEADER,
        .type = SL_MODULE_FILTER,
        .name = "x",
        .ops = &ops,
    };

    (void)state;
    assert_null(sl__module_check(&m, SL_MODULE_FILTER));
    assert_non_null(sl__module_check(&m, SL_MODULE_ROUTER));
    assert_non_null(sl__module_check(NULL, SL_MODULE_FILTER));
    m.abi_minor = SL_MODULE_ABI_MINOR + 1;
    assert_non_null(sl__module_check(&m, SL_MODULE_FILTER));
    m.abi_minor = SL_MODULE_ABI_MINOR;
    ops.create_instance = NULL;
    assert_non_null(strstr(sl__module_check(&m, SL_MODULE_FILTER),
                           "create_instance"));
    ops.create_instance = create;
    m.name = NULL;
    assert_non_null(sl__module_check(&m, SL_MODULE_FILTER));
}

/*
 * Every loaded module's worker_init runs in each worker before
 * sl__workers_start returns, and worker_finish in each at stop; a failed
 * worker_init makes sl__workers_start fail with its error (fatal at
 * start-up) and the failed module gets no worker_finish.
 */
static void
test_worker_hooks(void **state)
{
    char err[1024] = "";
    const struct sl_loaded_module *lm;
    const struct sl_filter_ops *ops;
    atomic_int *n;

    (void)state;
    lm = sl__module_load_err(DIR, "testmod_workerhooks", SL_MODULE_FILTER,
                             err, sizeof(err));
    assert_non_null(lm);
    ops = lm->info->ops;
    n = ops->create_instance("hooks", NULL);

    assert_int_equal(sl__workers_init(3, SL_EVENT_MODEL_PINNED), 0);
    assert_int_equal(sl__workers_start(), 0);
    assert_int_equal(atomic_load(&n[0]), 3);
    assert_int_equal(atomic_load(&n[1]), 0);
    sl__workers_stop();
    sl__workers_finish();
    assert_int_equal(atomic_load(&n[1]), 3);

    setenv("TESTMOD_WORKER_INIT_FAIL", "1", 1);
    assert_int_equal(sl__workers_init(2, SL_EVENT_MODEL_SHARED), 0);
    assert_int_equal(sl__workers_start(), -EIO);
    sl__workers_finish();
    unsetenv("TESTMOD_WORKER_INIT_FAIL");
    assert_int_equal(atomic_load(&n[0]), 3);
    assert_int_equal(atomic_load(&n[1]), 3);
}

static int
teardown(void **state)
{
    (void)state;
    sl__modules_unload();
    assert_int_equal(sl__module_count(), 0);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_module),
        cmocka_unit_test(test_alias_by_scan),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_check_descriptor),
        cmocka_unit_test(test_worker_hooks),
    };

    return cmocka_run_group_tests(tests, NULL, teardown);
}
