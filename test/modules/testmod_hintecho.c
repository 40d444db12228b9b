/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A router for the filter system tests: it opens no backend and answers
 * every SELECT itself with one row describing the routing hint the filters
 * attached to it (columns hint_type and hint_server; type 0 = none, see
 * enum sl_hint_type), and every other statement with OK. It proves what
 * hintfilter and namedserverfilter set, independent of any real router.
 */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/router.h>
#include <sluice/session.h>

static int instance;

static void *
create_instance(struct sl_service *svc, const struct sl_params *p)
{
    (void)svc;
    (void)p;
    return &instance;
}

static void
destroy_instance(void *inst)
{
    (void)inst;
}

static void *
new_session(void *inst, struct sl_session *ses)
{
    (void)inst;
    return ses;
}

static void
free_session(void *rses)
{
    (void)rses;
}

static bool
is_select(struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);
    unsigned char *p;

    if (len < SL_MDB_HDR_LEN + 7 || sl_mdb_command(buf) != SL_COM_QUERY) {
        return false;
    }
    p = sl_buf_pullup(buf, SL_MDB_HDR_LEN + 7);
    return p != NULL && strncasecmp((char *)p + 5, "SELECT", 6) == 0;
}

static int
route_query(void *rses, struct sl_buf *buf)
{
    struct sl_session *ses = rses;
    struct sl_hint hint = {0};
    struct sl_reply reply = {0};
    const char *names[] = {"hint_type", "hint_server"};
    char type[16];
    const char *values[2] = {type, NULL};
    struct sl_buf *out;
    bool sel = is_select(buf);

    reply.command = (uint8_t)sl_mdb_command(buf);
    sl_buf_free(buf);
    sl_session_take_hint(ses, &hint);
    snprintf(type, sizeof(type), "%d", (int)hint.type);
    values[1] = hint.type == SL_HINT_ROUTE_TO_NAMED_SERVER ? hint.server : "";
    if (sel) {
        out = sl_mdb_make_resultset_for(
            1, sl_session_client_caps(ses), SL_SERVER_STATUS_AUTOCOMMIT, 2,
            names, 1, values);
        reply.results = 1;
        reply.rows = 1;
    } else {
        out = sl_mdb_make_ok(1, 0, 0, SL_SERVER_STATUS_AUTOCOMMIT, 0);
        reply.is_ok = true;
    }
    if (out == NULL) {
        return SL_ERROR;
    }
    reply.state = SL_REPLY_DONE;
    reply.complete = true;
    return sl_session_reply(ses, out, &reply);
}

static const struct sl_router_ops ops = {
    .size = sizeof(ops),
    .create_instance = create_instance,
    .destroy_instance = destroy_instance,
    .new_session = new_session,
    .free_session = free_session,
    .route_query = route_query,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_ROUTER,
    .name = "testmod_hintecho",
    .version = "1.0",
    .ops = &ops,
});
