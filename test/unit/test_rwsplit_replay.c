/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of transaction_replay's pure decisions (rws_replay.c, compiled
 * in directly like rws_select.c): the attempt budget
 * (transaction_replay_attempts, transaction_replay_timeout), the deadlock
 * errors, which answers transaction_replay_checksum counts, and the
 * LAST_INSERT_ID scan over a chain of segments, and which statement is
 * a COMMIT (transaction_replay_safe_commit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/modules/routing/readwritesplit/rws_replay.c"

static void
test_attempts_only(void **state)
{
    struct rws_config c = {.trx_replay_attempts = 3};

    (void)state;
    assert_true(rws_replay_allowed(&c, 0, 0, 0));
    assert_true(rws_replay_allowed(&c, 2, 0, 1000000));
    assert_false(rws_replay_allowed(&c, 3, 0, 0));
    assert_false(rws_replay_allowed(&c, 4, 0, 0));
}

static void
test_timeout_decides(void **state)
{
    struct rws_config c = {.trx_replay_attempts = 1,
                           .trx_replay_timeout_ms = 2000};

    (void)state;
    /* the first attempt always starts; then time alone counts */
    assert_true(rws_replay_allowed(&c, 0, 5000, 99999));
    assert_true(rws_replay_allowed(&c, 7, 5000, 6999));
    assert_false(rws_replay_allowed(&c, 1, 5000, 7000));
    assert_false(rws_replay_allowed(&c, 1, 5000, 9000));
    /* a clock that went back is not an expiry */
    assert_true(rws_replay_allowed(&c, 1, 5000, 4000));
}

static void
test_deadlock_codes(void **state)
{
    (void)state;
    assert_true(rws_deadlock_error(1213));
    assert_false(rws_deadlock_error(1205));   /* lock wait: statement only */
    assert_false(rws_deadlock_error(1062));
    assert_false(rws_deadlock_error(0));
}

static void
test_checksum_modes(void **state)
{
    (void)state;
    assert_true(rws_cks_counts(RWS_CKS_FULL, true, true));
    assert_true(rws_cks_counts(RWS_CKS_FULL, false, false));
    assert_false(rws_cks_counts(RWS_CKS_RESULT_ONLY, true, false));
    assert_true(rws_cks_counts(RWS_CKS_RESULT_ONLY, false, true));
    assert_false(rws_cks_counts(RWS_CKS_NO_INSERT_ID, true, false));
    assert_false(rws_cks_counts(RWS_CKS_NO_INSERT_ID, false, true));
    assert_true(rws_cks_counts(RWS_CKS_NO_INSERT_ID, false, false));
}

/* A chain of one segment per piece (the pieces live in the caller; their
 * packet headers have no NUL bytes, for strlen). */
static void
chain(struct sl_buf *b, struct sl_seg *segs, const char **pieces, size_t n)
{
    memset(b, 0, sizeof(*b));
    for (size_t i = 0; i < n; i++) {
        segs[i].next = i + 1 < n ? &segs[i + 1] : NULL;
        segs[i].block = NULL;
        segs[i].start = (unsigned char *)(uintptr_t)pieces[i];
        segs[i].end = segs[i].start + strlen(pieces[i]);
        b->len += strlen(pieces[i]);
    }
    b->head = n > 0 ? &segs[0] : NULL;
    b->tail = n > 0 ? &segs[n - 1] : NULL;
}

static void
test_last_insert_id_scan(void **state)
{
    struct sl_buf b;
    struct sl_seg segs[3];
    const char *one[] = {"\x10\x01\x01\x01\x03SELECT Last_Insert_Id()"};
    const char *split[] = {"\x10\x01\x01\x01\x03SELECT LAST_IN", "SERT",
                           "_ID()"};
    const char *near[] = {"\x10\x01\x01\x01\x03SELECT last_insert_i, "
                          "llast_insert_iD"};
    const char *none[] = {"\x10\x01\x01\x01\x03INSERT INTO t VALUES (1)"};
    const char *hdr[] = {"last_"};   /* only header bytes: not scanned */

    (void)state;
    chain(&b, segs, one, 1);
    assert_true(rws_uses_last_insert_id(&b));
    chain(&b, segs, split, 3);
    assert_true(rws_uses_last_insert_id(&b));
    chain(&b, segs, near, 1);
    assert_true(rws_uses_last_insert_id(&b));   /* the second one */
    chain(&b, segs, none, 1);
    assert_false(rws_uses_last_insert_id(&b));
    chain(&b, segs, hdr, 1);
    assert_false(rws_uses_last_insert_id(&b));
    assert_false(rws_uses_last_insert_id(NULL));
}

static bool
is_commit(const char *sql, unsigned char cmd)
{
    unsigned char pkt[128];
    size_t n = strlen(sql);
    struct sl_buf *b;
    bool r;

    pkt[0] = (unsigned char)(n + 1);
    pkt[1] = pkt[2] = pkt[3] = 0;
    pkt[4] = cmd;
    memcpy(pkt + 5, sql, n);
    b = sl_buf_from(pkt, n + 5);
    assert_non_null(b);
    r = rws_is_commit(b);
    sl_buf_free(b);
    return r;
}

static void
test_commit_detection(void **state)
{
    (void)state;
    assert_true(is_commit("COMMIT", SL_COM_QUERY));
    assert_true(is_commit("commit", SL_COM_QUERY));
    assert_true(is_commit("  \n\tCommit;", SL_COM_QUERY));
    assert_true(is_commit("COMMIT WORK", SL_COM_QUERY));
    assert_true(is_commit("COMMIT AND NO CHAIN RELEASE", SL_COM_QUERY));
    assert_false(is_commit("COMMITTED", SL_COM_QUERY));
    assert_false(is_commit("COMMIT_LOG", SL_COM_QUERY));
    assert_false(is_commit("COMMIT", SL_COM_STMT_PREPARE));
    assert_false(is_commit("XA COMMIT 'x'", SL_COM_QUERY));
    assert_false(is_commit("ROLLBACK", SL_COM_QUERY));
    assert_false(is_commit("COMMI", SL_COM_QUERY));
    assert_false(is_commit("", SL_COM_QUERY));
    assert_false(rws_is_commit(NULL));
}

static int
begin_kind(const char *sql, unsigned char cmd)
{
    unsigned char pkt[128];
    size_t n = strlen(sql);
    struct sl_buf *b;
    int r;

    pkt[0] = (unsigned char)(n + 1);
    pkt[1] = pkt[2] = pkt[3] = 0;
    pkt[4] = cmd;
    memcpy(pkt + 5, sql, n);
    b = sl_buf_from(pkt, n + 5);
    assert_non_null(b);
    r = rws_plain_begin(b);
    sl_buf_free(b);
    return r;
}

/* Which first statements a replay may take a consistent snapshot for
 * (the replay barrier): only those that say nothing else. */
static void
test_plain_begin(void **state)
{
    (void)state;
    assert_int_equal(begin_kind("BEGIN", SL_COM_QUERY), RWS_BEGIN_PLAIN);
    assert_int_equal(begin_kind(" begin work ;", SL_COM_QUERY),
                     RWS_BEGIN_PLAIN);
    assert_int_equal(begin_kind("START TRANSACTION", SL_COM_QUERY),
                     RWS_BEGIN_PLAIN);
    assert_int_equal(begin_kind("start\n transaction;", SL_COM_QUERY),
                     RWS_BEGIN_PLAIN);
    assert_int_equal(begin_kind("START TRANSACTION READ WRITE",
                                SL_COM_QUERY),
                     RWS_BEGIN_READ_WRITE);
    assert_int_equal(begin_kind("START TRANSACTION READ ONLY", SL_COM_QUERY),
                     RWS_BEGIN_OTHER);
    assert_int_equal(begin_kind("START TRANSACTION WITH CONSISTENT SNAPSHOT",
                                SL_COM_QUERY),
                     RWS_BEGIN_OTHER);
    assert_int_equal(begin_kind("BEGINNING", SL_COM_QUERY), RWS_BEGIN_OTHER);
    assert_int_equal(begin_kind("START TRANSACTIONS", SL_COM_QUERY),
                     RWS_BEGIN_OTHER);
    assert_int_equal(begin_kind("/* c */ BEGIN", SL_COM_QUERY),
                     RWS_BEGIN_OTHER);
    assert_int_equal(begin_kind("BEGIN", SL_COM_STMT_PREPARE),
                     RWS_BEGIN_OTHER);
    assert_int_equal(begin_kind("UPDATE t SET a = 1", SL_COM_QUERY),
                     RWS_BEGIN_OTHER);
    assert_int_equal(begin_kind("", SL_COM_QUERY), RWS_BEGIN_OTHER);
    assert_int_equal(rws_plain_begin(NULL), RWS_BEGIN_OTHER);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attempts_only),
        cmocka_unit_test(test_timeout_decides),
        cmocka_unit_test(test_deadlock_codes),
        cmocka_unit_test(test_checksum_modes),
        cmocka_unit_test(test_last_insert_id_scan),
        cmocka_unit_test(test_commit_detection),
        cmocka_unit_test(test_plain_begin),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
