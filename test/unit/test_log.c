/*
 * Unit tests of the log (server/core/log.c): sl_log_escape, and that a
 * message carrying client-supplied control characters (a user name with a
 * newline and a forged log line after it) stays one escaped line in the
 * log file.
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
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_forged_line),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
