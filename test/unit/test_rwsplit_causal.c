/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit test of readwritesplit's causal_reads positions (rws_causal.c,
 * compiled in): GTID lists parsed into per-domain slots, the service's
 * acknowledged position raised and never lowered (also by several
 * threads at once), what a server is known to have applied, the
 * MASTER_GTID_WAIT argument, and more domains than slots refused.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../server/modules/routing/readwritesplit/rws_causal.c"

static struct rws_instance *
new_inst(size_t nservers)
{
    struct rws_instance *inst =
        aligned_alloc(64, (sizeof(*inst) + 63) / 64 * 64);

    assert_non_null(inst);
    memset(inst, 0, sizeof(*inst));
    inst->nservers = nservers;
    inst->known = calloc(nservers * RWS_DOMAINS, sizeof(*inst->known));
    assert_non_null(inst->known);
    return inst;
}

static void
free_inst(struct rws_instance *inst)
{
    free(inst->known);
    free(inst);
}

static void
test_parse_and_format(void **state)
{
    struct rws_instance *inst = new_inst(1);
    struct rws_pos pos;
    char out[256];

    (void)state;
    assert_true(rws_pos_parse(inst, "0-1-5,3-2-9", &pos, true));
    rws_pos_format(inst, &pos, out, sizeof(out));
    assert_string_equal(out, "0-0-5,3-0-9");
    /* the newline MariaDB puts in long positions, a space */
    assert_true(rws_pos_parse(inst, "3-2-10,\n0-1-7", &pos, true));
    rws_pos_format(inst, &pos, out, sizeof(out));
    assert_string_equal(out, "0-0-7,3-0-10");
    assert_true(rws_pos_parse(inst, "", &pos, true));
    rws_pos_format(inst, &pos, out, sizeof(out));
    assert_string_equal(out, "");
    assert_false(rws_pos_parse(inst, "0-1", &pos, true));
    assert_false(rws_pos_parse(inst, "x-1-2", &pos, true));
    assert_false(rws_pos_parse(inst, "0-1-2;DROP", &pos, true));
    /* a domain never seen is not claimed without `claim` */
    assert_false(rws_pos_parse(inst, "7-1-1", &pos, false));
    free_inst(inst);
}

static void
test_publish_never_lowers(void **state)
{
    struct rws_instance *inst = new_inst(1);
    struct rws_pos pos;
    char out[256];

    (void)state;
    assert_false(rws_acked(inst, &pos));
    rws_publish(inst, "0-1-100");
    rws_publish(inst, "0-1-90");   /* answered late: older */
    rws_publish(inst, "1-1-3");
    assert_true(rws_acked(inst, &pos));
    rws_pos_format(inst, &pos, out, sizeof(out));
    assert_string_equal(out, "0-0-100,1-0-3");
    assert_false(atomic_load(&inst->gtid_overflow));
    free_inst(inst);
}

static void
test_known(void **state)
{
    struct rws_instance *inst = new_inst(3);
    struct rws_pos need, got;

    (void)state;
    rws_publish(inst, "0-1-100,1-1-5");
    assert_true(rws_acked(inst, &need));
    assert_false(rws_known_covers(inst, 1, &need));
    assert_true(rws_pos_parse(inst, "0-1-100", &got, false));
    rws_known_learn(inst, 1, &got);
    assert_false(rws_known_covers(inst, 1, &need));   /* domain 1 */
    assert_true(rws_pos_parse(inst, "0-1-50,1-1-5", &got, false));
    rws_known_learn(inst, 1, &got);                   /* 0 stays 100 */
    assert_true(rws_known_covers(inst, 1, &need));
    assert_false(rws_known_covers(inst, 2, &need));   /* per server */
    rws_publish(inst, "0-1-101");
    assert_true(rws_acked(inst, &need));
    assert_false(rws_known_covers(inst, 1, &need));
    free_inst(inst);
}

static void
test_overflow(void **state)
{
    struct rws_instance *inst = new_inst(1);
    char g[32];

    (void)state;
    for (int d = 0; d < RWS_DOMAINS; d++) {
        snprintf(g, sizeof(g), "%d-1-1", d);
        rws_publish(inst, g);
    }
    assert_false(atomic_load(&inst->gtid_overflow));
    rws_publish(inst, "99-1-1");
    assert_true(atomic_load(&inst->gtid_overflow));
    free_inst(inst);
}

struct pub_arg {
    struct rws_instance *inst;
    int base;
};

static void *
publisher(void *p)
{
    struct pub_arg *a = p;
    char g[48];

    for (int i = 1; i <= 20000; i++) {
        snprintf(g, sizeof(g), "%d-1-%d", i % 3, i * 4 + a->base);
        rws_publish(a->inst, g);
    }
    return NULL;
}

static void
test_concurrent_publish(void **state)
{
    struct rws_instance *inst = new_inst(1);
    pthread_t t[4];
    struct pub_arg args[4];
    struct rws_pos pos;
    char out[256];

    (void)state;
    for (int k = 0; k < 4; k++) {
        args[k] = (struct pub_arg){inst, k};
        assert_int_equal(pthread_create(&t[k], NULL, publisher, &args[k]),
                         0);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(t[k], NULL);
    }
    assert_true(rws_acked(inst, &pos));
    /* per domain the largest i * 4 + 3 with i % 3 == domain: one slot
     * each, whatever order the threads claimed them in */
    assert_true(rws_pos_parse(inst, "0-1-79995,1-1-79999,2-1-80003", &pos,
                              false));
    {
        struct rws_pos acked;
        assert_true(rws_acked(inst, &acked));
        assert_memory_equal(&acked, &pos, sizeof(pos));
    }
    rws_pos_format(inst, &pos, out, sizeof(out));
    assert_int_equal(strlen(out), strlen("0-0-79995,1-0-79999,2-0-80003"));
    assert_false(atomic_load(&inst->gtid_overflow));
    free_inst(inst);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_format),
        cmocka_unit_test(test_publish_never_lowers),
        cmocka_unit_test(test_known),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_concurrent_publish),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
