/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Buffer chain tests: invariants after every operation, split/consume at
 * every boundary (inside segments and across them), clone sharing blocks,
 * pullup across segments, reserve/commit, and O(1) append.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf_int.h"

/* len == sum of windows, tail is the last segment, head NULL iff len 0. */
static void
check(const struct sl_buf *b)
{
    const struct sl_seg *s;
    const struct sl_seg *last = NULL;
    size_t sum = 0;

    for (s = b->head; s != NULL; s = s->next) {
        assert_true(s->start <= s->end);
        assert_true(s->start >= s->block->data);
        assert_true(s->end <= s->block->data + s->block->size);
        assert_true(atomic_load(&s->block->refs) >= 1);
        sum += (size_t)(s->end - s->start);
        last = s;
    }
    assert_int_equal(sum, b->len);
    assert_ptr_equal(last, b->tail);
    assert_true((b->head == NULL) == (b->len == 0));
}

/* A chain with segments of the given sizes holding bytes 0,1,2,... */
static void
make_chain(struct sl_buf *b, const size_t *sizes, size_t n)
{
    unsigned char val = 0;
    size_t i;
    size_t j;

    for (i = 0; i < n; i++) {
        struct sl_buf one = {0};
        unsigned char tmp[256];

        for (j = 0; j < sizes[i]; j++) {
            tmp[j] = val++;
        }
        /* a fresh chain per piece forces a segment boundary */
        assert_int_equal(sl_buf_append_data(&one, tmp, sizes[i]), 0);
        sl_buf_append(b, &one);
        check(&one);
        check(b);
    }
}

static void
check_bytes(const struct sl_buf *b, unsigned char first)
{
    unsigned char out[1024];
    size_t i;

    assert_true(b->len <= sizeof(out));
    assert_int_equal(sl_buf_copy_out(b, 0, b->len, out), b->len);
    for (i = 0; i < b->len; i++) {
        assert_int_equal(out[i], (unsigned char)(first + i));
    }
}

static const size_t sizes[] = {7, 1, 13, 5, 9};
#define TOTAL 35

static void
test_empty(void **state)
{
    struct sl_buf b = {0};

    check(&b);
    sl_buf_consume(&b, 10);
    check(&b);
    assert_null(sl_buf_pullup(&b, 1));
    assert_int_equal(sl_buf_copy_out(&b, 0, 5, NULL), 0);
    sl_buf_free(NULL);
}

static void
test_consume_every_boundary(void **state)
{
    size_t n;

    for (n = 0; n <= TOTAL + 1; n++) {
        struct sl_buf b = {0};

        make_chain(&b, sizes, SL_ARRAY_LEN(sizes));
        sl_buf_consume(&b, n);
        check(&b);
        assert_int_equal(b.len, n >= TOTAL ? 0 : TOTAL - n);
        check_bytes(&b, (unsigned char)n);
        sl_buf_reset(&b);
        check(&b);
    }
}

static void
test_consume_in_steps(void **state)
{
    size_t step;

    for (step = 1; step <= 10; step++) {
        struct sl_buf b = {0};
        size_t gone = 0;

        make_chain(&b, sizes, SL_ARRAY_LEN(sizes));
        while (b.len > 0) {
            sl_buf_consume(&b, step);
            gone += step;
            check(&b);
            if (b.len > 0) {
                check_bytes(&b, (unsigned char)gone);
            }
        }
    }
}

static void
test_split_every_boundary(void **state)
{
    size_t n;

    for (n = 0; n <= TOTAL + 1; n++) {
        struct sl_buf b = {0};
        struct sl_buf out = {0};
        size_t want = n > TOTAL ? TOTAL : n;

        make_chain(&b, sizes, SL_ARRAY_LEN(sizes));
        assert_int_equal(sl_buf_split(&b, n, &out), 0);
        check(&b);
        check(&out);
        assert_int_equal(out.len, want);
        assert_int_equal(b.len, TOTAL - want);
        check_bytes(&out, 0);
        check_bytes(&b, (unsigned char)want);
        sl_buf_reset(&b);
        sl_buf_reset(&out);
    }
}

