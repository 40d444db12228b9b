/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for connection_init_sql_file's reader (init_sql.c): one
 * statement a line, blank lines and surrounding blanks (CR of CRLF files
 * included) dropped, a last line without newline kept, NUL bytes refused;
 * a missing file and one above the size limit refused naming the path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "init_sql.h"

static void
test_lines(void **state)
{
    static const char text[] = "\n  SET @a = 1  \r\n\r\n\t\n"
                               "SET SESSION sql_mode='ANSI_QUOTES'\n"
                               "SELECT 1";
    char **v = NULL;
    size_t n = 0;
    char err[128];

    (void)state;
    assert_int_equal(sl__init_sql_parse(text, sizeof(text) - 1, &v, &n, err,
                                        sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_string_equal(v[0], "SET @a = 1");
    assert_string_equal(v[1], "SET SESSION sql_mode='ANSI_QUOTES'");
    assert_string_equal(v[2], "SELECT 1");
    sl__init_sql_free(v, n);
}

static void
test_empty_and_nul(void **state)
{
    char **v = (char **)1;
    size_t n = 7;
    char err[128];

    (void)state;
    assert_int_equal(sl__init_sql_parse("\n \n", 3, &v, &n, err,
                                        sizeof(err)), 0);
    assert_int_equal(n, 0);
    assert_null(v);
    assert_int_not_equal(sl__init_sql_parse("SET @a=1\0x", 10, &v, &n, err,
                                            sizeof(err)), 0);
    assert_non_null(strstr(err, "NUL"));
}

static void
test_files(void **state)
{
    char path[] = "/tmp/sluice_init_sql_XXXXXX";
    int fd = mkstemp(path);
    char **v = NULL;
    size_t n = 0;
    char err[512];
    FILE *f;

    (void)state;
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("SET @a = 1\n\nSET @b = 2\n", f);
    fclose(f);
    assert_int_equal(sl__init_sql_read(path, &v, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[1], "SET @b = 2");
    sl__init_sql_free(v, n);

    f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i <= SL_INIT_SQL_MAX / 16; i++) {
        fputs("SET @a = 12345\n", f);   /* 15 bytes */
        fputs("-", f);
    }
    fclose(f);
    assert_int_not_equal(sl__init_sql_read(path, &v, &n, err, sizeof(err)),
                         0);
    assert_non_null(strstr(err, "larger than"));
    assert_non_null(strstr(err, path));
    unlink(path);

    assert_int_not_equal(sl__init_sql_read(path, &v, &n, err, sizeof(err)),
                         0);
    assert_non_null(strstr(err, "cannot open"));
    assert_non_null(strstr(err, path));
    assert_int_equal(n, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_empty_and_nul),
        cmocka_unit_test(test_files),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
