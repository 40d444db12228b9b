/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of readwritesplit's COM_STMT_* rewriting (rws_exec.c, compiled
 * in directly like rws_select.c): the statement id swapped per connection
 * and the parameter types added to an execute for a connection that has
 * not seen them. The packets are the client's, so short and lying ones
 * are here too (fuzz/fuzz_rws_exec.c goes further).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/modules/routing/readwritesplit/rws_exec.c"

/* A COM_STMT_EXECUTE of statement 7 with two parameters, as a client
 * sends it: flag 1 with the types (LONG, VAR_STRING) or flag 0 without. */
static size_t
make_exec(unsigned char *p, bool with_types)
{
    static const unsigned char types[] = {0x03, 0x00, 0xfd, 0x00};
    static const unsigned char values[] = {42, 0, 0, 0, 2, 'h', 'i'};
    size_t n = 4;

    p[n++] = SL_COM_STMT_EXECUTE;
    memcpy(p + n, "\x07\x00\x00\x00", 4);
    n += 4;
    p[n++] = 0;                               /* flags */
    memcpy(p + n, "\x01\x00\x00\x00", 4);     /* iteration count */
    n += 4;
    p[n++] = 0;                               /* NULL bitmap (1 byte) */
    p[n++] = with_types ? 1 : 0;
    if (with_types) {
        memcpy(p + n, types, sizeof(types));
        n += sizeof(types);
    }
    memcpy(p + n, values, sizeof(values));
    n += sizeof(values);
    p[0] = (unsigned char)(n - 4);
    p[1] = p[2] = 0;
    p[3] = 0;
    return n;
}

static struct sl_buf *
two_blocks(const unsigned char *p, size_t n, size_t cut)
{
    struct sl_buf *a = sl_buf_from(p, cut);
    struct sl_buf *b = sl_buf_from(p + cut, n - cut);

    sl_buf_append(a, b);
    sl_buf_free(b);
    return a;
}

static void
test_flag_offset(void **state)
{
    (void)state;
    assert_int_equal(rws_exec_flag_off(0), 14);
    assert_int_equal(rws_exec_flag_off(1), 15);
    assert_int_equal(rws_exec_flag_off(8), 15);
    assert_int_equal(rws_exec_flag_off(9), 16);
    assert_int_equal(rws_exec_flag_off(65535), 14 + 8192);
}

static void
test_save_then_add_types(void **state)
{
    unsigned char with[64], without[64], got[64];
    size_t nw = make_exec(with, true), nwo = make_exec(without, false);
    struct rws_ps ps = {.params = 2};
    struct sl_buf *in, *out;

    (void)state;
    in = sl_buf_from(without, nwo);
    rws_exec_save_types(in, &ps);        /* flag 0: nothing to keep */
    assert_null(ps.types);
    assert_null(rws_exec_add_types(in, &ps));    /* no types known */
    sl_buf_free(in);

    in = two_blocks(with, nw, 16);       /* the types straddle blocks */
    rws_exec_save_types(in, &ps);
    assert_non_null(ps.types);
    assert_memory_equal(ps.types, with + 16, 4);
    assert_null(rws_exec_add_types(in, &ps));    /* already has them */
    sl_buf_free(in);

    /* the execute without types, for a connection that never saw them,
     * becomes byte for byte the execute with them */
    in = two_blocks(without, nwo, 10);
    out = rws_exec_add_types(in, &ps);
    assert_non_null(out);
    assert_int_equal(sl_buf_len(out), nw);
    assert_int_equal(sl_buf_copy_out(out, 0, nw, got), nw);
    assert_memory_equal(got, with, nw);
    assert_int_equal(sl_buf_len(in), nwo);      /* input untouched */
    sl_buf_free(out);
    sl_buf_free(in);
    free(ps.types);
}

/* Packets that end before the flag or the types they claim. */
static void
test_short_and_lying_packets(void **state)
{
    unsigned char with[64], without[64];
    size_t nw = make_exec(with, true), nwo = make_exec(without, false);
    struct rws_ps ps = {.params = 2};
    struct rws_ps big = {.params = 200};
    struct sl_buf *in;

    (void)state;
    for (size_t cut = 0; cut < nw; cut++) {
        in = sl_buf_from(with, cut);
        rws_exec_save_types(in, &ps);
        if (cut < 15 + 1 + 4) {
            assert_null(ps.types);
        }
        sl_buf_free(in);
    }
    free(ps.types);
    ps.types = (unsigned char *)"\x03\x00\xfd\x00";
    for (size_t cut = 0; cut <= 15; cut++) {
        in = sl_buf_from(without, cut);
        assert_null(rws_exec_add_types(in, &ps));
        sl_buf_free(in);
    }
    /* 200 parameters claimed: the flag lies past the packet's end */
    in = sl_buf_from(with, nw);
    rws_exec_save_types(in, &big);
    assert_null(big.types);
    sl_buf_free(in);
    in = sl_buf_from(without, nwo);
    big.types = calloc(400, 1);
    assert_null(rws_exec_add_types(in, &big));
    free(big.types);
    sl_buf_free(in);
}

static void
test_with_id(void **state)
{
    unsigned char p[64], got[64];
    size_t n = make_exec(p, true);
    struct sl_buf *in = two_blocks(p, n, 6), *out;

    (void)state;
    out = rws_exec_with_id(in, 0x0a0b0c0du);
    assert_non_null(out);
    assert_int_equal(sl_buf_copy_out(out, 0, n, got), n);
    assert_memory_equal(got + 5, "\x0d\x0c\x0b\x0a", 4);
    assert_memory_equal(got, p, 5);
    assert_memory_equal(got + 9, p + 9, n - 9);
    assert_int_equal(sl_buf_copy_out(in, 0, n, got), n);
    assert_memory_equal(got, p, n);             /* the client's keeps 7 */
    sl_buf_free(out);
    sl_buf_free(in);
    for (size_t cut = 0; cut < 9; cut++) {
        in = sl_buf_from(p, cut);
        assert_null(rws_exec_with_id(in, 1));
        sl_buf_free(in);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_offset),
        cmocka_unit_test(test_save_then_add_types),
        cmocka_unit_test(test_short_and_lying_packets),
        cmocka_unit_test(test_with_id),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
