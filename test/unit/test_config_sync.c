/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for configuration synchronization (server/core/config_sync.c):
 * which REST requests are synchronized (method and path), and the whole-
 * document check a version from the cluster passes before anything of it
 * is applied (shape, contiguous versions, every change a synchronized
 * route of the real routing table).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "admin_int.h"

static bool
synced(const char *method, const char *url)
{
    char *buf = NULL;
    char *seg[8];
    int nseg = 0;
    bool r;

    assert_int_equal(sl__admin_split_path(url, &buf, seg, 8, &nseg), 0);
    r = sl__csync_synced_path(method, seg, nseg);
    free(buf);
    return r;
}

static void
test_synced_requests(void **state)
{
    (void)state;
    assert_true(synced("POST", "/v1/servers"));
    assert_true(synced("POST", "/v1/filters"));
    assert_true(synced("POST", "/v1/services/S/listeners"));
    assert_true(synced("PATCH", "/v1/services/S"));
    assert_true(synced("PATCH", "/v1/monitors/M/relationships/servers"));
    assert_true(synced("PATCH", "/v1/services/S/relationships/servers"));
    assert_true(synced("DELETE", "/v1/filters/F"));
    assert_true(synced("DELETE", "/v1/services/S/listeners/L"));
    /* global parameters are (minus the instance-local ones, filtered
     * from the body); per-instance state and credentials are not */
    assert_true(synced("PATCH", "/v1/maxscale"));
    assert_false(synced("POST", "/v1/maxscale"));
    assert_false(synced("PATCH", "/v1/maxscale/logs"));
    assert_false(synced("PUT", "/v1/servers/db1/set"));
    assert_false(synced("PUT", "/v1/services/S/stop"));
    assert_false(synced("POST", "/v1/users/inet"));
    assert_false(synced("DELETE", "/v1/users/inet/bob"));
    assert_false(synced("POST", "/v1/maxscale/modules/mariadbmon/switchover"));
    assert_false(synced("DELETE", "/v1/sluice/queries"));
    assert_false(synced("GET", "/v1/servers"));
    assert_false(synced("PATCH", "/v1/filters/F/relationships/servers"));
    assert_false(synced("POST", "/v1/servers/db1"));
}

static int
check(const char *text, long long version, char *msg, size_t len)
{
    json_t *doc = json_loads(text, 0, NULL);
    int rc;

    assert_non_null(doc);
    msg[0] = '\0';
    rc = sl__csync_check_doc(doc, version, msg, len);
    json_decref(doc);
    return rc;
}

static void
test_document_check(void **state)
{
    char msg[512];

    (void)state;
    sl__csync_set_routing(sl__admin_route_find, sl__admin_split_path);
    assert_int_equal(check("{\"changes\": []}", 0, msg, sizeof(msg)), 0);
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"POST\", \"path\": "
        "\"servers\", \"body\": {\"data\": {}}}, {\"version\": 2, "
        "\"method\": \"DELETE\", \"path\": \"servers/x\", \"body\": null}]}",
        2, msg, sizeof(msg)), 0);
    /* not the shape */
    assert_int_equal(check("{\"changes\": 17}", 1, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "\"changes\" array"));
    assert_int_equal(check("[]", 0, msg, sizeof(msg)), -1);
    /* one entry per version, numbered 1..N */
    assert_int_equal(check("{\"changes\": []}", 1, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "0 changes for version 1"));
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 2, \"method\": \"POST\", \"path\": "
        "\"servers\", \"body\": {}}]}", 1, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "change 1: \"version\" is not 1"));
    /* fields */
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"path\": \"servers\"}]}", 1, msg,
        sizeof(msg)), -1);
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"POST\", \"path\": "
        "\"servers\", \"body\": \"x\"}]}", 1, msg, sizeof(msg)), -1);
    /* routes: a state change, a user, an unknown path */
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"PUT\", \"path\": "
        "\"servers/db1/set\"}]}", 1, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "not a synchronized REST change"));
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"POST\", \"path\": "
        "\"users/inet\", \"body\": {}}]}", 1, msg, sizeof(msg)), -1);
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"POST\", \"path\": "
        "\"nothing/here/at/all\", \"body\": {}}]}", 1, msg, sizeof(msg)),
        -1);
    /* PATCH maxscale: its synchronized parameters, never passive */
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"PATCH\", \"path\": "
        "\"maxscale\", \"body\": {\"data\": {\"attributes\": "
        "{\"parameters\": {\"log_info\": true}}}}}]}", 1, msg, sizeof(msg)),
        0);
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"PATCH\", \"path\": "
        "\"maxscale\", \"body\": {\"data\": {\"attributes\": "
        "{\"parameters\": {\"passive\": true}}}}}]}", 1, msg, sizeof(msg)),
        -1);
    assert_non_null(strstr(msg, "'passive', a parameter each instance "
                                "keeps its own"));
    /* encrypted passwords need a key (this process has none) */
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"POST\", \"path\": "
        "\"servers\", \"encrypted\": true, \"body\": {}}]}", 1, msg,
        sizeof(msg)), -1);
    assert_non_null(strstr(msg, "no .secrets key"));
    assert_int_equal(check(
        "{\"changes\": [{\"version\": 1, \"method\": \"POST\", \"path\": "
        "\"servers\", \"encrypted\": 1, \"body\": {}}]}", 1, msg,
        sizeof(msg)), -1);
    assert_non_null(strstr(msg, "\"encrypted\" is not a boolean"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synced_requests),
        cmocka_unit_test(test_document_check),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
