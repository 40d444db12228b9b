/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the log (server/core/log.c):
 *  - password masking (sl_log_mask_passwords): CHANGE MASTER TO, CREATE
 *    USER ... IDENTIFIED BY, SET PASSWORD = PASSWORD(...), escaped and
 *    doubled quotes inside the literal, an unterminated literal, a secret
 *    quoted without a keyword (a server's error message), truncation to
 *    the output buffer;
 *  - escaping (sl_log_escape), and that a message carrying client-supplied
 *    control characters (a user name with a newline and a forged log line
 *    after it) stays one escaped line in the log file.
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

#define SL_LOG_TAG "test"
#include <sluice/log.h>

#include "internal.h"


static const char *
mask(const char *text, const char *secret)
{
    static char out[512];

    return sl_log_mask_passwords(text, secret, out, sizeof(out));
}

static void
test_keywords(void **state)
{
    (void)state;
    assert_string_equal(
        mask("CHANGE MASTER TO MASTER_HOST='h', MASTER_USER='u', "
             "MASTER_PASSWORD='s3cr\\'et', MASTER_USE_GTID=slave_pos", NULL),
        "CHANGE MASTER TO MASTER_HOST='h', MASTER_USER='u', "
        "MASTER_PASSWORD='*****', MASTER_USE_GTID=slave_pos");
    assert_string_equal(mask("create user a identified by \"x''y\"", NULL),
                        "create user a identified by \"*****\"");
    assert_string_equal(mask("SET PASSWORD = PASSWORD('pw') ; SELECT 1",
                             NULL),
                        "SET PASSWORD = PASSWORD('*****') ; SELECT 1");
    assert_string_equal(mask("a IDENTIFIED BY PASSWORD '*AB12'", NULL),
                        "a IDENTIFIED BY PASSWORD '*****'");
    assert_string_equal(mask("x MASTER_PASSWORD = 'never closed", NULL),
                        "x MASTER_PASSWORD = '*****");
    /* No literal after the keyword: nothing to hide, nothing lost. */
    assert_string_equal(mask("SHOW GRANTS; password_expired", NULL),
                        "SHOW GRANTS; password_expired");
}

static void
test_secret(void **state)
{
    (void)state;
    assert_string_equal(mask("near 'Pw-42', MASTER_USE_GTID' at line 1",
                             "Pw-42"),
                         "near '*****', MASTER_USE_GTID' at line 1");
    assert_string_equal(mask("Pw-42Pw-42 and Pw-4", "Pw-42"),
                        "********** and Pw-4");
    assert_string_equal(mask("plain text", ""), "plain text");
}

static void
test_truncation(void **state)
{
    char small[12];

    (void)state;
    sl_log_mask_passwords("MASTER_PASSWORD='abcdefgh'", NULL, small,
                          sizeof(small));
    assert_string_equal(small, "MASTER_PASS");
    sl_log_mask_passwords("PASSWORD('abcdefgh')", NULL, small,
                          sizeof(small));
    assert_string_equal(small, "PASSWORD('*");
    assert_null(strstr(small, "abc"));
}


static void
test_escape(void **state)
{
    char out[64];

    (void)state;
    assert_string_equal(sl_log_escape(out, sizeof(out), "app"), "app");
    assert_string_equal(sl_log_escape(out, sizeof(out), "a\nb\r\tc\x1b[31m"),
                        "a\\x0ab\\x0d\\x09c\\x1b[31m");
    assert_string_equal(sl_log_escape(out, sizeof(out), "del\x7f"),
                        "del\\x7f");
    /* UTF-8 passes untouched */
    assert_string_equal(sl_log_escape(out, sizeof(out), "J\xc3\xbcrgen"),
                        "J\xc3\xbcrgen");
    /* truncation never splits an escape and always terminates */
    assert_string_equal(sl_log_escape(out, 6, "ab\ncd"), "ab");
    assert_string_equal(sl_log_escape(out, 8, "ab\ncd"), "ab\\x0ac");
    assert_string_equal(sl_log_escape(out, 1, "abc"), "");
}

static void
test_forged_line(void **state)
{
    char path[] = "/tmp/sluice-test-log-XXXXXX";
    int fd = mkstemp(path);
    char buf[4096];
    ssize_t n;
    int lines = 0;

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(sl__log_init(path, SL_LOG_INFO), 0);
    sl_log_warn("authentication failed for '%s'@'%s'",
                "x\n2030-01-01 00:00:00.000   error : [main] forged",
                "10.0.0.1");
    sl__log_finish();
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    buf[n] = '\0';
    for (ssize_t i = 0; i < n; i++) {
        lines += buf[i] == '\n';
    }
    assert_int_equal(lines, 1);
    assert_non_null(strstr(buf, "for 'x\\x0a2030-01-01 00:00:00.000   "
                                "error : [main] forged'@'10.0.0.1'"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keywords),
        cmocka_unit_test(test_secret),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_forged_line),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