static void
test_split_shares_block(void **state)
{
    struct sl_buf b = {0};
    struct sl_buf out = {0};
    unsigned char data[100];

    memset(data, 'x', sizeof(data));
    assert_int_equal(sl_buf_append_data(&b, data, sizeof(data)), 0);
    assert_int_equal(sl_buf_split(&b, 40, &out), 0);
    check(&b);
    check(&out);
    /* two windows on one block, no copy */
    assert_ptr_equal(b.head->block, out.head->block);
    assert_int_equal(atomic_load(&b.head->block->refs), 2);
    assert_ptr_equal(out.head->end, b.head->start);
    sl_buf_reset(&out);
    assert_int_equal(atomic_load(&b.head->block->refs), 1);
    sl_buf_reset(&b);
}

static void
test_split_appends_to_out(void **state)
{
    struct sl_buf b = {0};
    struct sl_buf out = {0};

    make_chain(&b, sizes, SL_ARRAY_LEN(sizes));
    assert_int_equal(sl_buf_split(&b, 10, &out), 0);
    assert_int_equal(sl_buf_split(&b, 10, &out), 0);
    check(&out);
    check(&b);
    assert_int_equal(out.len, 20);
    check_bytes(&out, 0);
    check_bytes(&b, 20);
    sl_buf_reset(&b);
    sl_buf_reset(&out);
}

static void
test_copy_out_offsets(void **state)
{
    struct sl_buf b = {0};
    unsigned char out[TOTAL];
    size_t off;
    size_t n;
    size_t i;

    make_chain(&b, sizes, SL_ARRAY_LEN(sizes));
    for (off = 0; off <= TOTAL; off++) {
        for (n = 0; n <= TOTAL - off; n++) {
            assert_int_equal(sl_buf_copy_out(&b, off, n, out), n);
            for (i = 0; i < n; i++) {
                assert_int_equal(out[i], off + i);
            }
        }
    }
    assert_int_equal(sl_buf_copy_out(&b, 30, 100, out), 5);
    for (i = 0; i < TOTAL; i++) {
        assert_int_equal(sl_buf_byte(&b, i), i);
    }
    sl_buf_reset(&b);
}

static void
test_clone_shares_and_survives(void **state)
{
    struct sl_buf *orig = sl_buf_new();
    struct sl_buf *c;
    const struct sl_seg *s;
    const struct sl_seg *t;

    make_chain(orig, sizes, SL_ARRAY_LEN(sizes));
    c = sl_buf_clone_new(orig);
    assert_non_null(c);
    check(c);
    check(orig);
    for (s = orig->head, t = c->head; s != NULL; s = s->next, t = t->next) {
        assert_non_null(t);
        assert_ptr_equal(s->block, t->block);
        assert_ptr_equal(s->start, t->start);
        assert_int_equal(atomic_load(&s->block->refs), 2);
    }
    /* writing through a shared block is not allowed: append must not
     * reuse the tail block's free room */
    assert_int_equal(sl_buf_append_data(orig, "zz", 2), 0);
    check(orig);
    check_bytes(c, 0);
    assert_int_equal(c->len, TOTAL);
    sl_buf_free(orig);
    check(c);
    check_bytes(c, 0);
    for (t = c->head; t != NULL; t = t->next) {
        assert_int_equal(atomic_load(&t->block->refs), 1);
    }
    sl_buf_free(c);
}

static void
test_pullup(void **state)
{
    size_t n;

    for (n = 0; n <= TOTAL; n++) {
        struct sl_buf b = {0};
        unsigned char *p;
        size_t i;

        make_chain(&b, sizes, SL_ARRAY_LEN(sizes));
        p = sl_buf_pullup(&b, n);
        check(&b);
        assert_int_equal(b.len, TOTAL);
        if (n > 0) {
            assert_non_null(p);
            assert_true((size_t)(b.head->end - b.head->start) >= n);
            assert_ptr_equal(p, b.head->start);
            for (i = 0; i < n; i++) {
                assert_int_equal(p[i], i);
            }
        }
        check_bytes(&b, 0);
        sl_buf_reset(&b);
    }
    {
        struct sl_buf b = {0};

        make_chain(&b, sizes, SL_ARRAY_LEN(sizes));
        assert_null(sl_buf_pullup(&b, TOTAL + 1));
        check(&b);
        sl_buf_reset(&b);
    }
}

