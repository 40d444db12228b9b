/*
 * Unit tests for the log's password masking (server/core/log.c,
 * sl_log_mask_passwords): CHANGE MASTER TO, CREATE USER ... IDENTIFIED BY,
 * SET PASSWORD = PASSWORD(...), escaped and doubled quotes inside the
 * literal, an unterminated literal, a secret quoted without a keyword (a
 * server's error message), truncation to the output buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <sluice/log.h>

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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keywords),
        cmocka_unit_test(test_secret),
        cmocka_unit_test(test_truncation),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
