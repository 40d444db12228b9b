/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for a session's prepared statements as the query digests keep
 * them (stats.c, sl__stats_ps_*): found by the client's id in any order of
 * ids, an id the server hands out again names the new statement (the old
 * one is freed), a closed id is gone, forgetting empties the table and
 * the pending PREPAREs, id -1 is the statement prepared last, and at most
 * SL_STATS_PS_MAX are kept (the rest refused and freed: ASan checks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stats.h"

static struct sl_ps_digest *
stmt(uint32_t id, const char *text)
{
    struct sl_ps_digest *p = calloc(1, sizeof(*p) + strlen(text) + 1);

    assert_non_null(p);
    p->id = id;
    p->has_id = true;
    p->ref.worker = -1;
    strcpy(p->text, text);
    return p;
}

static const char *
text_of(struct sl_ses_stats *st, uint32_t id)
{
    struct sl_ps_digest *p = sl__stats_ps_find(st, id);

    return p != NULL ? p->text : NULL;
}

static void
test_find_close_reuse(void **state)
{
    struct sl_ses_stats st = {0};
    (void)state;

    assert_true(sl__stats_ps_add(&st, stmt(5, "five")));
    assert_true(sl__stats_ps_add(&st, stmt(2, "two")));
    assert_true(sl__stats_ps_add(&st, stmt(9, "nine")));
    assert_true(sl__stats_ps_add(&st, stmt(7, "seven")));
    assert_string_equal(text_of(&st, 2), "two");
    assert_string_equal(text_of(&st, 5), "five");
    assert_string_equal(text_of(&st, 7), "seven");
    assert_string_equal(text_of(&st, 9), "nine");
    assert_null(text_of(&st, 3));
    assert_string_equal(text_of(&st, 0xffffffffu), "seven");   /* last */

    sl__stats_ps_close(&st, 5);
    assert_null(text_of(&st, 5));
    assert_string_equal(text_of(&st, 9), "nine");
    sl__stats_ps_close(&st, 5);          /* unknown: nothing */
    assert_int_equal(st.nps, 3);

    /* the server names another statement with a closed id, or with an
     * id still kept: the new statement's text from now on */
    assert_true(sl__stats_ps_add(&st, stmt(5, "five again")));
    assert_string_equal(text_of(&st, 5), "five again");
    assert_true(sl__stats_ps_add(&st, stmt(2, "two again")));
    assert_string_equal(text_of(&st, 2), "two again");
    assert_int_equal(st.nps, 4);

    /* the last one closed: id -1 names nothing */
    sl__stats_ps_close(&st, 2);
    assert_null(text_of(&st, 0xffffffffu));

    sl__stats_ps_forget(&st);
    assert_int_equal(st.nps, 0);
    assert_null(text_of(&st, 9));
    sl__stats_session_free(&st);
}

static void
test_forget_frees_pending(void **state)
{
    struct sl_ses_stats st = {0};
    (void)state;

    st.q[1].prep = stmt(0, "pending");
    st.q[1].prep->has_id = false;
    st.ps_last = st.q[1].prep;
    st.head = 1;
    st.n = 1;
    assert_null(text_of(&st, 0xffffffffu));   /* not answered yet */
    sl__stats_ps_forget(&st);
    assert_null(st.q[1].prep);
    assert_null(st.ps_last);
    sl__stats_session_free(&st);
}

static void
test_bounded(void **state)
{
    struct sl_ses_stats st = {0};
    (void)state;

    for (uint32_t i = 1; i <= SL_STATS_PS_MAX; i++) {
        assert_true(sl__stats_ps_add(&st, stmt(i, "s")));
    }
    assert_false(sl__stats_ps_add(&st, stmt(SL_STATS_PS_MAX + 1, "over")));
    assert_null(text_of(&st, SL_STATS_PS_MAX + 1));
    assert_int_equal(st.nps, SL_STATS_PS_MAX);
    /* a kept id may still be replaced at the cap */
    assert_true(sl__stats_ps_add(&st, stmt(3, "three")));
    assert_string_equal(text_of(&st, 3), "three");
    sl__stats_ps_close(&st, 1);
    assert_true(sl__stats_ps_add(&st, stmt(SL_STATS_PS_MAX + 2, "room")));
    assert_string_equal(text_of(&st, SL_STATS_PS_MAX + 2), "room");
    sl__stats_session_free(&st);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_close_reuse),
        cmocka_unit_test(test_forget_frees_pending),
        cmocka_unit_test(test_bounded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