static void
test_reserve_commit(void **state)
{
    struct sl_buf b = {0};
    struct sl_buf out = {0};
    size_t avail;
    unsigned char *p;
    unsigned char *p2;

    p = sl_buf_reserve(&b, 1, 4096, &avail);
    assert_non_null(p);
    assert_true(avail >= 4096);
    sl_buf_commit(&b, 0);   /* nothing read: no empty segment */
    check(&b);
    assert_null(b.head);

    p = sl_buf_reserve(&b, 1, 4096, &avail);
    memcpy(p, "hello", 5);
    sl_buf_commit(&b, 5);
    check(&b);
    assert_int_equal(b.len, 5);

    /* only user and window ends at the used end: reuse the room */
    p2 = sl_buf_reserve(&b, 1, 4096, &avail);
    assert_ptr_equal(p2, p + 5);
    memcpy(p2, "world", 5);
    sl_buf_commit(&b, 5);
    check(&b);
    assert_ptr_equal(b.head, b.tail);
    assert_int_equal(b.len, 10);

    /* shared block (split made two windows): a new block */
    assert_int_equal(sl_buf_split(&b, 3, &out), 0);
    assert_int_equal(sl_buf_clone(&b, &out), 0);
    p2 = sl_buf_reserve(&b, 1, 4096, &avail);
    assert_true(p2 < b.tail->block->data ||
                p2 >= b.tail->block->data + b.tail->block->size);
    memcpy(p2, "!", 1);
    sl_buf_commit(&b, 1);
    check(&b);
    assert_int_equal(b.len, 8);
    assert_int_equal(sl_buf_byte(&b, 7), '!');
    assert_int_equal(sl_buf_byte(&out, 0), 'h');
    assert_int_equal(out.len, 10);
    sl_buf_reset(&b);
    sl_buf_reset(&out);
}

static void
test_append_data_large(void **state)
{
    size_t n = 3 * SL_BUF_BLOCK_SIZE + 17;
    unsigned char *src = malloc(n);
    unsigned char *dst = malloc(n);
    struct sl_buf *b;
    struct sl_buf *f;
    size_t i;

    for (i = 0; i < n; i++) {
        src[i] = (unsigned char)(i * 7);
    }
    b = sl_buf_from(src, 10);
    assert_int_equal(sl_buf_append_data(b, src + 10, n - 10), 0);
    check(b);
    assert_int_equal(sl_buf_copy_out(b, 0, n, dst), n);
    assert_memory_equal(src, dst, n);
    f = sl_buf_flatten_new(b);
    check(f);
    assert_ptr_equal(f->head, f->tail);
    assert_memory_equal(f->head->start, src, n);
    sl_buf_free(f);
    sl_buf_free(b);
    free(src);
    free(dst);
}

/* Appending a million segments never walks the chain: the visit counter
 * does not move and the tail pointer is the last appended segment. */
static void
test_append_is_o1(void **state)
{
    struct sl_buf b = {0};
    struct sl_buf *base = sl_buf_from("ab", 2);
    uint64_t before;
    size_t i;

    for (i = 0; i < 1000000; i++) {
        struct sl_buf one = {0};
        struct sl_seg *seg;

        /* a clone shares base's block: a new segment, no new memory */
        assert_int_equal(sl_buf_clone(base, &one), 0);
        seg = one.head;
        before = sl__buf_seg_visits();
        sl_buf_append(&b, &one);
        assert_int_equal(sl__buf_seg_visits(), before);
        assert_ptr_equal(b.tail, seg);
        assert_null(one.head);
    }
    assert_int_equal(b.len, 2000000);
    check(&b);
    before = sl__buf_seg_visits();
    sl_buf_consume(&b, 3);   /* walking ops do count */
    assert_true(sl__buf_seg_visits() > before);
    sl_buf_reset(&b);
    sl_buf_free(base);
    sl__buf_thread_cleanup();
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_consume_every_boundary),
        cmocka_unit_test(test_consume_in_steps),
        cmocka_unit_test(test_split_every_boundary),
        cmocka_unit_test(test_split_shares_block),
        cmocka_unit_test(test_split_appends_to_out),
        cmocka_unit_test(test_copy_out_offsets),
        cmocka_unit_test(test_clone_shares_and_survives),
        cmocka_unit_test(test_pullup),
        cmocka_unit_test(test_reserve_commit),
        cmocka_unit_test(test_append_data_large),
        cmocka_unit_test(test_append_is_o1),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

    sl__buf_thread_cleanup();
    return rc;
}
